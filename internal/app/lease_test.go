package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/leader"
)

// members is the Incus side as these tests need it: the lease is the subject, and
// fencing's own tests cover what the worker makes of Incus. m1 is offline and mapped.
type members []fencing.Observation

func (m members) Observe(context.Context) ([]fencing.Observation, error) { return m, nil }

var leaseTestMembers = members{
	{Name: "m1", Status: membership.StatusOffline},
	{Name: "m2", Status: membership.StatusOnline, Roles: []string{"database-leader", "database"}},
	{Name: "m3", Status: membership.StatusOnline, Roles: []string{"database"}},
	{Name: "m4", Status: membership.StatusOnline, Roles: []string{"database"}},
}

const (
	leaseTestSystemID = "fx7m3a"
	leaseTestUUID     = "4c4c4544-0042-3510-8052-0000000000a1"
)

// leaseTestMAAS is the MAAS simulator with m1's machine (deployed, IPMI, on) and the
// worker's client on it.
func leaseTestMAAS(t *testing.T) (*sim.Server, fencing.MAAS) {
	t.Helper()
	key := sim.NewAPIKey()
	s, err := sim.New(sim.Options{
		Users: []sim.User{{Username: "apelora-worker", APIKey: key, Admin: true}},
		Fixture: sim.Fixture{Machines: []sim.MachineSpec{{SystemID: leaseTestSystemID, Hostname: "m1", Status: sim.StatusDeployed,
			Owner: "apelora-worker", PowerType: "ipmi", PowerState: "on", HardwareUUID: leaseTestUUID}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	c, err := maas.New(maas.Config{BaseURL: ep.BaseURL, APIKey: key, RequestTimeout: 10 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, maas.NewFencePorts(c)
}

var leaseTestLimits = fencing.Limits{OfflineAfter: time.Second, Cooldown: 10 * time.Minute, ConfirmTimeout: time.Minute, MaxObservationGap: time.Minute}

func mapM1(t *testing.T, db *pgtest.DB, cluster int64) {
	t.Helper()
	ctx := context.Background()
	if err := db.Store.Fences().Change(audit.WithAction(ctx, &audit.Action{Actor: "admin", Name: "setFenceMapping", RequestID: "r1"}), "m1",
		func(tx fencing.Tx) error {
			_, err := tx.PutMapping(ctx, fencing.Mapping{Cluster: cluster, Member: "m1", SystemID: leaseTestSystemID, HardwareUUID: leaseTestUUID, SetBy: "admin", SetAt: time.Now()})
			return err
		}); err != nil {
		t.Fatal(err)
	}
}

// appendHook runs after each event the leader records: a take-over can be placed between
// two fence steps.
type appendHook struct {
	fencing.Lease
	after func(fencing.Event)
}

func (h appendHook) Append(ctx context.Context, e fencing.Event) (fencing.Event, error) {
	out, err := h.Lease.Append(ctx, e)
	if err == nil {
		h.after(out)
	}
	return out, err
}

// The lease ends while worker a decides a fence (after its ELIGIBLE, before its
// REQUESTED) and worker b takes it over: a's REQUESTED is refused by the epoch check in
// its transaction, so a sends nothing to MAAS; b, leading with the next epoch, records the
// request and sends the one power-off.
func TestAStaleWorkersRequestIsRefusedAndNothingIsSent(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	maasSim, power := leaseTestMAAS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mapM1(t, db, env)
	worker := func(id string) *fencing.Worker {
		return &fencing.Worker{ID: id, Limits: leaseTestLimits, Poll: 100 * time.Millisecond, Clusters: fencing.One(env, "default", leaseTestMembers), MAAS: power,
			Leadership: db.Store.FenceLeadership("apelora-worker "+id, time.Minute), Lease: time.Minute, Log: log}
	}
	a, b := worker("a"), worker("b")
	leaseA, err := a.Leadership.TryLead(ctx)
	if err != nil || leaseA == nil {
		t.Fatalf("a takes the lease: %v %v", leaseA, err)
	}
	defer leaseA.Close()
	var leaseB fencing.Lease
	hooked := appendHook{Lease: leaseA, after: func(e fencing.Event) {
		if e.Kind != fencing.KindEligible || leaseB != nil {
			return
		}
		// a's lease ends on the database's clock (a's own clock stood still: a suspended
		// VM), and b takes over.
		if _, err := db.Store.Pool().Exec(ctx, `UPDATE leader_leases SET expires_at = clock_timestamp() WHERE role = 'fence'`); err != nil {
			t.Error(err)
		}
		if leaseB, err = b.Leadership.TryLead(ctx); err != nil || leaseB == nil {
			t.Errorf("b takes the lease over: %v %v", leaseB, err)
		}
	}}
	since := time.Now()
	var roundErr error
	for deadline := time.Now().Add(20 * time.Second); leaseB == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never found m1 eligible")
		}
		if roundErr = a.Round(ctx, hooked, since); roundErr != nil && leaseB == nil {
			t.Fatalf("a's round before the take-over: %v", roundErr)
		}
	}
	defer leaseB.Close()
	if !errors.Is(roundErr, leader.ErrLost) {
		t.Fatalf("a's round after the take-over: %v, want leader.ErrLost", roundErr)
	}
	requested := func() (n int) {
		if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM fence_events WHERE kind = 'REQUESTED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n, sent := requested(), maasSim.CountRequests("POST", "power_off"); n != 0 || sent != 0 {
		t.Fatalf("the stale worker recorded %d requests and sent %d power-offs; want none", n, sent)
	}
	if leaseB.Epoch() != leaseA.Epoch()+1 {
		t.Fatalf("epochs %d then %d", leaseA.Epoch(), leaseB.Epoch())
	}
	// The new leader fences: one request, one power-off; a still sends nothing.
	for deadline := time.Now().Add(20 * time.Second); maasSim.CountRequests("POST", "power_off") == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b never sent the power-off")
		}
		if err := b.Round(ctx, leaseB, since); err != nil {
			t.Fatalf("b's round: %v", err)
		}
		if err := a.Round(ctx, leaseA, since); !errors.Is(err, leader.ErrLost) {
			t.Fatalf("a's round while b leads: %v", err)
		}
	}
	var by string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT worker FROM fence_events WHERE kind = 'REQUESTED'`).Scan(&by); err != nil || by != "b" || requested() != 1 {
		t.Fatalf("REQUESTED by %q (%d of them): %v", by, requested(), err)
	}
	if n := maasSim.CountRequests("POST", "power_off"); n != 1 {
		t.Fatalf("%d power-offs, want 1", n)
	}
}

// Worker a records its REQUESTED and is then paused (SIGSTOP, a long stall) past its
// lease before it sends; b takes over meanwhile. When a resumes it checks its lease right
// before the power-off, finds it gone, and sends nothing: the request it recorded is b's
// to confirm, not to send again.
func TestAWorkerPausedAfterItsRequestSendsNothing(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	maasSim, power := leaseTestMAAS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mapM1(t, db, env)
	const lease = 2 * time.Second
	a := &fencing.Worker{ID: "a", Limits: leaseTestLimits, Poll: 100 * time.Millisecond, Clusters: fencing.One(env, "default", leaseTestMembers), MAAS: power,
		Leadership: db.Store.FenceLeadership("apelora-worker a", lease), Lease: lease, Log: log}
	leaseA, err := a.Leadership.TryLead(ctx)
	if err != nil || leaseA == nil {
		t.Fatalf("a takes the lease: %v %v", leaseA, err)
	}
	defer leaseA.Close()
	b := db.Store.FenceLeadership("apelora-worker b", lease)
	var leaseB fencing.Lease
	paused := appendHook{Lease: leaseA, after: func(e fencing.Event) {
		if e.Kind != fencing.KindRequested {
			return
		}
		// a is stopped: it renews nothing; b takes the lease once it has expired.
		for deadline := time.Now().Add(3 * lease); leaseB == nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("b never took the lease over")
				return
			}
			if leaseB, err = b.TryLead(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}}
	since := time.Now()
	var roundErr error
	for deadline := time.Now().Add(20 * time.Second); leaseB == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never requested the power-off")
		}
		if err := leaseA.Renew(ctx); err != nil {
			t.Fatalf("a renews between rounds: %v", err)
		}
		roundErr = a.Round(ctx, paused, since)
	}
	defer leaseB.Close()
	if !errors.Is(roundErr, leader.ErrLost) {
		t.Fatalf("a's round after its pause: %v, want leader.ErrLost", roundErr)
	}
	if n := maasSim.CountRequests("POST", "power_off"); n != 0 {
		t.Fatalf("a sent %d power-offs after its lease ended", n)
	}
	var requests int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM fence_events WHERE kind = 'REQUESTED' AND worker = 'a'`).Scan(&requests); err != nil || requests != 1 {
		t.Fatalf("a's REQUESTED events: %d %v", requests, err)
	}
}

type leadership struct {
	mu    sync.Mutex
	times []leadingAt
}

type leadingAt struct {
	worker string
	epoch  int64
	at     time.Time
}

func (l *leadership) observer(worker string) func(int64, time.Time) {
	return func(epoch int64, _ time.Time) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if n := len(l.times); n > 0 && l.times[n-1].worker == worker && l.times[n-1].epoch == epoch {
			return // a renewal
		}
		l.times = append(l.times, leadingAt{worker, epoch, time.Now()})
	}
}

