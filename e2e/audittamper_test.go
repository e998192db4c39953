package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/producttest"
)

// tamperInterval is the product's APELORA_AUDIT_CHECKPOINT_INTERVAL in the tamper suite:
// the trail is checked, and a checkpoint signed, every second.
const tamperInterval = time.Second

// tamperWait bounds every wait for the server: many intervals, so a loaded machine passes.
const tamperWait = 60 * time.Second

// trail is a product with a state folder (the audit key and the replica's witness), an
// administrator, and an audit trail of six identities created through the API, under a
// checkpoint.
type tamperTrail struct {
	t     *testing.T
	e     *producttest.Env
	state string
	admin string
	made  int
}

func startTrail(t *testing.T) *tamperTrail {
	t.Helper()
	state := t.TempDir()
	e := producttest.Start(t, func(c *app.Config) { c.StateDir, c.AuditCheckpointInterval = state, tamperInterval })
	tr := &tamperTrail{t: t, e: e, state: state, admin: e.Identity("admin", identity.ManageInfrastructure)}
	tr.mutate(6)
	tr.waitCheckpoint()
	return tr
}

const createReader = `mutation($n: String!) { createIdentity(input: {name: $n, permissions: [VIEW_INFRASTRUCTURE]}) { token } }`

// mutate creates k identities through the API: k audit events.
func (tr *tamperTrail) mutate(k int) {
	tr.t.Helper()
	for range k {
		tr.made++
		tr.e.MustGQL(tr.admin, createReader, map[string]any{"n": fmt.Sprintf("reader-%d", tr.made)})
	}
}

// size is the stored tree's size.
func (tr *tamperTrail) size() int64 {
	tr.t.Helper()
	n, err := tr.e.DB.Store.AuditTreeSize(context.Background())
	if err != nil {
		tr.t.Fatal(err)
	}
	return n
}

// ids are the events' ids, in id order.
func (tr *tamperTrail) ids() []int64 {
	tr.t.Helper()
	rows, err := tr.e.DB.Store.Pool().Query(context.Background(), `SELECT id FROM audit_events ORDER BY id`)
	if err != nil {
		tr.t.Fatal(err)
	}
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			tr.t.Fatal(err)
		}
		out = append(out, id)
	}
	if rows.Err() != nil {
		tr.t.Fatal(rows.Err())
	}
	return out
}

// largestCheckpoint is the largest checkpoint row's size (0: none).
func (tr *tamperTrail) largestCheckpoint() int64 {
	tr.t.Helper()
	var n int64
	if err := tr.e.DB.Store.Pool().QueryRow(context.Background(), `SELECT coalesce(max(tree_size), 0) FROM audit_checkpoints`).Scan(&n); err != nil {
		tr.t.Fatal(err)
	}
	return n
}

// waitCheckpoint waits until the server signed a checkpoint of every event, and returns
// its size.
func (tr *tamperTrail) waitCheckpoint() int64 {
	tr.t.Helper()
	n := tr.size()
	for deadline := time.Now().Add(tamperWait); tr.largestCheckpoint() < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			tr.t.Fatalf("no checkpoint of %d events within %s\n%s", n, tamperWait, tr.e.Logs)
		}
	}
	return n
}

// superuser runs stmts as the database's superuser in one transaction, with the audit
// tables' triggers off (session_replication_role), as someone who wants no trace would.
func (tr *tamperTrail) superuser(stmts string) {
	tr.t.Helper()
	if _, err := tr.e.DB.Store.Pool().Exec(context.Background(), `SET session_replication_role = replica; `+stmts+`; SET session_replication_role = DEFAULT`); err != nil {
		tr.t.Fatalf("tamper: %v", err)
	}
}

// deleteNewest deletes the newest event, and with hashes its tree hashes.
func (tr *tamperTrail) deleteNewest(hashes bool) {
	tr.t.Helper()
	n := tr.size()
	ids := tr.ids()
	q := fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, ids[len(ids)-1])
	if hashes {
		q += fmt.Sprintf(`; DELETE FROM audit_tree_hashes WHERE storage_index >= %d`, tlog.StoredHashIndex(0, n-1))
	}
	tr.superuser(q)
}

// root is the stored tree's root at n events.
func (tr *tamperTrail) root(n int64) tlog.Hash {
	tr.t.Helper()
	ctx := context.Background()
	h, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return tr.e.DB.Store.AuditTreeHashes(ctx, idx) }))
	if err != nil {
		tr.t.Fatal(err)
	}
	return h
}

