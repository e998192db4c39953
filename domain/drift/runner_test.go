package drift

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

// fakeIncus is a cluster described by data. It has only the reads admission.Incus
// declares (drift has no way to write); it records each call.
type fakeIncus struct {
	mu         sync.Mutex
	members    []membership.Member
	membersErr error
	calls      []string
}

func (f *fakeIncus) note(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *fakeIncus) taken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fakeIncus) Members(context.Context) ([]membership.Member, error) {
	f.note("members")
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]membership.Member, len(f.members))
	for i, m := range f.members {
		m.Config = maps.Clone(m.Config)
		out[i] = m
	}
	return out, f.membersErr
}

func (f *fakeIncus) set(name string, edit func(m *membership.Member)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.members {
		if f.members[i].Name == name {
			edit(&f.members[i])
		}
	}
}

func (f *fakeIncus) Version(_ context.Context, m string) (membership.Version, error) {
	f.note("version " + m)
	return membership.Version{Incus: "6.0.4", APIExtensions: 450, Kernel: "6.18.1"}, nil
}
func (f *fakeIncus) StoragePools(context.Context) ([]string, error) {
	f.note("pools")
	return []string{"local"}, nil
}
func (f *fakeIncus) StoragePoolStatus(_ context.Context, p, m string) (string, error) {
	f.note("pool " + p + " " + m)
	return "Created", nil
}
func (f *fakeIncus) LocatedNetworks(context.Context) ([]string, error) {
	f.note("networks")
	return nil, nil
}
func (f *fakeIncus) NetworkStatus(_ context.Context, n, m string) (string, error) {
	f.note("network " + n + " " + m)
	return "Created", nil
}
func (f *fakeIncus) MemberHardware(_ context.Context, m string) (hardware.Inventory, error) {
	f.note("hardware " + m)
	return hardware.Inventory{}, nil
}

type fakeAdmissions struct {
	mu       sync.Mutex
	admitted []Admission
}

func (f *fakeAdmissions) Admitted(context.Context) ([]Admission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.admitted), nil
}

type fakeRecords []machines.Record

func (f fakeRecords) Records(context.Context) ([]machines.Record, error) { return f, nil }

// fakeDB is drift's tables in memory; its lease goes to one holder at a time.
type fakeDB struct {
	mu      sync.Mutex
	now     time.Time
	states  map[string][]State
	checked map[string]time.Time
	events  []Event
	watcher *Watcher
	holder  *fakeLease
	saved   chan struct{}
}

func newDB() *fakeDB {
	return &fakeDB{now: t0, states: map[string][]State{}, checked: map[string]time.Time{}, saved: make(chan struct{}, 1000)}
}

func (d *fakeDB) advance(by time.Duration) {
	d.mu.Lock()
	d.now = d.now.Add(by)
	d.mu.Unlock()
}

func (d *fakeDB) eventLog() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, e := range d.events {
		out = append(out, e.Machine+" "+e.Check+" "+string(e.Change))
	}
	return out
}

func (d *fakeDB) TryLead(context.Context) (Lease, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holder != nil {
		return nil, nil
	}
	d.holder = &fakeLease{d: d}
	return d.holder, nil
}

type fakeLease struct {
	d    *fakeDB
	lost bool
}

func (s *fakeLease) Check(context.Context) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.lost {
		return errors.New("lock lost")
	}
	return nil
}

func (s *fakeLease) Now(context.Context) (time.Time, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.d.now, nil
}

func (s *fakeLease) States(context.Context) (map[string][]State, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	out := map[string][]State{}
	for k := range s.d.checked {
		out[k] = nil
	}
	for k, v := range s.d.states {
		out[k] = slices.Clone(v)
	}
	return out, nil
}

func (s *fakeLease) Save(_ context.Context, machine string, checked time.Time, _ string, states []State, events []Event) ([]Event, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.lost {
		return nil, errors.New("lock lost")
	}
	if len(states) == 0 {
		delete(s.d.states, machine)
	} else {
		s.d.states[machine] = slices.Clone(states)
	}
	if checked.IsZero() {
		delete(s.d.checked, machine)
	} else {
		s.d.checked[machine] = checked
	}
	var out []Event
	for _, e := range events {
		e.ID = int64(len(s.d.events) + 1)
		s.d.events = append(s.d.events, e)
		out = append(out, e)
	}
	s.d.saved <- struct{}{}
	return out, nil
}

