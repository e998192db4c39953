package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// upstream is a change to Incus through the seam every Incus and MAAS client uses
// (plan.Writes): send runs only when the seam lets the call go.
func upstream(ctx context.Context, s *postgres.Store, send func() error) error {
	_, err := s.Writes().Do(ctx, plan.Incus, func() plan.Call { return plan.Call{Request: "PUT /1.0/cluster/members/node-1"} }, send)
	return err
}

// openAdmission gives machine an open admission, which a change can end.
func openAdmission(t *testing.T, db *pgtest.DB, machine string) {
	t.Helper()
	if _, err := db.Store.Pool().Exec(t.Context(), `INSERT INTO admissions (machine, member, admitted_by, request_id) VALUES ($1, $1, 'admin', 'r0')`, machine); err != nil {
		t.Fatal(err)
	}
}

func scalar[T any](t *testing.T, db *pgtest.DB, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := db.Store.Pool().QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// A step sent to Incus or MAAS is recorded twice: its intent, committed before anything is
// sent, and its outcome, with the change's database writes, naming the intent. While the
// upstream call runs no transaction of the change is open, and the machine's lease keeps
// every other change of it away.
func TestAStepIsItsIntentThenItsOutcome(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	openAdmission(t, db, "node-1")
	ctx := audited("removeMember")
	a := audit.ActionFrom(ctx)
	a.Machine = "node-1"
	a.Detail("approvedPlan", map[string]any{"steps": []any{}})
	a.Detail("planHash", "sha256:abc")
	sent := false
	err := db.Store.Audited(ctx, "node-1", func(ctx context.Context) error {
		err := upstream(ctx, db.Store, func() error {
			sent = true
			// The intent is committed: another connection reads it.
			if o := scalar[string](t, db, `SELECT outcome || ' ' || (details->>'planHash') FROM audit_events ORDER BY id DESC LIMIT 1`); o != "STARTED sha256:abc" {
				t.Errorf("before the call the trail ends with %q, want the intent", o)
			}
			// No transaction of the change is open across the call.
			if n := scalar[int64](t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`); n != 0 {
				t.Errorf("%d transactions open during the upstream call", n)
			}
			// The machine is busy meanwhile, for changes and plans alike.
			if err := db.Store.Audited(audited("admitMember"), "node-1", func(context.Context) error { return nil }); apperr.CodeOf(err) != apperr.Busy {
				t.Errorf("another change during the call: %v, want BUSY", err)
			}
			if err := db.Store.Audited(plan.With(audited("admitMember"), &plan.Recorder{}), "node-1", func(context.Context) error { return nil }); apperr.CodeOf(err) != apperr.Busy {
				t.Errorf("a plan during the call: %v, want BUSY", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return db.Store.EndAdmission(ctx, "node-1") // after the call, in the outcome's transaction
	})
	if err != nil || !sent {
		t.Fatalf("the step: %v (sent %v)", err, sent)
	}
	got := scalar[string](t, db, `SELECT string_agg(outcome || ':' || coalesce(details->>'intent', '-') || ':' || (details ? 'approvedPlan')::text, ' ' ORDER BY id) FROM audit_events`)
	intent := scalar[int64](t, db, `SELECT id FROM audit_events WHERE outcome = 'STARTED'`)
	if want := fmt.Sprintf("STARTED:-:true SUCCEEDED:%d:false", intent); got != want {
		t.Fatalf("trail %s, want %s", got, want)
	}
	if s := scalar[string](t, db, `SELECT outcome || ' ' || (outcome_event > intent_event)::text FROM change_steps WHERE intent_event = $1`, intent); s != "SUCCEEDED true" {
		t.Fatalf("the step's row: %s", s)
	}
	if n := scalar[int64](t, db, `SELECT count(*) FROM admissions WHERE ended_at IS NULL`); n != 0 {
		t.Fatal("the write after the call was not kept")
	}
	// The lease is released with the outcome: the machine is free at once.
	if err := db.Store.Audited(audited("admitMember"), "node-1", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after the step: %v", err)
	}
	// A change that sends nothing upstream is one transaction and one event, as before.
	if n := scalar[int64](t, db, `SELECT count(*) FROM audit_events WHERE action = 'admitMember'`); n != 1 {
		t.Fatalf("%d events for a change that sent nothing", n)
	}
}

// If the intent cannot be recorded, nothing is sent (fail closed), and the trail has no
// step half recorded.
func TestNothingIsSentWhenItsIntentCannotBeRecorded(t *testing.T) {
	db := pgtest.New(t)
	if _, err := db.Store.Pool().Exec(t.Context(), `ALTER TABLE audit_events ADD CONSTRAINT no_intents CHECK (outcome <> 'STARTED') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	ctx := audited("removeMember")
	sent := false
	err := db.Store.Audited(ctx, "node-1", func(ctx context.Context) error {
		return upstream(ctx, db.Store, func() error { sent = true; return nil })
	})
	if sent || apperr.CodeOf(err) != apperr.Unavailable || !strings.Contains(apperr.PublicMessage(err), "was not sent") {
		t.Fatalf("sent %v, %v", sent, err)
	}
	if audit.ActionFrom(ctx).Recorded() {
		t.Fatal("the call counts as recorded: the gate would not record its failure")
	}
	if n := scalar[int64](t, db, `SELECT count(*) FROM change_steps`); n != 0 {
		t.Fatalf("%d steps recorded", n)
	}
	// And the machine is free again.
	if err := db.Store.Audited(audited("admitMember"), "node-1", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// A change writes to the database only after its upstream calls: a write before one would
// hold a transaction open across it, so the call is refused and nothing is sent.
func TestADatabaseWriteBeforeAnUpstreamCallIsRefused(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	openAdmission(t, db, "node-1")
	sent := false
	err := db.Store.Audited(audited("removeMember"), "node-1", func(ctx context.Context) error {
		if err := db.Store.EndAdmission(ctx, "node-1"); err != nil {
			return err
		}
		return upstream(ctx, db.Store, func() error { sent = true; return nil })
	})
	if sent || apperr.CodeOf(err) != apperr.Internal {
		t.Fatalf("sent %v, %v", sent, err)
	}
	if n := scalar[int64](t, db, `SELECT count(*) FROM admissions WHERE ended_at IS NULL`); n != 1 {
		t.Fatal("the write before the refused call was kept")
	}
}

// A change of a named lock (identities, hardware profiles …) waits for another one instead
// of being BUSY at once.
func TestANamedLockWaitsItsTurn(t *testing.T) {
	db := pgtest.New(t)
	inside, let := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Store.Audited(audited("setHardwareProfile"), "", func(context.Context) error {
			close(inside)
			<-let
			return nil
		})
	}()
	<-inside
	var second atomic.Bool
	go func() {
		time.Sleep(200 * time.Millisecond)
		if second.Load() {
			t.Error("the second change ran while the first held the lock")
		}
		close(let)
	}()
	if err := db.Store.Audited(audited("removeHardwareProfile"), "", func(context.Context) error { second.Store(true); return nil }); err != nil {
		t.Fatalf("the second change: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A step cut off from its outcome (its process stopped renewing its lease: killed, paused,
// its database gone) keeps its machine BUSY until the reconciler has read what happened
// and recorded it, once, with the database facts of that outcome; the process that comes
// back with the old lease records nothing over it.
func TestAStepCutOffFromItsOutcomeIsReconciledOnce(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	db.Store.SetChangeLease(3 * time.Second)
	openAdmission(t, db, "node-1")
	ctx := audited("removeMember")
	audit.ActionFrom(ctx).Machine = "node-1"
	cutOff := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Store.Audited(ctx, "node-1", func(ctx context.Context) error {
			if err := upstream(ctx, db.Store, func() error { return nil }); err != nil {
				return err
			}
			// The process stops here, long enough for its lease to be taken over.
			<-cutOff
			return db.Store.EndAdmission(ctx, "node-1")
		})
	}()
	// The lease ends as if its holder had stopped renewing it.
	waitFor(t, "the intent", func() bool { return scalar[int64](t, db, `SELECT count(*) FROM change_steps`) == 1 })
	if _, err := db.Store.Pool().Exec(t.Context(), `UPDATE change_leases SET expires_at = clock_timestamp() WHERE lock_key = 'machine node-1'`); err != nil {
		t.Fatal(err)
	}
	// No new change takes the machine while its step's outcome is unknown.
	err := db.Store.Audited(audited("admitMember"), "node-1", func(context.Context) error { return nil })
	if apperr.CodeOf(err) != apperr.Busy || !strings.Contains(apperr.PublicMessage(err), "outcome is not recorded yet") {
		t.Fatalf("a change of the machine meanwhile: %v", err)
	}
	var judged atomic.Int32
	r := &changes.Reconciler{Store: db.Store, Judges: map[string]changes.Judge{
		"removeMember": func(ctx context.Context, st changes.Step) (changes.Verdict, error) {
			judged.Add(1)
			if st.Machine != "node-1" || st.Action != "removeMember" {
				t.Errorf("judged %+v", st)
			}
			// The fact of that outcome, written with it.
			if err := db.Store.EndAdmission(ctx, "node-1"); err != nil {
				return changes.Verdict{}, err
			}
			return changes.Verdict{Outcome: audit.Succeeded, Found: "node-1 is no member any more"}, nil
		},
	}}
	if n, err := r.Round(t.Context()); err != nil || n != 1 || judged.Load() != 1 {
		t.Fatalf("round: %d recorded, %v (judged %d)", n, err, judged.Load())
	}
	if n, err := r.Round(t.Context()); err != nil || n != 0 {
		t.Fatalf("a second round recorded %d, %v", n, err)
	}
	// The stopped process comes back: its outcome is refused, nothing is written twice.
	close(cutOff)
	if err := <-done; err == nil {
		t.Fatal("the stale holder recorded its outcome")
	}
	got := scalar[string](t, db, `SELECT string_agg(outcome || ' ' || coalesce(details->>'recordedBy', '-') || ' ' || coalesce(details->>'found', '-'), ' | ' ORDER BY id) FROM audit_events`)
	if want := "STARTED - - | SUCCEEDED reconciler " + changes.FoundAfterRestart + ": node-1 is no member any more"; got != want {
		t.Fatalf("trail %q, want %q", got, want)
	}
	if n := scalar[int64](t, db, `SELECT count(*) FROM admissions WHERE ended_at IS NULL`); n != 0 {
		t.Fatal("the outcome's fact was not written")
	}
	if err := db.Store.Audited(audited("admitMember"), "node-1", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after the reconciler: %v", err)
	}
}

// A judge that cannot tell now (Incus does not answer) leaves the step for a later round.
func TestAStepIsJudgedAgainWhenItsJudgeCannotTell(t *testing.T) {
	db := pgtest.New(t)
	err := db.Store.Audited(audited("setPlacementGuard"), "", func(ctx context.Context) error {
		if err := upstream(ctx, db.Store, func() error { return nil }); err != nil {
			return err
		}
		// The database fails at the outcome.
		_, err := db.Store.Pool().Exec(context.Background(), `UPDATE change_leases SET expires_at = clock_timestamp()`)
		return err
	})
	if err == nil || !strings.Contains(apperr.PublicMessage(err), "reconciler") {
		t.Fatalf("the step whose outcome was lost: %v", err)
	}
	calls := 0
	r := &changes.Reconciler{Store: db.Store, Judges: map[string]changes.Judge{
		"setPlacementGuard": func(context.Context, changes.Step) (changes.Verdict, error) {
			calls++
			if calls == 1 {
				return changes.Verdict{}, errors.New("Incus did not answer")
			}
			return changes.Verdict{Outcome: audit.Failed, Found: "the guard is off"}, nil
		},
	}}
	if n, err := r.Round(t.Context()); n != 0 || err == nil {
		t.Fatalf("a judge that cannot tell: %d recorded, %v", n, err)
	}
	if n, err := r.Round(t.Context()); n != 1 || err != nil {
		t.Fatalf("the next round: %d, %v", n, err)
	}
	if o := scalar[string](t, db, `SELECT outcome || ': ' || error FROM audit_events ORDER BY id DESC LIMIT 1`); o != "FAILED: "+changes.FoundAfterRestart+": the guard is off" {
		t.Fatalf("recorded %q", o)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A change by a caller the gate allowed in some clusters only checks again, under the
// machine's lease, that the machine's record is still in one of them: a record moved to
// another cluster since is refused BUSY, and nothing runs.
func TestAChangeChecksTheClusterItWasAuthorisedIn(t *testing.T) {
	db := pgtest.New(t)
	ids := map[string]int64{}
	for _, c := range []string{"rack1", "rack2"} {
		ids[c] = scalar[int64](t, db, `INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ($1, '/nonexistent/' || $1, true, 'test') RETURNING id`, c)
	}
	if _, err := db.Store.Pool().Exec(t.Context(), `INSERT INTO machine_records (name, provisioner, registered_by, registered_at, cluster_id) VALUES ('node-1', 'MANUAL', 'admin', now(), $1)`, ids["rack1"]); err != nil {
		t.Fatal(err)
	}
	change := func(allowed ...int64) error {
		ctx := clusters.WithAuthorised(audited("admitMember"), &clusters.Authorised{Machine: "node-1", Clusters: allowed})
		return db.Store.Audited(ctx, "node-1", func(context.Context) error { return nil })
	}
	if err := change(ids["rack1"]); err != nil {
		t.Fatalf("allowed in rack1, node-1 in rack1: %v", err)
	}
	if _, err := db.Store.Pool().Exec(t.Context(), `UPDATE machine_records SET cluster_id = $1`, ids["rack2"]); err != nil {
		t.Fatal(err)
	}
	err := change(ids["rack1"])
	if apperr.CodeOf(err) != apperr.Busy || !strings.Contains(err.Error(), "node-1 is in cluster rack2 now") {
		t.Fatalf("allowed in rack1, node-1 moved to rack2: %v", err)
	}
	// The refused change released the machine's lease.
	if err := change(ids["rack1"], ids["rack2"]); err != nil {
		t.Fatalf("allowed in both: %v", err)
	}
}
