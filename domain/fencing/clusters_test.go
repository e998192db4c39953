package fencing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two clusters behind one worker, with the same member names: cluster a (id 1) has m1, m2
// and m3, cluster b (id 2) has m1 and m2. Each member's machine is "<cluster>-<member>".

const (
	clusterA = int64(1)
	clusterB = int64(2)
)

type twoClusters struct {
	t     *testing.T
	clk   *clock
	st    *memStore
	ma    *fakeMAAS
	cl    map[int64]*fakeCluster
	names map[int64]string
	w     *Worker
	lease Lease
	since time.Time
}

type staticClusters []Watched

func (s staticClusters) Watched(context.Context) ([]Watched, error) { return s, nil }

func machineOf(cluster int64, member string) Mapping {
	name := map[int64]string{clusterA: "a", clusterB: "b"}[cluster]
	return Mapping{Cluster: cluster, Member: member, SystemID: name + "-" + member,
		HardwareUUID: fmt.Sprintf("00000000-0000-4000-8000-%012x", name+member)}
}

func newTwoClusters(t *testing.T) *twoClusters {
	clk := &clock{t: t0}
	sq := &seq{}
	e := &twoClusters{t: t, clk: clk, st: newMemStore(sq, clk.now),
		ma: &fakeMAAS{seq: sq, now: clk.now, machines: map[string]*fakeMachine{}, rand: func() float64 { return 1 }},
		cl: map[int64]*fakeCluster{}, names: map[int64]string{clusterA: "a", clusterB: "b"}}
	members := map[int64][]string{clusterA: {"m1", "m2", "m3"}, clusterB: {"m1", "m2"}}
	var watched staticClusters
	for _, c := range []int64{clusterA, clusterB} {
		fc := &fakeCluster{now: clk.now, statuses: map[string]string{}}
		e.cl[c] = fc
		for _, m := range members[c] {
			fc.set(m, "Online")
			mp := machineOf(c, m)
			e.st.setMapping(mp)
			e.ma.machines[mp.SystemID] = &fakeMachine{uuid: mp.HardwareUUID, powerType: "ipmi", on: true}
		}
		watched = append(watched, Watched{ID: c, Name: e.names[c], Members: fc})
	}
	// A machine that goes off takes its own member's daemon with it (and no other).
	e.ma.onPowerOff = func(id string) {
		cluster, member, _ := strings.Cut(id, "-")
		e.cl[map[string]int64{"a": clusterA, "b": clusterB}[cluster]].set(member, "Offline")
	}
	e.w = &Worker{ID: "w1", Limits: testLimits, Poll: 5 * time.Second, Clusters: watched, MAAS: e.ma, Leadership: e.st, Log: discard}
	return e
}

func (e *twoClusters) round(d time.Duration) {
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
		e.t.Fatalf("round: %v", err)
	}
}

// kinds are the events about one cluster's member (member "": about the cluster).
func (e *twoClusters) kinds(cluster int64, member string) []string {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	var out []string
	for _, ev := range e.st.events {
		if ev.Cluster == cluster && ev.Member == member {
			s := string(ev.Kind)
			if ev.Reason != "" {
				s += "/" + string(ev.Reason)
			}
			out = append(out, s)
		}
	}
	return out
}

func (e *twoClusters) tracked(cluster int64) map[string]Tracking {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	out := map[string]Tracking{}
	for k, t := range e.st.tracking {
		if k.Cluster == cluster {
			out[k.Name] = t
		}
	}
	return out
}

func (e *twoClusters) powerOffs() []string {
	var out []string
	for _, c := range e.ma.callsOf("power_off", "") {
		out = append(out, c.systemID)
	}
	return out
}