func (s *fakeLease) Heartbeat(_ context.Context, w Watcher) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.watcher = &w
	return nil
}

func (s *fakeLease) Renew(ctx context.Context) error { return s.Check(ctx) }
func (s *fakeLease) Epoch() int64                    { return 1 }

func (s *fakeLease) Close() {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.holder == s {
		s.d.holder = nil
	}
}

func cluster(names ...string) *fakeIncus {
	f := &fakeIncus{}
	for _, n := range names {
		f.members = append(f.members, membership.Member{Name: n, Status: "Online", Message: "Fully operational", Architecture: "x86_64", Roles: []string{"database"}})
	}
	return f
}

func admittedAll(names ...string) (*fakeAdmissions, fakeRecords) {
	a := &fakeAdmissions{}
	var recs fakeRecords
	for _, n := range names {
		a.admitted = append(a.admitted, Admission{Machine: n, RolesKnown: true, Roles: []string{"database"}})
		recs = append(recs, machines.Record{Name: n, Provisioner: machines.Manual})
	}
	return a, recs
}

type oneCluster []clusters.Cluster

func (o oneCluster) All() []clusters.Cluster { return o }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func runner(inc *fakeIncus, a *fakeAdmissions, recs fakeRecords, db *fakeDB) *Runner {
	return &Runner{Checker: &admission.Checker{Ports: clusters.PortsFunc[admission.Incus](func(context.Context, int64) (admission.Incus, error) { return inc, nil }),
		Clusters: oneCluster{{ID: 1, Name: "default", Adopted: true, FromEnvironment: true}}}, Admissions: a, Records: recs, Leadership: db,
		Interval: time.Hour, Limits: Limits{OfflineAfter: 2 * time.Minute}, Replica: "r1", Log: quiet()}
}

