package fencing

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a worker on fakes, driven round by round on a fake clock.
type env struct {
	t     *testing.T
	clk   *clock
	st    *memStore
	cl    *fakeCluster
	ma    *fakeMAAS
	w     *Worker
	lease Lease
	since time.Time
}

func newEnv(t *testing.T, members ...string) *env {
	clk := &clock{t: t0}
	sq := &seq{}
	e := &env{t: t, clk: clk, st: newMemStore(sq, clk.now),
		cl: &fakeCluster{now: clk.now, statuses: map[string]string{}},
		ma: &fakeMAAS{seq: sq, now: clk.now, machines: map[string]*fakeMachine{}, rand: func() float64 { return 1 }}}
	for _, m := range members {
		e.cl.set(m, "Online")
		mp := mapping(m)
		e.ma.machines[mp.SystemID] = &fakeMachine{uuid: mp.HardwareUUID, powerType: "ipmi", on: true}
	}
	// A machine that goes off takes its member's daemon with it.
	e.ma.onPowerOff = func(id string) { e.cl.set(strings.TrimPrefix(id, "sys"), "Offline") }
	e.w = &Worker{ID: "w1", Limits: testLimits, Poll: 5 * time.Second, DrillInterval: time.Hour, Cluster: e.cl, MAAS: e.ma, Drills: e.st, Leadership: e.st, Log: discard}
	return e
}

func (e *env) mapAll(members ...string) {
	for _, m := range members {
		e.st.setMapping(mapping(m))
	}
}

// round advances the clock and runs one round, taking the lock first if needed.
func (e *env) round(d time.Duration) {
	e.t.Helper()
	e.clk.advance(d)
	if e.lease == nil || e.lease.Check(context.Background()) != nil {
		s, err := e.st.TryLead(context.Background())
		if err != nil || s == nil {
			e.t.Fatalf("take the lock: %v %v", s, err)
		}
		e.lease, e.since = s, e.clk.now()
	}
	if err := e.w.Round(context.Background(), e.lease, e.since); err != nil {
		e.lease = nil
	}
}

func (e *env) rounds(n int, d time.Duration) {
	for range n {
		e.round(d)
	}
}

func (e *env) wantKinds(member string, want ...string) {
	e.t.Helper()
	if got := e.st.kinds(member); !slices.Equal(got, want) {
		e.t.Fatalf("%s events %v, want %v", member, got, want)
	}
}

func TestWorkerFencesAndConfirms(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m1", "m2", "m3")
	e.round(time.Second)
	e.cl.set("m3", "Offline")
	e.round(time.Second)                             // first seen offline
	e.round(testLimits.OfflineAfter - 2*time.Second) // not yet
	e.wantKinds("m3", "OFFLINE")
	e.round(2 * time.Second) // eligible: request sent
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
	if n := len(e.ma.callsOf("power_off", "sysm3")); n != 1 {
		t.Fatalf("%d power-offs", n)
	}
	e.round(5 * time.Second) // the controller says off
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
	e.rounds(10, time.Minute) // stays offline: nothing more, ever, in this outage
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
	if n := len(e.ma.callsOf("power_off", "")); n != 1 {
		t.Fatalf("%d power-offs", n)
	}
	ev := e.st.eventsOf("m3")[3]
	if ev.Details["powerState"] != "off" || ev.Worker != "w1" || ev.Details["requestEventId"] == nil {
		t.Fatalf("confirmation %+v", ev)
	}
	if e.st.status == nil || e.st.status.Worker != "w1" || !e.st.status.LastRoundAt.Equal(e.clk.now()) {
		t.Fatalf("heartbeat %+v", e.st.status)
	}
}