// Limits count within each cluster; the same member name in both never crosses; a
// cluster that cannot be read pauses itself only (one UNREADABLE, one READABLE) and
// forgets nothing; the other goes on fencing.
func TestFencingLimitsCountPerCluster(t *testing.T) {
	e := newTwoClusters(t)
	e.round(time.Second)
	// m2 dies in both: 1 of 3 offline in a, 1 of 2 in b.
	e.cl[clusterA].set("m2", "Offline")
	e.cl[clusterB].set("m2", "Offline")
	e.round(time.Second)
	e.round(testLimits.OfflineAfter)
	e.round(5 * time.Second)
	if got := e.kinds(clusterA, "m2"); !slices.Equal(got, []string{"OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED"}) {
		t.Fatalf("a's m2: %v", got)
	}
	if got := e.kinds(clusterB, "m2"); !slices.Equal(got, []string{"OFFLINE", "REFUSED/TOO_MANY_OFFLINE"}) {
		t.Fatalf("b's m2: %v", got)
	}
	if got := e.powerOffs(); !slices.Equal(got, []string{"a-m2"}) {
		t.Fatalf("power-offs %v: only a's m2's machine", got)
	}
	for _, ev := range e.st.eventsOf("m2") {
		if ev.Cluster == clusterB && ev.Kind == KindRefused && (ev.Details["members"] != 2 || ev.Details["offlineMembers"] != 1) {
			t.Fatalf("b's refusal counts %v, want 1 of b's 2", ev.Details)
		}
		if ev.Cluster == clusterA && ev.Kind == KindRequested && (ev.Details["maasSystemId"] != "a-m2" || ev.Details["members"] != 3) {
			t.Fatalf("a's request %v", ev.Details)
		}
	}

	// b cannot be read: paused there, once; a goes on.
	bBefore := e.tracked(clusterB)
	e.cl[clusterB].down = true
	e.cl[clusterA].set("m2", "Online") // repaired and powered on again
	e.round(5 * time.Second)
	e.cl[clusterA].set("m3", "Offline")
	for range 10 {
		e.round(5 * time.Second)
	}
	if got := e.kinds(clusterB, ""); !slices.Equal(got, []string{"UNREADABLE"}) {
		t.Fatalf("b's cluster events %v, want one UNREADABLE", got)
	}
	if s := e.st.state(clusterB); s.UnreadableSince == nil || !strings.HasPrefix(s.PausedReason, PausedIncusUnavailable+": ") {
		t.Fatalf("b's state %+v", s)
	}
	if s := e.st.state(clusterA); s.PausedReason != "" || s.UnreadableSince != nil {
		t.Fatalf("a's state %+v", s)
	}
	if got := e.kinds(clusterA, "m3"); !slices.Equal(got, []string{"OFFLINE", "ELIGIBLE", "REQUESTED", "CONFIRMED"}) {
		t.Fatalf("a's m3 while b is unreadable: %v", got)
	}
	if got := e.tracked(clusterB); len(got) != len(bBefore) || !got["m2"].FirstSeenOffline.Equal(bBefore["m2"].FirstSeenOffline) {
		t.Fatalf("b's tracking during its outage %v, was %v", got, bBefore)
	}
	if len(e.tracked(clusterA)) != 3 {
		t.Fatalf("a's tracking %v", e.tracked(clusterA))
	}

	// b answers again: READABLE once; its m2 is still refused within b's own limits.
	e.cl[clusterB].down = false
	for range 3 {
		e.round(5 * time.Second)
	}
	if got := e.kinds(clusterB, ""); !slices.Equal(got, []string{"UNREADABLE", "READABLE"}) {
		t.Fatalf("b's cluster events %v", got)
	}
	if s := e.st.state(clusterB); s.PausedReason != "" || s.UnreadableSince != nil {
		t.Fatalf("b's state after %+v", s)
	}
	if got := e.powerOffs(); !slices.Equal(got, []string{"a-m2", "a-m3"}) {
		t.Fatalf("power-offs %v", got)
	}
}

// An offline threshold too long for the limits in one cluster pauses that cluster alone.
func TestAnOfflineThresholdTooLongPausesItsClusterOnly(t *testing.T) {
	e := newTwoClusters(t)
	ws := e.w.Clusters.(staticClusters)
	ws[0].Config = clusterConfig{}
	ws[1].Config = clusterConfig{"cluster.offline_threshold": "120"}
	e.round(time.Second)
	e.cl[clusterA].set("m1", "Offline")
	e.cl[clusterB].set("m1", "Offline")
	e.cl[clusterB].set("m2", "Offline") // no half limit could let b fence anyway; paused says why
	e.round(time.Second)
	e.round(testLimits.OfflineAfter + 5*time.Second)
	if s := e.st.state(clusterB); !strings.HasPrefix(s.PausedReason, PausedOfflineAfter+": cluster b:") {
		t.Fatalf("b's state %+v", s)
	}
	if s := e.st.state(clusterA); s.PausedReason != "" {
		t.Fatalf("a's state %+v", s)
	}
	if got := e.powerOffs(); !slices.Equal(got, []string{"a-m1"}) {
		t.Fatalf("power-offs %v", got)
	}
	if got := e.kinds(clusterB, "m1"); !slices.Equal(got, []string{"OFFLINE"}) {
		t.Fatalf("b's m1 %v: nothing decided while paused", got)
	}
}

