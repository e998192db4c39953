package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/internal/apperr"
)

func verifyAuditLog(t *testing.T, s *postgres.Store, k *auditlog.Key) auditlog.Report {
	t.Helper()
	ctx := context.Background()
	snap, err := s.AuditSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	rep, err := auditlog.Verify(ctx, snap, auditlog.VerifyOptions{Verifier: k.Verifier, Sealer: k.Sealer})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// testKey is the key the test process's stores seal with (pgtest.Seal).
func testKey(t *testing.T) *auditlog.Key {
	t.Helper()
	k, err := auditlog.EphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// anotherReplica is a second store on db's database, as another API replica has.
func anotherReplica(t *testing.T, db *pgtest.DB) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pgtest.Seal(t, s)
	return s
}

// Two replicas (two stores on one database) record events at once: the events form one
// tree, leaf indexes follow ids, and every event is proved against a checkpoint.
func TestAuditLogIsOneTreeAcrossReplicas(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	other := anotherReplica(t, db)
	stores := []*postgres.Store{db.Store, other}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				e := audit.Event{Actor: fmt.Sprintf("replica-%d", w%2), Action: "registerMachine", Machine: fmt.Sprintf("node-%d", i%3),
					Outcome: audit.Succeeded, RequestID: fmt.Sprintf("req-%d-%d", w, i),
					Parameters: map[string]any{"name": "node", "n": 1e20 + float64(i), "nested": map[string]any{"b": []any{1, "ü", nil}, "a": true}},
					Details:    map[string]any{"checks": []any{map[string]any{"name": "cpu", "ok": i%2 == 0}}}}
				if i%5 == 0 {
					e.Outcome, e.Error = audit.Refused, "not allowed"
				}
				if err := stores[w%2].RecordAudit(ctx, e); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var misplaced int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT leaf_index, row_number() OVER (ORDER BY id) - 1 AS want FROM audit_events) x
		WHERE leaf_index IS DISTINCT FROM want`).Scan(&misplaced); err != nil || misplaced != 0 {
		t.Fatalf("%d events have a leaf index out of id order (%v)", misplaced, err)
	}

	k := testKey(t)
	if rep := verifyAuditLog(t, db.Store, k); rep.Problem != nil || rep.Events != 100 {
		t.Fatalf("verify before any checkpoint: %+v %v", rep, rep.Problem)
	}
	svc := auditlog.NewService(db.Store, k, auditlog.Options{})
	if _, err := svc.Prove(ctx, 1); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("a proof before any checkpoint: %v", err)
	}
	c, made, err := svc.Checkpoint(ctx)
	if err != nil || !made || c.Size != 100 {
		t.Fatalf("checkpoint: %+v %v %v", c, made, err)
	}
	if again, made, err := auditlog.NewService(other, k, auditlog.Options{}).Checkpoint(ctx); err != nil || made || again.Size != 100 {
		t.Fatalf("a second checkpoint of the same tree: %+v %v %v", again, made, err)
	}
	if tree, err := auditlog.ParseCheckpoint([]byte(c.Signed), k.Verifier); err != nil || tree.N != 100 || tree.Hash != c.Root {
		t.Fatalf("the signed checkpoint reads back as %+v, %v", tree, err)
	}
	if err := db.Store.RecordAudit(ctx, audit.Event{Actor: "late", Action: "registerMachine", Outcome: audit.Succeeded, RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	if rep := verifyAuditLog(t, db.Store, k); rep.Problem != nil || rep.Events != 101 || rep.Checkpoints != 1 {
		t.Fatalf("verify: %+v %v", rep, rep.Problem)
	}
	var ids []int64
	rows, _ := db.Store.Pool().Query(ctx, `SELECT id FROM audit_events ORDER BY id`)
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != 101 {
		t.Fatalf("read ids: %v (%d)", rows.Err(), len(ids))
	}
	for i, id := range ids[:100] {
		p, err := svc.Prove(ctx, id)
		if err != nil {
			t.Fatalf("prove event %d: %v", id, err)
		}
		if p.LeafIndex != int64(i) || p.Checkpoint.Size != 100 {
			t.Fatalf("event %d: leaf %d in a tree of %d", id, p.LeafIndex, p.Checkpoint.Size)
		}
		hashes := make([]string, len(p.Hashes))
		for j, h := range p.Hashes {
			hashes[j] = h.String()
		}
		parsed, err := auditlog.ParseProof(hashes)
		if err != nil {
			t.Fatal(err)
		}
		p.Hashes = parsed
		if err := p.Check(); err != nil {
			t.Fatalf("event %d: %v", id, err)
		}
		p.LeafIndex ^= 1
		if p.Check() == nil {
			t.Fatalf("event %d's proof also proves leaf %d", id, p.LeafIndex)
		}
	}
	if _, err := svc.Prove(ctx, ids[100]); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("a proof of an event newer than the checkpoint: %v", err)
	}
	if _, err := svc.Prove(ctx, ids[100]+1000); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("a proof of no event: %v", err)
	}
}

// A replica keeps the tree's right edge in memory between its appends; an append of its
// that rolls back (here at commit, by a deferred trigger) must not leave it appending to a
// tree that does not exist, whether or not another replica appended in between (then the
// tree has the size the replica expects, with another last leaf).
func TestAuditLogAppendAfterARolledBackAppend(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	other := anotherReplica(t, db)
	if _, err := db.Store.Pool().Exec(ctx, `CREATE FUNCTION doomed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.actor = 'doomed' THEN RAISE EXCEPTION 'doomed at commit'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER doomed AFTER INSERT ON audit_events DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION doomed()`); err != nil {
		t.Fatal(err)
	}
	record := func(s *postgres.Store, actor string) error {
		return s.RecordAudit(ctx, audit.Event{Actor: actor, Action: "registerMachine", Outcome: audit.Refused, RequestID: "req-" + actor})
	}
	steps := []struct {
		store  *postgres.Store
		actor  string
		commit bool
	}{
		{db.Store, "a1", true},
		{db.Store, "doomed", false},
		{other, "b1", true}, // the tree now has the size db.Store kept, with b1's leaf last
		{db.Store, "a2", true},
		{db.Store, "a3", true}, // completes the first 4 leaves' subtree from db.Store's edge
		{db.Store, "doomed", false},
		{db.Store, "a4", true}, // the tree is one leaf shorter than db.Store kept
		{other, "b2", true},
	}
	for i, st := range steps {
		if err := record(st.store, st.actor); (err == nil) != st.commit {
			t.Fatalf("step %d (%s): %v", i, st.actor, err)
		}
	}
	if rep := verifyAuditLog(t, db.Store, testKey(t)); rep.Problem != nil || rep.Events != 6 {
		t.Fatalf("verify: %+v %v", rep, rep.Problem)
	}
}

// Rows a database superuser deleted from audit_events leave the tree appendable, from
// this process and from a new one alike: the tree's size is the stored tree hashes', so
// the next event takes the next leaf, and verify names the deletion rather than the
// appends refusing every mutation.
func TestAuditLogAppendsAfterRowsWereDeletedInTheDatabase(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	record := func(s *postgres.Store, actor string) {
		t.Helper()
		if err := s.RecordAudit(ctx, audit.Event{Actor: actor, Action: "registerMachine", Outcome: audit.Refused, RequestID: "req-" + actor}); err != nil {
			t.Fatalf("%s: %v", actor, err)
		}
	}
	for i := range 5 {
		record(db.Store, fmt.Sprint("a", i))
	}
	tx, err := db.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET LOCAL session_replication_role = replica`, `DELETE FROM audit_events`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	record(db.Store, "after")
	record(anotherReplica(t, db), "fresh")
	var leaves []int64
	rows, err := db.Store.Pool().Query(ctx, `SELECT leaf_index FROM audit_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l int64
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, l)
	}
	if rows.Err() != nil || fmt.Sprint(leaves) != "[5 6]" {
		t.Fatalf("leaves after the deletion: %v %v", leaves, rows.Err())
	}
	rep := verifyAuditLog(t, db.Store, testKey(t))
	if rep.Problem == nil {
		t.Fatalf("verify passed over 5 deleted events: %+v", rep)
	}
	t.Logf("verify: %v", rep.Problem)
}

// Rows recorded before migration 0010 get their leaves from it, in id order, and their
// seals once, from the first start that holds the audit key (SealAuditBacklog).
func TestAuditLogMigrationBackfillsExistingRows(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	// Back to the schema before 0010, with rows written by then.
	if _, err := db.Store.Pool().Exec(ctx, `DROP TABLE audit_tree_hashes, audit_checkpoints;
		DROP FUNCTION audit_refuse_truncate() CASCADE;
		ALTER TABLE audit_events DROP COLUMN leaf_index, DROP COLUMN leaf_hash, DROP COLUMN seal;
		DELETE FROM schema_migrations WHERE version IN (10, 16, 20);
		INSERT INTO audit_events (at, actor, action, machine, parameters, outcome, error, request_id, details)
		SELECT now() - make_interval(secs => 25000 - i), 'admin', 'registerMachine', CASE WHEN i % 3 = 0 THEN NULL ELSE 'node-' || i END,
			jsonb_build_object('name', 'node-' || i, 'i', i), CASE WHEN i % 7 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
			CASE WHEN i % 7 = 0 THEN 'it failed' END, 'req-' || i, '{}'
		FROM generate_series(1, 25000) i`); err != nil {
		t.Fatal(err)
	}
	applied, err := db.Store.Migrate(ctx)
	if err != nil || len(applied) != 3 {
		t.Fatalf("migrate: %v %v", applied, err)
	}
	k := testKey(t)
	if _, _, err := auditlog.NewService(db.Store, k, auditlog.Options{}).Checkpoint(ctx); err == nil {
		t.Fatal("a checkpoint was signed over events that are not sealed")
	}
	if n, err := db.Store.SealAuditBacklog(ctx, k.Sealer); err != nil || n != 25000 {
		t.Fatalf("seal the backlog: %d %v", n, err)
	}
	if n, err := db.Store.SealAuditBacklog(ctx, k.Sealer); err != nil || n != 0 {
		t.Fatalf("seal the backlog again: %d %v", n, err)
	}
	if _, made, err := auditlog.NewService(db.Store, k, auditlog.Options{}).Checkpoint(ctx); err != nil || !made {
		t.Fatalf("checkpoint: %v %v", made, err)
	}
	if err := db.Store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "registerMachine", Outcome: audit.Succeeded, RequestID: "after"}); err != nil {
		t.Fatal(err)
	}
	if rep := verifyAuditLog(t, db.Store, k); rep.Problem != nil || rep.Events != 25001 || rep.Checkpoints != 1 {
		t.Fatalf("verify after the backfill: %+v %v", rep, rep.Problem)
	}
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE audit_events SET actor = 'x' WHERE id = 1`); err == nil {
		t.Fatal("the trail is no longer append-only after the backfill")
	}
}