func TestWorkerAcceptedButNotEffectiveIsNotFencedAndCooldownHolds(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.ma.machines["sysm3"].ineffective = true
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.round(testLimits.OfflineAfter)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
	e.rounds(int(testLimits.ConfirmTimeout/(5*time.Second))-1, 5*time.Second) // reads say on, not yet expired
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
	e.round(5 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_OFF")
	// Inside the cooldown (which runs from the request) it is refused, and said once.
	e.rounds(8, time.Minute)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_OFF", "REFUSED/COOLDOWN")
	if n := len(e.ma.callsOf("power_off", "")); n != 1 {
		t.Fatalf("%d power-offs inside the cooldown", n)
	}
	// After it, the member is tried again; this time the power-off works.
	e.ma.machines["sysm3"].ineffective = false
	e.round(time.Minute)
	e.round(5 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_OFF", "REFUSED/COOLDOWN", "ELIGIBLE", "REQUESTED", "CONFIRMED")
	offs := e.ma.callsOf("power_off", "")
	if len(offs) != 2 || offs[1].at.Sub(offs[0].at) < testLimits.Cooldown {
		t.Fatalf("power-offs %+v", offs)
	}
}

func TestWorkerManualPowerIsNeverConfirmed(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.ma.machines["sysm3"].powerType = "manual"
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.round(testLimits.OfflineAfter)
	e.round(5 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_QUERYABLE")
}

func TestWorkerRefusesAWrongUUIDAndTouchesNothing(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	mp := mapping("m3")
	mp.HardwareUUID = "11111111-2222-4333-8444-555555555555"
	e.st.setMapping(mp)
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.rounds(10, testLimits.OfflineAfter)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REFUSED/UUID_MISMATCH")
	if n := len(e.ma.callsOf("power_off", "")) + len(e.ma.callsOf("query", "")); n != 0 {
		t.Fatalf("%d power commands or reads after a UUID mismatch", n)
	}
	if msg := e.st.eventsOf("m3")[2].Message; !strings.Contains(msg, mp.HardwareUUID) || !strings.Contains(msg, mapping("m3").HardwareUUID) {
		t.Fatalf("refusal does not name both UUIDs: %s", msg)
	}
}

func TestWorkerRefusesWhenHalfTheClusterIsOffline(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3", "m4")
	e.mapAll("m1", "m2", "m3", "m4")
	e.cl.set("m3", "Offline")
	e.cl.set("m4", "Offline")
	e.round(time.Second)
	e.rounds(5, testLimits.OfflineAfter)
	e.wantKinds("m3", "OFFLINE", "REFUSED/TOO_MANY_OFFLINE")
	e.wantKinds("m4", "OFFLINE", "REFUSED/TOO_MANY_OFFLINE")
	if n := len(e.ma.callsOf("power_off", "")); n != 0 {
		t.Fatalf("%d power-offs", n)
	}
	// One comes back: the other is now 1 of 4 and is fenced.
	e.cl.set("m4", "Online")
	e.round(time.Second)
	e.round(5 * time.Second)
	e.wantKinds("m4", "OFFLINE", "REFUSED/TOO_MANY_OFFLINE", "BACK_ONLINE")
	e.wantKinds("m3", "OFFLINE", "REFUSED/TOO_MANY_OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
}

func TestWorkerDoesNotFenceAMemberBackBeforeTheDeadline(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.cl.set("m3", "Offline")
	e.rounds(5, 5*time.Second)
	e.cl.set("m3", "Online")
	e.rounds(20, 5*time.Second)
	e.wantKinds("m3", "OFFLINE", "BACK_ONLINE")
	if n := len(e.ma.calls); n != 0 {
		t.Fatalf("MAAS was called %d times", n)
	}
}

func TestWorkerMAASUnreachableIsRefusedOnceAndRetried(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.ma.down = true
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.rounds(10, testLimits.OfflineAfter)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REFUSED/MAAS_UNAVAILABLE")
	if n := len(e.ma.callsOf("read", "sysm3")); n != 10 {
		t.Fatalf("MAAS asked %d times, want once per round", n)
	}
	e.ma.down = false
	e.round(5 * time.Second)
	e.round(5 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REFUSED/MAAS_UNAVAILABLE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
}

func TestWorkerDiedBeforeSendingIsReportedNotDoubled(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.ma.dropPowerOff = true // recorded, never sent: the worker died in between
	e.round(testLimits.OfflineAfter)
	e.st.dropLeader()
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
	// The next leader confirms: the reads say on until the confirmation time has passed.
	e.rounds(int(testLimits.ConfirmTimeout/(5*time.Second)), 5*time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_OFF")
	e.rounds(5, time.Minute)
	if n := len(e.ma.callsOf("power_off", "")); n != 0 {
		t.Fatalf("%d power-offs inside the cooldown", n)
	}
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "NOT_CONFIRMED/POWER_NOT_OFF", "REFUSED/COOLDOWN")
}

func TestWorkerDiedAfterSendingIsConfirmedByTheNext(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.round(testLimits.OfflineAfter)
	e.st.dropLeader() // died right after power_off was sent
	e.round(5 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
	if n := len(e.ma.callsOf("power_off", "")); n != 1 {
		t.Fatalf("%d power-offs", n)
	}
}

func TestWorkerThatLosesItsLockSendsNothing(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.st.failAppendKind = KindRequested // the connection dies as the request is recorded
	e.round(testLimits.OfflineAfter)
	if n := len(e.ma.callsOf("power_off", "")); n != 0 {
		t.Fatalf("a request that could not be recorded was sent")
	}
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE")
	e.round(time.Second) // the next leadership goes on
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "ELIGIBLE", "REQUESTED")
}

func TestWorkerKeepsTheOutageAcrossARestart(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m3")
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	first := e.st.tracking[key(one, "m3")].FirstSeenOffline
	e.st.dropLeader()
	e.round(20 * time.Second) // a new leadership, within the observation gap
	if got := e.st.tracking[key(one, "m3")].FirstSeenOffline; !got.Equal(first) {
		t.Fatalf("outage start %v, was %v", got, first)
	}
	e.round(10 * time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
}

func TestWorkerWithIncusUnreachableStillConfirms(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3", "m4", "m5")
	e.mapAll("m3", "m4")
	e.cl.set("m3", "Offline")
	e.round(time.Second)
	e.round(testLimits.OfflineAfter)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED")
	e.cl.down = true
	e.cl.statuses["m4"] = "Offline" // unseen
	e.rounds(20, 5*time.Second)
	e.wantKinds("m3", "OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED")
	e.wantKinds("m4")
}

func TestDrill(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m1", "m2", "m3")
	bad := mapping("m2")
	bad.HardwareUUID = "11111111-2222-4333-8444-555555555555"
	e.st.setMapping(bad)
	e.ma.machines["sysm3"].powerType = "manual"
	if err := e.w.DrillDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := map[string]Drill{}
	for k, x := range e.st.drills {
		d[k.Name] = x
	}
	if !d["m1"].OK || d["m1"].PowerState != "on" || d["m1"].Problem != "" {
		t.Fatalf("m1 %+v", d["m1"])
	}
	if d["m2"].OK || !strings.Contains(d["m2"].Problem, "not the mapped") {
		t.Fatalf("m2 %+v", d["m2"])
	}
	if d["m3"].OK || !strings.Contains(d["m3"].Problem, "never be confirmed") {
		t.Fatalf("m3 %+v", d["m3"])
	}
	if n := len(e.ma.callsOf("power_off", "")); n != 0 || len(e.ma.callsOf("query", "sysm2")) != 0 {
		t.Fatal("the drill powered something, or read a mismatched machine")
	}
	// Not due again until the interval has passed, unless the mapping changes.
	reads := len(e.ma.callsOf("read", ""))
	e.clk.advance(time.Minute)
	e.st.setMapping(mapping("m2"))
	if err := e.w.DrillDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.ma.callsOf("read", "")) - reads; n != 1 || !e.st.drills[key(one, "m2")].OK {
		t.Fatalf("%d reads, m2 %+v", n, e.st.drills[key(one, "m2")])
	}
}

// TestStandbyTakesOverWhenTheLeaderDies runs two workers for real (goroutines, short poll)
// on one store: one leads, the other stands by, and takes over when the first dies.
func TestStandbyTakesOverWhenTheLeaderDies(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	var mu sync.Mutex
	e.clk.advance(0)
	mk := func(id string) *Worker {
		w := &Worker{ID: id, Limits: testLimits, Poll: time.Millisecond, Cluster: e.cl, MAAS: e.ma, Leadership: e.st, Log: discard}
		w.Sleep = func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			e.clk.advance(time.Second)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
				return nil
			}
		}
		return w
	}
	ctx1, kill1 := context.WithCancel(context.Background())
	ctx2, kill2 := context.WithCancel(context.Background())
	defer kill2()
	done1, done2 := make(chan struct{}), make(chan struct{})
	go func() { defer close(done1); mk("w1").Run(ctx1) }()
	waitFor(t, func() bool { return len(leaders(e.st)) == 1 })
	go func() { defer close(done2); mk("w2").Run(ctx2) }()
	waitFor(t, func() bool {
		s := e.st
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.status != nil && s.status.LastRoundAt.After(t0.Add(20*time.Second))
	})
	if l := leaders(e.st); !slices.Equal(l, []string{"w1"}) {
		t.Fatalf("leaders %v while w1 lives", l)
	}
	kill1() // w1 dies; its fence lease (and connection) goes with it
	<-done1
	e.st.dropLeader()
	waitFor(t, func() bool { return len(leaders(e.st)) == 2 })
	if l := leaders(e.st); !slices.Equal(l, []string{"w1", "w2"}) {
		t.Fatalf("leaders %v", l)
	}
	kill2()
	<-done2
}

func leaders(st *memStore) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for _, e := range st.events {
		if e.Kind == KindLeading {
			out = append(out, e.Worker)
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// The settle period and the outage clocks start when Incus's answer is in, not when the
// round asked: a read that takes 4 s (Incus regaining its quorum answers slowly) moves
// them by those 4 s.
func TestSettleCountsFromIncusAnswer(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.w.Limits.Settle = 20 * time.Second
	e.cl.advance = e.clk.advance
	e.mapAll("m1", "m2", "m3")
	e.round(0)
	e.cl.down = true
	e.round(5 * time.Second)
	e.cl.down = false
	e.cl.slow = 4 * time.Second
	e.cl.set("m3", "Offline")
	asked := e.clk.now().Add(5 * time.Second)
	e.round(5 * time.Second)
	answered := asked.Add(4 * time.Second)
	e.cl.slow = 0
	var offline *Event
	for i := 0; i < 40 && offline == nil; i++ {
		e.round(time.Second)
		for _, ev := range e.st.eventsOf("m3") {
			if ev.Kind == KindOffline {
				offline = &ev
			}
		}
	}
	if offline == nil {
		t.Fatalf("m3 never counted offline: %v", e.st.kinds("m3"))
	}
	if got := offline.At.Sub(answered); got < e.w.Limits.Settle || got > e.w.Limits.Settle+time.Second {
		t.Fatalf("m3's outage clock started %v after Incus answered (%v after the round asked), want the settle period (%v)",
			got, offline.At.Sub(asked), e.w.Limits.Settle)
	}
}

// Quorum loss is a state: recorded once (QUORUM_LOST, no member) when first seen, kept in
// the worker's report across a change of leader, and its end once (QUORUM_BACK).
func TestQuorumLossRecordedOnce(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.mapAll("m1", "m2", "m3")
	e.round(0)
	e.cl.noQuorum = true
	lost := e.clk.now().Add(5 * time.Second)
	for range 3 {
		e.round(5 * time.Second)
	}
	e.st.dropLeader()
	e.lease = nil
	for range 3 {
		e.round(5 * time.Second)
	}
	var kinds []string
	for _, ev := range e.st.eventsOf("") {
		if ev.Kind != KindLeading {
			kinds = append(kinds, string(ev.Kind))
		}
	}
	if strings.Join(kinds, ",") != "QUORUM_LOST" {
		t.Fatalf("cluster events %v, want one QUORUM_LOST", kinds)
	}
	var ev Event
	for _, x := range e.st.eventsOf("") {
		if x.Kind == KindQuorumLost {
			ev = x
		}
	}
	if ev.Message != NoQuorumMessage(lost) || !strings.HasSuffix(ev.Message, ": fencing paused") {
		t.Fatalf("QUORUM_LOST says %q", ev.Message)
	}
	if s := e.st.state(one); s.NoQuorumSince == nil || !s.NoQuorumSince.Equal(lost) || !strings.HasPrefix(s.PausedReason, PausedNoQuorum+": ") {
		t.Fatalf("cluster state %+v, want no quorum since %v", s, lost)
	}
	e.cl.noQuorum = false
	e.round(5 * time.Second)
	e.round(5 * time.Second)
	kinds = kinds[:0]
	for _, ev := range e.st.eventsOf("") {
		if ev.Kind != KindLeading {
			kinds = append(kinds, string(ev.Kind))
		}
	}
	if s := e.st.state(one); strings.Join(kinds, ",") != "QUORUM_LOST,QUORUM_BACK" || s.NoQuorumSince != nil || s.PausedReason != "" {
		t.Fatalf("after the quorum came back: %v, cluster state %+v", kinds, s)
	}
}