func round(t *testing.T, r *Runner, db *fakeDB, only map[string]bool) int {
	t.Helper()
	lease, err := db.TryLead(context.Background())
	if err != nil || lease == nil {
		t.Fatalf("lead: %v %v", lease, err)
	}
	defer lease.Close()
	n, err := r.Round(context.Background(), lease, only)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRoundReadsTheClusterOnceAndEachMemberItself(t *testing.T) {
	inc := cluster("m1", "node-4", "node-5", "node-6")
	a, recs := admittedAll("node-4", "node-5", "node-6")
	db := newDB()
	r := runner(inc, a, recs, db)
	if n := round(t, r, db, nil); n != 3 {
		t.Fatalf("looked at %d machines", n)
	}
	count := map[string]int{}
	for _, c := range inc.taken() {
		count[c]++
	}
	// The cluster-wide reads once per round, whatever the machines; each member's own.
	for _, c := range []string{"members", "version ", "pools", "networks"} {
		if count[c] != 1 {
			t.Errorf("%q asked %d times", c, count[c])
		}
	}
	for _, m := range []string{"node-4", "node-5", "node-6"} {
		if count["version "+m] != 1 || count["pool local "+m] != 1 {
			t.Errorf("%s: %v", m, count)
		}
	}
	if len(db.eventLog()) != 0 || len(db.checked) != 3 {
		t.Fatalf("healthy: events %v, checked %v", db.eventLog(), db.checked)
	}
	// Only the machines that changed.
	round(t, r, db, map[string]bool{"node-5": true})
	for _, c := range inc.taken() {
		if strings.Contains(c, "node-4") || strings.Contains(c, "node-6") {
			t.Fatalf("a round for node-5 asked %q", c)
		}
	}
	// Nothing admitted: Incus is not asked at all.
	a.admitted = nil
	round(t, r, db, nil)
	if c := inc.taken(); len(c) != 0 {
		t.Fatalf("no admitted machine, yet %v", c)
	}
}

func TestRoundRaisesAndClears(t *testing.T) {
	inc := cluster("m1", "node-4", "node-5")
	a, recs := admittedAll("node-4", "node-5")
	db := newDB()
	r := runner(inc, a, recs, db)
	round(t, r, db, nil)

	inc.set("node-4", func(m *membership.Member) { m.Config = map[string]string{"scheduler.instance": "manual"} })
	round(t, r, db, nil)
	if got := db.eventLog(); strings.Join(got, ";") != "node-4 scheduler RAISED" {
		t.Fatalf("events %v", got)
	}
	st := db.states["node-4"]
	if len(st) != 1 || !st[0].Raised() || !strings.Contains(st[0].Evidence, "scheduler.instance=manual") {
		t.Fatalf("state %+v", st)
	}

	// Offline: raised only past the threshold, and nothing else it cannot ask is drift.
	inc.set("node-5", func(m *membership.Member) { m.Status, m.Message = "Offline", "No heartbeat for 21s" })
	round(t, r, db, nil)
	db.advance(time.Minute)
	round(t, r, db, nil)
	if got := db.eventLog(); len(got) != 1 {
		t.Fatalf("offline under the threshold: %v", got)
	}
	db.advance(time.Minute)
	round(t, r, db, nil)
	if got := db.eventLog(); got[len(got)-1] != "node-5 online RAISED" || len(got) != 2 {
		t.Fatalf("offline past the threshold: %v", got)
	}

	inc.set("node-4", func(m *membership.Member) { delete(m.Config, "scheduler.instance") })
	inc.set("node-5", func(m *membership.Member) { m.Status, m.Message = "Online", "Fully operational" })
	round(t, r, db, nil)
	if got := db.eventLog(); strings.Join(got[2:], ";") != "node-4 scheduler CLEARED;node-5 online CLEARED" {
		t.Fatalf("cleared: %v", got)
	}
	if len(db.states) != 0 {
		t.Fatalf("states left %v", db.states)
	}

	// Removed from the cluster outside Apelora: membership drift past the threshold; then
	// no longer admitted (enrolled again, say): cleared, and the machine is forgotten.
	inc.mu.Lock()
	inc.members = inc.members[:2]
	inc.mu.Unlock()
	round(t, r, db, nil)
	db.advance(3 * time.Minute)
	round(t, r, db, nil)
	if got := db.eventLog(); got[len(got)-1] != "node-5 membership RAISED" {
		t.Fatalf("gone: %v", got)
	}
	a.admitted = a.admitted[:1]
	if _, ok := db.checked["node-4"]; !ok {
		t.Fatal("node-4 was looked at, yet not recorded so")
	}
	round(t, r, db, nil)
	last := db.events[len(db.events)-1]
	if last.Machine != "node-5" || last.Change != Cleared || !strings.Contains(last.Evidence, "no longer an admitted member") {
		t.Fatalf("forgotten: %+v", last)
	}
	if _, ok := db.checked["node-5"]; ok || db.states["node-5"] != nil {
		t.Fatal("a machine no longer admitted is still tracked")
	}
	// One without drift is forgotten too (its last check would say it is still watched).
	a.admitted = nil
	round(t, r, db, nil)
	if len(db.checked) != 0 {
		t.Fatalf("still tracked: %v", db.checked)
	}
}

func TestRoundWithoutIncusChangesNothing(t *testing.T) {
	inc := cluster("m1", "node-4")
	a, recs := admittedAll("node-4")
	db := newDB()
	r := runner(inc, a, recs, db)
	inc.set("node-4", func(m *membership.Member) { m.Config = map[string]string{"scheduler.instance": "manual"} })
	round(t, r, db, nil)
	inc.membersErr = apperr.New(apperr.Unavailable, "Incus did not answer within 10s")
	lease, _ := db.TryLead(context.Background())
	defer lease.Close()
	before := db.eventLog()
	if _, err := r.Round(context.Background(), lease, nil); err == nil || !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("round without Incus: %v", err)
	}
	if got := db.eventLog(); len(got) != len(before) || len(db.states["node-4"]) != 1 {
		t.Fatalf("Incus unavailable changed drift: %v %v", got, db.states)
	}
}

// fakeChanges lets a test say "Incus reported a change to this member".
type fakeChanges struct{ c chan string }