// The head an append makes reaches the witness only once its transaction committed: a
// rolled-back append (here refused at commit by a deferred trigger) is never witnessed,
// so it raises no false alarm; a process without the audit key appends nothing.
func TestAuditAppendWitnessesOnlyCommittedHeads(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	var heads []auditlog.Head
	db.Store.OnAuditAppended(func(h auditlog.Head) {
		mu.Lock()
		defer mu.Unlock()
		heads = append(heads, h)
	})
	if _, err := db.Store.Pool().Exec(ctx, `CREATE FUNCTION doomed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.actor = 'doomed' THEN RAISE EXCEPTION 'doomed at commit'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER doomed AFTER INSERT ON audit_events DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION doomed()`); err != nil {
		t.Fatal(err)
	}
	record := func(s *postgres.Store, actor string) error {
		return s.RecordAudit(ctx, audit.Event{Actor: actor, Action: "registerMachine", Outcome: audit.Refused, RequestID: "req-" + actor})
	}
	for _, actor := range []string{"a", "doomed", "b"} {
		if err := record(db.Store, actor); (err == nil) != (actor != "doomed") {
			t.Fatalf("%s: %v", actor, err)
		}
	}
	k := testKey(t)
	mu.Lock()
	got := append([]auditlog.Head(nil), heads...)
	mu.Unlock()
	if len(got) != 2 || got[0].Size != 1 || got[1].Size != 2 {
		t.Fatalf("witnessed %+v, want the heads of 1 and 2 events", got)
	}
	tip, err := db.Store.AuditTip(ctx)
	if err != nil || tip.Size != 2 || tip.Newest == nil || !k.Sealer.Checker()(got[1], tip.Newest.Seal) {
		t.Fatalf("the newest event is not sealed for the head witnessed: %+v %v", tip, err)
	}

	keyless := anotherReplica(t, db)
	keyless.SealAuditWith(nil)
	err = record(keyless, "keyless")
	if !apperr.Is(err, apperr.Unavailable) || !strings.Contains(err.Error(), "holds no audit key") {
		t.Fatalf("an append without the audit key: %v", err)
	}
	if err := keyless.AuditAppendable(ctx); err == nil {
		t.Fatal("a store without the audit key says it can append")
	}
	if n, _ := db.Store.AuditTreeSize(ctx); n != 2 {
		t.Fatalf("the tree has %d events after an append without the key", n)
	}
}