func (l *leadership) snapshot() []leadingAt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leadingAt(nil), l.times...)
}

// leaseObserver feeds the leadership record from the worker's observer.
type leaseObserver struct{ lease func(int64, time.Time) }

func (leaseObserver) Leading(bool)                           {}
func (o leaseObserver) Lease(epoch int64, renewed time.Time) { o.lease(epoch, renewed) }
func (leaseObserver) Recorded(fencing.Event)                 {}
func (leaseObserver) RoundDone(error)                        {}
func (leaseObserver) NoQuorum(string, time.Time)             {}
func (leaseObserver) Paused(string, string)                  {}

// Two workers run; the leader's connection is killed server-side (pg_terminate_backend,
// as a failover or a network cut would): it steps down by itself (its renewal fails),
// and the other leads with a higher epoch, only after the first stopped.
func TestTwoWorkersTheHoldersConnectionKilledTheOtherLeadsWithAHigherEpoch(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, power := leaseTestMAAS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	online := members{{Name: "m1", Status: membership.StatusOnline}, {Name: "m2", Status: membership.StatusOnline}, {Name: "m3", Status: membership.StatusOnline}}
	const lease = 3 * time.Second
	rec := &leadership{}
	var done sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		w := &fencing.Worker{ID: id, Limits: leaseTestLimits, Poll: 100 * time.Millisecond, Cluster: online, MAAS: power,
			Leadership: db.Store.FenceLeadership("apelora-worker "+id, lease), Lease: lease, Log: log,
			Observer: leaseObserver{rec.observer(id)}}
		done.Add(1)
		go func() { defer done.Done(); _ = w.Run(ctx) }()
	}
	waitFor(t, func() bool { return len(rec.snapshot()) > 0 })
	first := rec.snapshot()[0]
	if first.epoch < 1 {
		t.Fatalf("first leadership %+v", first)
	}
	time.Sleep(lease) // it renews past its first lease length
	if got := rec.snapshot(); len(got) != 1 {
		t.Fatalf("leadership changed without a cause: %+v", got)
	}
	var cut int
	killed := time.Now()
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
		"apelora-worker "+first.worker).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("killed %d backends of the leader: %v", cut, err)
	}
	var next leadingAt
	waitFor(t, func() bool {
		for _, l := range rec.snapshot() {
			if l.worker != first.worker && l.epoch > 0 {
				next = l
				return true
			}
		}
		return false
	})
	got := rec.snapshot()
	if len(got) < 3 || got[1].worker != first.worker || got[1].epoch != 0 || got[1].at.After(next.at) {
		t.Fatalf("leadership %+v: want %s to step down before another leads", got, first.worker)
	}
	if next.epoch <= first.epoch {
		t.Fatalf("epoch %d after %d: want higher", next.epoch, first.epoch)
	}
	t.Logf("%s stepped down %v after its connection was killed; %s led with epoch %d %v after it",
		first.worker, got[1].at.Sub(killed).Round(time.Millisecond), next.worker, next.epoch, next.at.Sub(killed).Round(time.Millisecond))
	cancel()
	done.Wait()
}

// waitFor polls ok until it holds, failing the test after 10 s.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
