package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/internal/leader"
)

func takeFence(t *testing.T, s *postgres.Store, holder string, length time.Duration) fencing.Lease {
	t.Helper()
	lease, err := s.FenceLeadership(holder, length).TryLead(context.Background())
	if err != nil || lease == nil {
		t.Fatalf("%s: take the fence lease: %v %v", holder, lease, err)
	}
	t.Cleanup(lease.Close)
	return lease
}

func countEvents(t *testing.T, db *pgtest.DB, kind fencing.Kind) int {
	t.Helper()
	var n int
	if err := db.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM fence_events WHERE kind = $1`, string(kind)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// One holder at a time; the holder's connection killed server-side (as a failover or a
// DBA would) is a lost lease for it at once: it renews nothing, writes nothing. Nobody
// else leads until the lease has expired on the database's clock; then the other takes
// it over with a higher epoch. A lease given up (Close) is taken over at once.
func TestFenceLeaseIsExclusiveAndTakenOverWithAHigherEpoch(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	const length = 2 * time.Second
	first := takeFence(t, db.Store, "apelora-worker a", length)
	second := db.Store.FenceLeadership("apelora-worker b", length)
	if s, err := second.TryLead(ctx); err != nil || s != nil {
		t.Fatalf("a second worker got the lease: %v %v", s, err)
	}
	if err := first.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	var cut int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'apelora-worker a'`).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("killed %d backends: %v", cut, err)
	}
	if err := first.Renew(ctx); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("renewal on a killed connection: %v, want leader.ErrLost", err)
	}
	if err := first.Check(ctx); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("check on a killed connection: %v, want leader.ErrLost", err)
	}
	if _, err := first.Append(ctx, fencing.Event{At: time.Now(), Member: "m1", Kind: fencing.KindRequested, Worker: "a"}); err == nil {
		t.Fatal("a worker that lost its lease recorded a request")
	}
	if s, err := second.TryLead(ctx); err != nil || s != nil {
		t.Fatalf("the lease was taken over before it expired: %v %v", s, err)
	}
	var lease fencing.Lease
	for deadline := time.Now().Add(3 * length); lease == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no take-over within %v of a %v lease", 3*length, length)
		}
		var err error
		if lease, err = second.TryLead(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if lease.Epoch() != first.Epoch()+1 {
		t.Fatalf("epochs %d then %d: want one more", first.Epoch(), lease.Epoch())
	}
	if err := lease.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Given up on shutdown: the next one leads at once, with the next epoch.
	lease.Close()
	third := takeFence(t, db.Store, "apelora-worker c", length)
	if third.Epoch() != lease.Epoch()+1 {
		t.Fatalf("epoch after a lease given up: %d, want %d", third.Epoch(), lease.Epoch()+1)
	}
}

// A leader whose own clock stood still (a suspended VM: Go's monotonic clock does not
// count the suspension) still believes its lease runs, but the database ended it and
// another worker leads: every write it tries, REQUESTED first, is refused by the epoch
// check in the same transaction, and it cannot end the new leader's lease either.
func TestAStaleLeadersWritesAreRefusedByTheEpochCheck(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	stale := takeFence(t, db.Store, "apelora-worker a", time.Minute)
	now, err := stale.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Append(ctx, fencing.Event{At: now, Member: "m1", Kind: fencing.KindEligible, Worker: "a"}); err != nil {
		t.Fatalf("the leader's own write: %v", err)
	}
	// Its minute has passed on the database's clock, not on its own.
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE leader_leases SET expires_at = clock_timestamp() WHERE role = 'fence'`); err != nil {
		t.Fatal(err)
	}
	fresh := takeFence(t, db.Store, "apelora-worker b", time.Minute)
	if fresh.Epoch() != stale.Epoch()+1 {
		t.Fatalf("epochs %d then %d", stale.Epoch(), fresh.Epoch())
	}
	_, err = stale.Append(ctx, fencing.Event{At: now, Member: "m1", Kind: fencing.KindRequested, Worker: "a",
		Details: map[string]any{"maasSystemId": "abc123", "hardwareUuid": uuid1}})
	if !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale leader's REQUESTED: %v, want leader.ErrLost", err)
	}
	if n := countEvents(t, db, fencing.KindRequested); n != 0 {
		t.Fatalf("%d REQUESTED recorded by a stale leader", n)
	}
	if _, err := stale.SaveTracking(ctx, env, []fencing.Tracking{{Member: "m1", FirstSeenOffline: now, LastObserved: now}}, nil, nil); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale leader's tracking: %v", err)
	}
	if err := stale.Heartbeat(ctx, fencing.WorkerStatus{Worker: "a", LeaderSince: now, LastRoundAt: now, PollInterval: time.Second}); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale leader's heartbeat: %v", err)
	}
	if err := stale.Check(ctx); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale leader's check: %v", err)
	}
	if err := stale.Renew(ctx); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale leader renewed: %v", err)
	}
	stale.Close() // gives up nothing: the lease is the new epoch's
	if err := fresh.Check(ctx); err != nil {
		t.Fatalf("the stale leader's Close ended the new lease: %v", err)
	}
	if _, err := fresh.Append(ctx, fencing.Event{At: now, Member: "m1", Kind: fencing.KindRequested, Worker: "b",
		Details: map[string]any{"maasSystemId": "abc123", "hardwareUuid": uuid1}}); err != nil {
		t.Fatalf("the new leader's REQUESTED: %v", err)
	}
}

// Drift's lease is its own role: a fence leader does not keep a replica from watching,
// and drift's writes check drift's epoch.
func TestDriftLeaseIsItsOwnAndChecksItsEpoch(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	takeFence(t, db.Store, "apelora-worker a", time.Minute)
	stale, err := db.Store.DriftLeadership("apelora drift r1", time.Minute).TryLead(ctx)
	if err != nil || stale == nil {
		t.Fatalf("drift lead beside a fence leader: %v %v", stale, err)
	}
	defer stale.Close()
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE leader_leases SET expires_at = clock_timestamp() WHERE role = 'drift'`); err != nil {
		t.Fatal(err)
	}
	fresh, err := db.Store.DriftLeadership("apelora drift r2", time.Minute).TryLead(ctx)
	if err != nil || fresh == nil {
		t.Fatalf("drift take-over: %v %v", fresh, err)
	}
	defer fresh.Close()
	now, _ := fresh.Now(ctx)
	st := drift.State{Machine: "node-4", Check: "online", Title: "Member online", FailingSince: now, Evidence: "Offline", LastChecked: now}
	if _, err := stale.Save(ctx, "node-4", now, "", []drift.State{st}, nil); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("the stale watcher's save: %v", err)
	}
	if _, err := fresh.Save(ctx, "node-4", now, "", []drift.State{st}, nil); err != nil {
		t.Fatalf("the new watcher's save: %v", err)
	}
}