// Random histories over the two clusters: nothing of one cluster is ever read, forgotten,
// counted or powered for the other.
func TestTwoClustersNeverMix(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 27))
			e := newTwoClusters(t)
			members := map[int64][]string{clusterA: {"m1", "m2", "m3"}, clusterB: {"m1", "m2"}}
			outages := map[int64]int{}
			for step := range 80 {
				for c, ms := range members {
					fc := e.cl[c]
					wasDown := fc.down
					fc.down = r.IntN(6) == 0
					if fc.down && !wasDown && step > 0 {
						outages[c]++
					}
					for _, m := range ms {
						switch r.IntN(8) {
						case 0:
							fc.set(m, "Offline")
						case 1:
							fc.set(m, "Online")
						}
					}
				}
				if step == 0 {
					e.cl[clusterA].down, e.cl[clusterB].down = false, false
				}
				before := map[int64]map[string]Tracking{clusterA: e.tracked(clusterA), clusterB: e.tracked(clusterB)}
				e.round(time.Duration(1+r.IntN(20)) * time.Second)
				for c, ms := range members {
					got := e.tracked(c)
					if e.cl[c].down {
						// Unread: its tracking is exactly as it was.
						if len(got) != len(before[c]) {
							t.Fatalf("step %d: cluster %d unread, tracking %v, was %v", step, c, got, before[c])
						}
						for n, tr := range before[c] {
							if got[n] != tr {
								t.Fatalf("step %d: cluster %d unread, %s changed: %+v -> %+v", step, c, n, tr, got[n])
							}
						}
						continue
					}
					names := make([]string, 0, len(got))
					for n := range got {
						names = append(names, n)
					}
					sort.Strings(names)
					if !slices.Equal(names, ms) {
						t.Fatalf("step %d: cluster %d tracks %v, lists %v", step, c, names, ms)
					}
				}
			}
			requested := map[string]int64{}
			unreadable := map[int64]int{}
			e.st.mu.Lock()
			events := slices.Clone(e.st.events)
			e.st.mu.Unlock()
			for _, ev := range events {
				if ev.Kind == KindLeading {
					continue
				}
				if ev.Cluster != clusterA && ev.Cluster != clusterB {
					t.Fatalf("event about cluster %d: %+v", ev.Cluster, ev)
				}
				if ev.Kind == KindUnreadable {
					unreadable[ev.Cluster]++
				}
				if n, ok := ev.Details["members"]; ok && n != len(members[ev.Cluster]) {
					t.Fatalf("%s of %s in cluster %d counts %v members", ev.Kind, ev.Member, ev.Cluster, n)
				}
				if id, ok := ev.Details["maasSystemId"]; ok && id != machineOf(ev.Cluster, ev.Member).SystemID {
					t.Fatalf("%s of %s in cluster %d names machine %v", ev.Kind, ev.Member, ev.Cluster, id)
				}
				if ev.Kind == KindRequested {
					requested[ev.Details["maasSystemId"].(string)] = ev.Cluster
				}
			}
			for _, id := range e.powerOffs() {
				if _, ok := requested[id]; !ok {
					t.Fatalf("machine %s powered off without a request in its cluster", id)
				}
			}
			for c, n := range outages {
				// An outage that starts while the previous one is still going is one outage.
				if unreadable[c] > n {
					t.Fatalf("cluster %d: %d UNREADABLE events for %d outages", c, unreadable[c], n)
				}
			}
		})
	}
}

// changingClusters is a registry the test changes while the worker runs.
type changingClusters struct {
	mu   sync.Mutex
	list []Watched
}

func (c *changingClusters) Watched(context.Context) ([]Watched, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list), nil
}

func (c *changingClusters) set(ws ...Watched) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = ws
}

// The leader runs a loop per cluster: a cluster registered while it runs gets its rounds,
// a removed one stops being read, and the other's loop goes on throughout.
func TestTheLeaderFollowsClustersRegisteredAndRemoved(t *testing.T) {
	e := newTwoClusters(t)
	a := Watched{ID: clusterA, Name: "a", Members: e.cl[clusterA]}
	b := Watched{ID: clusterB, Name: "b", Members: e.cl[clusterB]}
	reg := &changingClusters{list: []Watched{a}}
	e.w.Clusters = reg
	e.w.Poll = time.Millisecond
	e.w.Sleep = func(ctx context.Context, d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	reads := func(c int64) int {
		fc := e.cl[c]
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return len(fc.log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { return reads(clusterA) >= 3 })
	if n := reads(clusterB); n != 0 {
		t.Fatalf("b read %d times before it was registered", n)
	}
	reg.set(a, b)
	waitFor(t, func() bool { return len(e.tracked(clusterB)) == 2 })
	reg.set(a)
	// b's loop ends (it forgets b's state as it ends, after its last read); b is read no
	// more, while a's loop goes on.
	waitFor(t, func() bool {
		e.w.mu.Lock()
		defer e.w.mu.Unlock()
		_, ok := e.w.state[clusterB]
		return !ok
	})
	n, before := reads(clusterB), reads(clusterA)
	waitFor(t, func() bool { return reads(clusterA) >= before+5 })
	if m := reads(clusterB); m != n {
		t.Fatalf("b read %d more times after it was removed", m-n)
	}
}