// forge appends an event as someone who knows RFC 6962 but not the audit key: its leaf
// hash, leaf index and the tree hashes it completes computed, sealed with k (nil: none).
func (tr *tamperTrail) forge(k *auditlog.Key) int64 {
	tr.t.Helper()
	ctx := context.Background()
	n := tr.size()
	// Every new event must be sealed (migration 0020): a superuser drops that rule first.
	tr.superuser(`ALTER TABLE audit_events DROP CONSTRAINT audit_events_sealed`)
	var r auditlog.Record
	err := tr.e.DB.Store.Pool().QueryRow(ctx, `INSERT INTO audit_events (actor, action, outcome, request_id) VALUES ('mallory', 'createIdentity', 'SUCCEEDED', 'forged')
		RETURNING id, at, actor, action, coalesce(machine, ''), outcome, coalesce(error, ''), request_id, parameters::text, details::text`).
		Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Machine, &r.Outcome, &r.Error, &r.RequestID, &r.Parameters, &r.Details)
	if err != nil {
		tr.t.Fatal(err)
	}
	hashes, err := tlog.StoredHashes(n, r.Leaf(), tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return tr.e.DB.Store.AuditTreeHashes(ctx, idx) }))
	if err != nil {
		tr.t.Fatal(err)
	}
	var q strings.Builder
	for i, h := range hashes {
		fmt.Fprintf(&q, `INSERT INTO audit_tree_hashes VALUES (%d, '\x%x'); `, tlog.StoredHashIndex(0, n)+int64(i), h[:])
	}
	tr.superuser(q.String())
	seal := "NULL"
	if k != nil {
		seal = fmt.Sprintf(`'\x%x'`, k.Sealer.Seal(auditlog.Head{Size: n + 1, Root: tr.root(n + 1)}))
	}
	leaf := r.LeafHash()
	tr.superuser(fmt.Sprintf(`UPDATE audit_events SET leaf_index = %d, leaf_hash = '\x%x', seal = %s WHERE id = %d`, n, leaf[:], seal, r.ID))
	return r.ID
}

// checkpointRow inserts a checkpoint row of size rowSize whose text k signed for the tree
// (n, root).
func (tr *tamperTrail) checkpointRow(k *auditlog.Key, n int64, root tlog.Hash, rowSize int64) {
	tr.t.Helper()
	signed, err := auditlog.SignCheckpoint(k, auditlog.Head{Size: n, Root: root})
	if err != nil {
		tr.t.Fatal(err)
	}
	if _, err := tr.e.DB.Store.Pool().Exec(context.Background(), `INSERT INTO audit_checkpoints (tree_size, root_hash, signed) VALUES ($1, $2, $3)`,
		rowSize, root[:], signed); err != nil {
		tr.t.Fatal(err)
	}
}