// Two replicas append at once while each checks the trail and signs checkpoints in a loop,
// as RunCheckpoints does: no check ever finds a problem (a checkpoint another replica signs
// after this one read the tree, an append committed between two reads, are no false
// alarms), and the trail verifies with both replicas' witnesses.
func TestAuditChecksRaiseNothingWhileReplicasAppendAndSign(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	k := testKey(t)
	stores := []*postgres.Store{db.Store, anotherReplica(t, db)}
	var services []*auditlog.Service
	for _, s := range stores {
		w, err := auditlog.OpenWitness("")
		if err != nil {
			t.Fatal(err)
		}
		s.OnAuditAppended(w.Appended)
		services = append(services, auditlog.NewService(s, k, auditlog.Options{Witness: w}))
	}
	var appends sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 4 {
		appends.Add(1)
		go func() {
			defer appends.Done()
			for i := range 60 {
				if err := stores[w%2].RecordAudit(ctx, audit.Event{Actor: fmt.Sprint("replica-", w%2), Action: "registerMachine",
					Outcome: audit.Succeeded, RequestID: fmt.Sprintf("req-%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	var checkers sync.WaitGroup
	checks := make([]int, len(services))
	for i, svc := range services {
		checkers.Add(1)
		go func() {
			defer checkers.Done()
			for {
				st, err := svc.Check(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !st.Verified {
					errs <- fmt.Errorf("replica %d's check found a problem: %s", i, st.Problem)
					return
				}
				if _, _, err := svc.Checkpoint(ctx); err != nil {
					errs <- fmt.Errorf("replica %d could not sign: %v", i, err)
					return
				}
				checks[i]++
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	appends.Wait()
	close(done)
	checkers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, svc := range services {
		if st, err := svc.Check(ctx); err != nil || !st.Verified {
			t.Fatalf("after the appends: %+v %v", st, err)
		}
	}
	var heads []auditlog.Witnessed
	for _, svc := range services {
		heads = append(heads, svc.Witness().Heads()...)
	}
	snap, err := db.Store.AuditSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	rep, err := auditlog.Verify(ctx, snap, auditlog.VerifyOptions{Verifier: k.Verifier, Sealer: k.Sealer, Witnessed: heads})
	if err != nil || rep.Problem != nil || rep.Events != 240 || rep.Sealed != 240 {
		t.Fatalf("verify: %+v %v %v", rep, rep.Problem, err)
	}
	t.Logf("checks while appending: %v; %d checkpoints, %d witnessed heads held", checks, rep.Checkpoints, rep.Witnessed)
}