func (f fakeChanges) Watch(ctx context.Context, changed func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-f.c:
			changed(m)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOneRunnerLeadsAndReactsToChanges(t *testing.T) {
	inc := cluster("m1", "node-4", "node-5")
	a, recs := admittedAll("node-4", "node-5")
	db := newDB()
	changes := fakeChanges{make(chan string)}
	r1, r2 := runner(inc, a, recs, db), runner(inc, a, recs, db)
	r1.Changes, r1.Settle, r1.Retry = changes, time.Millisecond, 5*time.Millisecond
	r2.Replica, r2.Retry = "r2", 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = r1.Run(ctx) }()
	waitFor(t, "the first round", func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.watcher != nil && db.watcher.Machines == 2
	})
	wg.Add(1)
	go func() { defer wg.Done(); _ = r2.Run(ctx) }()
	time.Sleep(50 * time.Millisecond) // r2 tries for the lead several times meanwhile
	if db.watcher.Replica != "r1" {
		t.Fatalf("watcher %+v", db.watcher)
	}
	inc.taken()

	// The interval is an hour: only the reported change brings node-4's drift in.
	inc.set("node-4", func(m *membership.Member) { m.Config = map[string]string{"scheduler.instance": "manual"} })
	changes.c <- "node-4"
	waitFor(t, "the raise", func() bool { return len(db.eventLog()) == 1 })
	for _, c := range inc.taken() {
		if strings.Contains(c, "node-5") {
			t.Fatalf("a change to node-4 looked at node-5: %q", c)
		}
	}
	// A change that may concern every member ("") looks at all of them.
	changes.c <- ""
	waitFor(t, "a round of all", func() bool {
		c := strings.Join(inc.taken(), ";")
		return strings.Contains(c, "node-5")
	})

	// The leader dies: the standby takes over and goes on.
	cancelR1 := db.holder
	db.mu.Lock()
	cancelR1.lost = true
	db.holder = nil
	db.mu.Unlock()
	waitFor(t, "a new leader", func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.watcher.Replica == "r2" || (db.holder != nil && db.holder != cancelR1)
	})
}

// A round per cluster: each machine is checked in its record's cluster, through that
// cluster's own reads (the same member name in both never crosses); a cluster that cannot
// be read leaves its machines as they were (nothing saved), and the other goes on.
func TestRoundPerClusterAnUnreadableOneLeavesItsMachines(t *testing.T) {
	a, b := cluster("m1", "node-4"), cluster("m1", "node-5")
	adm, recs := admittedAll("node-4", "node-5")
	two := int64(2)
	recs[1].Cluster = &two
	db := newDB()
	r := runner(a, adm, recs, db)
	r.Checker.Clusters = oneCluster{{ID: 1, Name: "a", Adopted: true, FromEnvironment: true}, {ID: 2, Name: "b", Adopted: true}}
	r.Checker.Ports = clusters.PortsFunc[admission.Incus](func(_ context.Context, id int64) (admission.Incus, error) {
		if id == 2 {
			return b, nil
		}
		return a, nil
	})
	if n := round(t, r, db, nil); n != 2 {
		t.Fatalf("looked at %d machines, want 2", n)
	}
	if ca, cb := strings.Join(a.taken(), ","), strings.Join(b.taken(), ","); strings.Contains(ca, "node-5") || strings.Contains(cb, "node-4") ||
		!strings.Contains(ca, "version node-4") || !strings.Contains(cb, "version node-5") {
		t.Fatalf("reads crossed clusters: a %s; b %s", ca, cb)
	}
	// b cannot be read: node-5 is left as it was; node-4 is checked again.
	b.membersErr = apperr.New(apperr.Unavailable, "Incus cluster b could not be reached through any of its members")
	db.advance(time.Minute)
	lease, _ := db.TryLead(context.Background())
	defer lease.Close()
	before := db.checked["node-5"]
	n, err := r.Round(context.Background(), lease, nil)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "cluster b") {
		t.Fatalf("round with b unreadable: looked at %d, %v", n, err)
	}
	if !db.checked["node-5"].Equal(before) || !db.checked["node-4"].Equal(t0.Add(time.Minute)) || len(db.states["node-5"]) != 0 {
		t.Fatalf("node-5 was touched (%v, %v) or node-4 not checked (%v)", db.checked["node-5"], db.states["node-5"], db.checked["node-4"])
	}
}