// verify runs `apelora audit verify` as on the replica's host: its state folder holds
// the audit key and the replica's witness.
func (tr *tamperTrail) verify(args ...string) (string, error) {
	tr.t.Helper()
	cmd := exec.Command(buildCommand(tr.t, "github.com/apelora/fabric/cmd/apelora"), append([]string{"audit", "verify"}, args...)...)
	cmd.Env = append(withoutApeloraEnv(), "APELORA_DATABASE_URL="+tr.e.DB.URL, "APELORA_STATE_DIR="+tr.state, "APELORA_LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// named runs verify and fails unless it exits 1 naming every one of want.
func (tr *tamperTrail) named(want ...string) {
	tr.t.Helper()
	out, err := tr.verify()
	if err == nil {
		tr.t.Fatalf("apelora audit verify passed:\n%s", out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			tr.t.Fatalf("apelora audit verify does not say %q:\n%s", w, out)
		}
	}
	tr.t.Logf("apelora audit verify: %s", strings.TrimSpace(out))
}

type trailState struct {
	Verifies  bool    `json:"verifies"`
	Since     *string `json:"since"`
	Problem   *string `json:"problem"`
	CheckedAt *string `json:"checkedAt"`
}

func (tr *tamperTrail) status() trailState {
	tr.t.Helper()
	d := tr.e.MustGQL(tr.admin, `{ auditTrail { verifies since problem checkedAt } }`, nil)
	b, _ := json.Marshal(d["auditTrail"])
	var s trailState
	if err := json.Unmarshal(b, &s); err != nil {
		tr.t.Fatal(err)
	}
	return s
}

// raised waits until the running server says the trail does not verify, with every one
// of want in its problem, and has logged it at ERROR; it returns the problem.
func (tr *tamperTrail) raised(want ...string) string {
	tr.t.Helper()
	start := time.Now()
	var last trailState
	for deadline := start.Add(tamperWait); ; time.Sleep(50 * time.Millisecond) {
		last = tr.status()
		if !last.Verifies && last.Problem != nil && containsAll(*last.Problem, want) {
			break
		}
		if time.Now().After(deadline) {
			p := "(none)"
			if last.Problem != nil {
				p = *last.Problem
			}
			tr.t.Fatalf("the server did not raise %q within %s: verifies %v, problem %s\n%s", want, tamperWait, last.Verifies, p, tr.e.Logs)
		}
	}
	if last.Since == nil {
		tr.t.Fatal("auditTrail does not say since when")
	}
	logged := false
	for _, l := range strings.Split(tr.e.Logs.String(), "\n") {
		logged = logged || (strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, "the audit trail does not verify"))
	}
	if !logged {
		tr.t.Fatalf("no ERROR line says the audit trail does not verify:\n%s", tr.e.Logs)
	}
	tr.t.Logf("raised by the server %s after the change: %s", time.Since(start).Round(time.Millisecond), *last.Problem)
	return *last.Problem
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// nextCheck waits until a check of the trail that began after now has ended (and the
// signing that follows it in the same round).
func (tr *tamperTrail) nextCheck() {
	tr.t.Helper()
	from := time.Now()
	for deadline := from.Add(tamperWait); ; time.Sleep(50 * time.Millisecond) {
		// Two checks later than now: the first may have begun before it.
		if s := tr.status(); s.CheckedAt != nil {
			if at, err := time.Parse(time.RFC3339Nano, *s.CheckedAt); err == nil && at.After(from.Add(tamperInterval)) {
				time.Sleep(200 * time.Millisecond) // the round's signing, after its check
				return
			}
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("no check of the trail within %s", tamperWait)
		}
	}
}

// readyz is /readyz's status and body.
func (tr *tamperTrail) readyz() (int, map[string]string) {
	tr.t.Helper()
	resp, err := http.Get(tr.e.Base + "/readyz")
	if err != nil {
		tr.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]string
	if err := json.Unmarshal(raw, &body); err != nil {
		tr.t.Fatalf("/readyz: %s", raw)
	}
	return resp.StatusCode, body
}

// servesGoodCheckpoints checks that the API serves a checkpoint of at least n events that
// its verifier key verifies, and proves the first event against it (no INTERNAL).
func (tr *tamperTrail) servesGoodCheckpoints(n int64) {
	tr.t.Helper()
	cp := tr.e.MustGQL(tr.admin, auditCheckpointQuery, nil)["auditCheckpoint"].(map[string]any)
	v, err := auditlog.ParseVerifierKey(cp["verifierKey"].(string))
	if err != nil {
		tr.t.Fatal(err)
	}
	tree, err := auditlog.ParseCheckpoint([]byte(cp["signed"].(string)), v)
	if err != nil || tree.N < n || tree.N != int64(cp["treeSize"].(float64)) {
		tr.t.Fatalf("auditCheckpoint serves %v (%+v, %v), want a checkpoint of at least %d events its key verifies", cp, tree, err, n)
	}
	r := tr.e.GQL(tr.admin, auditProofQuery, map[string]any{"id": fmt.Sprint(tr.ids()[0])})
	if len(r.Errors) > 0 {
		tr.t.Fatalf("auditProof of the first event: %+v", r.Errors)
	}
}

func otherAuditKey(t *testing.T) *auditlog.Key {
	t.Helper()
	k, _, err := auditlog.LoadOrCreateKey(filepath.Join(t.TempDir(), auditlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The tamper suite (issue 25): each change a database superuser can make to the audit
// trail, on a fresh product, is named by `apelora audit verify` on the replica's host and
// raised by the running server (auditTrail, an ERROR line) within a checkpoint interval
// or so; the server never signs a checkpoint over it, never serves a checkpoint its key does
// not verify, and goes on recording changes unless the stored tree cannot take them.
func TestAuditTamperIsNamedAndRaised(t *testing.T) {
	parallel(t, lasts(56))
	cases := []struct {
		name string
		// beforeCheckpoint: the case is about events no checkpoint covers yet; if the
		// server signed one over them before the change, the case starts again.
		beforeCheckpoint bool
		run              func(tr *tamperTrail) (retry bool)
	}{
		{name: "an event changed", run: func(tr *tamperTrail) bool {
			id := tr.ids()[3]
			tr.superuser(fmt.Sprintf(`UPDATE audit_events SET actor = 'mallory' WHERE id = %d`, id))
			want := fmt.Sprintf("event %d: its contents do not match", id)
			tr.raised(want)
			tr.named(want)
			return false
		}},
		{name: "an event deleted from the middle, and changes go on", run: func(tr *tamperTrail) bool {
			ids := tr.ids()
			tr.superuser(fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, ids[3]))
			want := fmt.Sprintf("event %d: it is leaf 4 where leaf 3 was expected: 1 event(s) before it were deleted", ids[4])
			tr.raised(want)
			tr.named(want)
			// The trail cannot be trusted, but it still takes events: changes go on, each
			// recorded and sealed; /readyz stays 200 and says what the check found.
			tr.mutate(1)
			n := tr.size()
			if sealed := tr.e.Scalar(`SELECT seal IS NOT NULL FROM audit_events WHERE leaf_index = $1`, n-1); sealed != true {
				t.Fatalf("the event recorded after the deletion is not sealed")
			}
			code, body := tr.readyz()
			if code != http.StatusOK || body["audit"] != "ok" || !strings.HasPrefix(body["auditTrail"], "does not verify since ") ||
				!strings.Contains(body["auditTrail"], "(events)") || strings.Contains(body["auditTrail"], want) {
				t.Fatalf("/readyz while the trail does not verify: %d %v", code, body)
			}
			tr.named(want)
			return false
		}},
		{name: "the newest event deleted before a checkpoint", beforeCheckpoint: true, run: func(tr *tamperTrail) bool {
			tr.mutate(1)
			n := tr.size()
			tr.deleteNewest(false)
			tr.raised("the 1 event(s) after it were deleted")
			if tr.largestCheckpoint() >= n {
				return true
			}
			tr.named(fmt.Sprintf("the stored tree goes on past the trail's %d events", n-1))
			return false
		}},
		{name: "the newest event deleted with its tree hashes before a checkpoint", beforeCheckpoint: true, run: func(tr *tamperTrail) bool {
			tr.mutate(1)
			n := tr.size()
			tr.deleteNewest(true)
			tr.raised(fmt.Sprintf("the stored tree holds %d events, fewer than the %d of this replica's", n-1, n))
			if tr.largestCheckpoint() >= n {
				return true
			}
			tr.named(fmt.Sprintf("witnessed a tree of %d events", n), fmt.Sprintf("but the trail has %d", n-1))
			return false
		}},
		{name: "the newest event deleted after a checkpoint", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.deleteNewest(false)
			tr.raised("the 1 event(s) after it were deleted")
			tr.named(fmt.Sprintf("the checkpoint of %d events (signed at", n), fmt.Sprintf("covers more events than the trail has (%d)", n-1))
			return false
		}},
		{name: "the newest event deleted with its tree hashes after a checkpoint", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.deleteNewest(true)
			tr.raised(fmt.Sprintf("the stored tree holds %d events, fewer than the %d of", n-1, n))
			tr.named(fmt.Sprintf("the checkpoint of %d events (signed at", n), fmt.Sprintf("covers more events than the trail has (%d)", n-1))
			return false
		}},
		{name: "an event inserted after the latest checkpoint with its hashes computed", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			id := tr.forge(nil)
			tr.raised(fmt.Sprintf("the newest event, %d, has no seal", id))
			tr.nextCheck()
			if got := tr.largestCheckpoint(); got != n {
				t.Fatalf("a checkpoint of %d events was signed over the forged event (the latest was %d)", got, n)
			}
			tr.named(fmt.Sprintf("event %d: it has no seal", id))
			return false
		}},
		{name: "an event inserted with its hashes computed and a seal of another key", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			id := tr.forge(otherAuditKey(t))
			tr.raised(fmt.Sprintf("the newest event, %d, is not sealed for the stored tree of %d events", id, n+1))
			tr.named(fmt.Sprintf("event %d: its seal does not match the tree of %d events", id, n+1))
			return false
		}},
		{name: "two events swapped", run: func(tr *tamperTrail) bool {
			ids := tr.ids()
			tr.superuser(fmt.Sprintf(`UPDATE audit_events e SET at = o.at, actor = o.actor, action = o.action, machine = o.machine,
				parameters = o.parameters, outcome = o.outcome, error = o.error, request_id = o.request_id, details = o.details
				FROM audit_events o WHERE (e.id, o.id) IN ((%[1]d, %[2]d), (%[2]d, %[1]d))`, ids[2], ids[5]))
			want := fmt.Sprintf("event %d: its contents do not match", ids[2])
			tr.raised(want)
			tr.named(want)
			return false
		}},
		{name: "TRUNCATE refused", run: func(tr *tamperTrail) bool {
			for _, tables := range []string{"audit_events", "audit_tree_hashes", "audit_checkpoints", "audit_events, audit_tree_hashes, audit_checkpoints"} {
				_, err := tr.e.DB.Store.Pool().Exec(context.Background(), "TRUNCATE "+tables)
				if err == nil || !strings.Contains(err.Error(), "is part of the audit trail, which is append-only: TRUNCATE is refused") {
					t.Fatalf("TRUNCATE %s: %v", tables, err)
				}
			}
			tr.nextCheck()
			if s := tr.status(); !s.Verifies {
				t.Fatalf("the trail does not verify after refused TRUNCATEs: %v", *s.Problem)
			}
			if out, err := tr.verify(); err != nil || !strings.Contains(out, "the audit log verifies") {
				t.Fatalf("apelora audit verify after refused TRUNCATEs: %v\n%s", err, out)
			}
			return false
		}},
		{name: "audit_events truncated, its trigger disabled", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.superuser(`ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_truncate; SET session_replication_role = DEFAULT;
				TRUNCATE audit_events; ALTER TABLE audit_events ENABLE TRIGGER audit_events_no_truncate`)
			tr.raised(fmt.Sprintf("the stored tree holds %d events but there is no event", n))
			// verify names the first checkpoint that fails: with every event gone that is the
			// oldest, which covers n events or fewer when the server signed one earlier (it
			// did, under load, in one CI run of five).
			tr.named("the checkpoint of ", "events (signed at", "covers more events than the trail has (0)")
			return false
		}},
		{name: "audit_tree_hashes truncated, its trigger disabled: changes are refused", run: func(tr *tamperTrail) bool {
			tr.waitCheckpoint()
			tr.superuser(`ALTER TABLE audit_tree_hashes DISABLE TRIGGER audit_tree_hashes_no_truncate; SET session_replication_role = DEFAULT;
				TRUNCATE audit_tree_hashes; ALTER TABLE audit_tree_hashes ENABLE TRIGGER audit_tree_hashes_no_truncate`)
			const want = "the audit tree hashes do not match the events"
			tr.raised(want, "run `apelora audit verify`")
			// Every append would fail: the replica is not ready, and a change is refused
			// saying what is wrong and what to run (not "database unreachable").
			code, body := tr.readyz()
			if code != http.StatusServiceUnavailable || !strings.Contains(body["audit"], want) || !strings.Contains(body["audit"], "run `apelora audit verify`") {
				t.Fatalf("/readyz while no event can be appended: %d %v", code, body)
			}
			r := tr.e.GQL(tr.admin, createReader, map[string]any{"n": "refused"})
			if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, want) {
				t.Fatalf("a change while no event can be appended: %+v", r.Errors)
			}
			tr.named(fmt.Sprintf("event %d: the stored tree ends before it", tr.ids()[0]))
			return false
		}},
		{name: "audit_checkpoints truncated, its trigger disabled", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.nextCheck() // the checkpoint is this replica's newest signed head
			tr.superuser(`ALTER TABLE audit_checkpoints DISABLE TRIGGER audit_checkpoints_no_truncate; SET session_replication_role = DEFAULT;
				TRUNCATE audit_checkpoints; ALTER TABLE audit_checkpoints ENABLE TRIGGER audit_checkpoints_no_truncate`)
			tr.raised(fmt.Sprintf("the checkpoint of %d events this replica signed at", n), "is no longer in the database")
			// verify names the oldest checkpoint this replica signed that is gone: the one of n
			// events, or one before it when the server signed more than one (it did, under load,
			// in one CI run).
			tr.named("the checkpoint this replica signed (", "events, at", "is no longer among the checkpoints")
			return false
		}},
		{name: "every audit table truncated, their triggers disabled: nothing is signed after", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.superuser(`TRUNCATE audit_events, audit_tree_hashes, audit_checkpoints`)
			tr.raised(fmt.Sprintf("the stored tree holds 0 events, fewer than the %d of", n))
			tr.named(fmt.Sprintf("witnessed a tree of %d events", n), "the trail is empty")
			// The next events start a new tree at leaf 0: a fork of what was signed. It is
			// recorded, never signed.
			tr.mutate(2)
			tr.nextCheck()
			if got := tr.largestCheckpoint(); got != 0 {
				t.Fatalf("a checkpoint of %d events was signed over a tree that forks from the one signed", got)
			}
			tr.raised(fmt.Sprintf("the stored tree holds 2 events, fewer than the %d of", n))
			return false
		}},
		{name: "a checkpoint signed by another key", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			// Put where the next checkpoint goes, before the tree gets there.
			tr.checkpointRow(otherAuditKey(t), n+1, tlog.Hash{1}, n+1)
			tr.raised(fmt.Sprintf("a checkpoint of %d events", n+1), "that the audit key does not verify is in the database")
			tr.servesGoodCheckpoints(n)
			// It stops no later signature, is never served, and turns no proof into INTERNAL.
			tr.mutate(1)
			for deadline := time.Now().Add(tamperWait); ; time.Sleep(50 * time.Millisecond) {
				if c := tr.e.Scalar(`SELECT count(*) FROM audit_checkpoints WHERE tree_size = $1`, n+1).(int64); c == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no checkpoint of %d events signed beside the other key's", n+1)
				}
			}
			tr.servesGoodCheckpoints(n + 1)
			tr.named(fmt.Sprintf("the checkpoint of %d events (signed at", n+1), "cannot be trusted")
			return false
		}},
		{name: "a checkpoint claiming 1,000,000 events", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			// The genuine checkpoint's text, in a row that says 1,000,000.
			if _, err := tr.e.DB.Store.Pool().Exec(context.Background(), `INSERT INTO audit_checkpoints (tree_size, root_hash, signed)
				SELECT 1000000, root_hash, signed FROM audit_checkpoints WHERE tree_size = $1`, n); err != nil {
				t.Fatal(err)
			}
			tr.raised("a checkpoint of 1000000 events", "that the audit key does not verify is in the database")
			tr.servesGoodCheckpoints(n)
			tr.mutate(1)
			if got := tr.waitCheckpointRow(n + 1); got != n+1 {
				t.Fatal(got)
			}
			tr.servesGoodCheckpoints(n + 1)
			tr.named("the checkpoint of 1000000 events (signed at", "cannot be trusted")
			return false
		}},
		{name: "a fork: the newest events cut off and others appended", run: func(tr *tamperTrail) bool {
			n := tr.waitCheckpoint()
			tr.nextCheck()
			for range 2 {
				tr.deleteNewest(true)
			}
			tr.mutate(3)
			tr.raised(fmt.Sprintf("does not start with the tree of %d events", n))
			tr.nextCheck()
			if got := tr.largestCheckpoint(); got != n {
				t.Fatalf("a checkpoint of %d events was signed over a fork of the one of %d", got, n)
			}
			tr.named(fmt.Sprintf("the checkpoint of %d events (signed at", n), "does not match the events")
			return false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				tr := startTrail(t)
				if !c.run(tr) {
					return
				}
				if attempt == 3 {
					t.Fatal("the server signed a checkpoint over the newest event before it could be deleted, three times")
				}
				t.Logf("attempt %d: the server signed a checkpoint over the newest event before it was deleted; again on a fresh product", attempt)
			}
		})
	}
}

// waitCheckpointRow waits for a checkpoint row of n events the audit key verifies.
func (tr *tamperTrail) waitCheckpointRow(n int64) int64 {
	tr.t.Helper()
	for deadline := time.Now().Add(tamperWait); ; time.Sleep(50 * time.Millisecond) {
		if c := tr.e.Scalar(`SELECT count(*) FROM audit_checkpoints WHERE tree_size = $1 AND signed LIKE '%' || encode(root_hash, 'base64') || '%'`, n).(int64); c > 0 {
			return n
		}
		if time.Now().After(deadline) {
			tr.t.Fatalf("no checkpoint of %d events signed", n)
		}
	}
}
