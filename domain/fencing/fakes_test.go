package fencing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/membership"
)

// The fakes below share one sequence counter, so the order of database writes and MAAS
// calls can be checked afterwards.

type seq struct{ n int }

func (s *seq) next() int { s.n++; return s.n }

// memStore is an in-memory database: the fence lease the worker holds and the drill store.
type memStore struct {
	mu       sync.Mutex
	seq      *seq
	now      func() time.Time
	tracking map[clusters.MemberKey]Tracking
	mappings map[clusters.MemberKey]Mapping
	events   []Event
	eventSeq []int // sequence number of each event
	drills   map[clusters.MemberKey]Drill
	status   *WorkerStatus
	states   map[int64]ClusterState
	leader   *memLease
	// failAppendKind makes the next Append of this kind fail (a lost connection), once.
	failAppendKind Kind
}

func newMemStore(s *seq, now func() time.Time) *memStore {
	return &memStore{seq: s, now: now, tracking: map[clusters.MemberKey]Tracking{}, mappings: map[clusters.MemberKey]Mapping{}, drills: map[clusters.MemberKey]Drill{},
		states: map[int64]ClusterState{}}
}

// one is the cluster a Worker without Clusters watches.
const one = int64(1)

func key(cluster int64, member string) clusters.MemberKey {
	return clusters.MemberKey{Cluster: cluster, Name: member}
}

var errLost = errors.New("connection to the database lost")

type memLease struct {
	st   *memStore
	lost bool
}

func (m *memStore) TryLead(context.Context) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leader != nil && !m.leader.lost {
		return nil, nil
	}
	m.leader = &memLease{st: m}
	return m.leader, nil
}

// dropLeader is a database restart: the fence lease (and its connection) is gone.
func (m *memStore) dropLeader() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leader != nil {
		m.leader.lost = true
	}
}

func (s *memLease) lock() error {
	s.st.mu.Lock()
	if s.lost {
		s.st.mu.Unlock()
		return errLost
	}
	return nil
}

func (s *memLease) Check(context.Context) error {
	if err := s.lock(); err != nil {
		return err
	}
	s.st.mu.Unlock()
	return nil
}

func (s *memLease) Renew(ctx context.Context) error { return s.Check(ctx) }
func (s *memLease) Epoch() int64                    { return 1 }

func (s *memLease) Now(context.Context) (time.Time, error) {
	if err := s.lock(); err != nil {
		return time.Time{}, err
	}
	defer s.st.mu.Unlock()
	return s.st.now(), nil
}

func (s *memLease) Tracking(_ context.Context, cluster int64) (map[string]Tracking, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	out := map[string]Tracking{}
	for k, t := range s.st.tracking {
		if k.Cluster == cluster {
			out[k.Name] = t
		}
	}
	return out, nil
}

func (s *memLease) SaveTracking(_ context.Context, cluster int64, next []Tracking, gone []string, events []Event) ([]Event, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	for _, t := range next {
		s.st.tracking[key(cluster, t.Member)] = t
	}
	for _, g := range gone {
		delete(s.st.tracking, key(cluster, g))
	}
	out := make([]Event, len(events))
	for i, e := range events {
		out[i] = s.st.appendLocked(e)
	}
	return out, nil
}

func (st *memStore) appendLocked(e Event) Event {
	e.ID = int64(len(st.events) + 1)
	e.Details = maps.Clone(e.Details)
	st.events = append(st.events, e)
	st.eventSeq = append(st.eventSeq, st.seq.next())
	return e
}

func (s *memLease) Mappings(_ context.Context, cluster int64) (map[string]Mapping, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	out := map[string]Mapping{}
	for k, m := range s.st.mappings {
		if k.Cluster == cluster {
			out[k.Name] = m
		}
	}
	return out, nil
}

func (s *memLease) Requests(_ context.Context, cluster int64) (map[string]Request, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	return requestsFrom(eventsIn(s.st.events, cluster)), nil
}

func eventsIn(events []Event, cluster int64) []Event {
	var out []Event
	for _, e := range events {
		if e.Cluster == cluster {
			out = append(out, e)
		}
	}
	return out
}

// requestsFrom derives the latest request of each member from the events, as the
// PostgreSQL store does in SQL.
func requestsFrom(events []Event) map[string]Request {
	out := map[string]Request{}
	for _, e := range events {
		switch e.Kind {
		case KindRequested:
			sys, _ := e.Details["maasSystemId"].(string)
			uuid, _ := e.Details["hardwareUuid"].(string)
			out[e.Member] = Request{EventID: e.ID, At: e.At, SystemID: sys, HardwareUUID: uuid}
		case KindConfirmed, KindNotConfirmed:
			if r, ok := out[e.Member]; ok && r.Outcome == "" {
				r.Outcome, r.OutcomeAt = e.Kind, e.At
				out[e.Member] = r
			}
		}
	}
	return out
}

func (s *memLease) LatestEvents(_ context.Context, cluster int64) (map[string]Event, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	out := map[string]Event{}
	for _, e := range eventsIn(s.st.events, cluster) {
		if e.Member != "" {
			out[e.Member] = e
		}
	}
	return out, nil
}

func (s *memLease) Append(_ context.Context, e Event) (Event, error) {
	if err := s.lock(); err != nil {
		return Event{}, err
	}
	defer s.st.mu.Unlock()
	if (e.Cluster == 0) != (e.Kind == KindLeading) {
		panic(fmt.Sprintf("event %s about cluster %d (the database's check refuses it)", e.Kind, e.Cluster))
	}
	if s.st.failAppendKind != "" && e.Kind == s.st.failAppendKind {
		s.st.failAppendKind = ""
		s.lost = true
		return Event{}, errLost
	}
	return s.st.appendLocked(e), nil
}

func (s *memLease) Heartbeat(_ context.Context, ws WorkerStatus) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	s.st.status = &ws
	return nil
}

func (s *memLease) Close() {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.lost = true
}

// drill store (no lock needed)
func (m *memStore) Now(context.Context) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now(), nil
}
func (m *memStore) Mappings(context.Context) ([]Mapping, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.mappings)), nil
}
func (m *memStore) Drills(context.Context) (map[clusters.MemberKey]Drill, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.drills), nil
}
func (m *memStore) SaveDrill(_ context.Context, d Drill) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drills[key(d.Cluster, d.Member)] = d
	return nil
}

// setMapping maps a member of mp.Cluster (0: cluster one).
func (m *memStore) setMapping(mp Mapping) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mp.Cluster == 0 {
		mp.Cluster = one
	}
	m.mappings[key(mp.Cluster, mp.Member)] = mp
}

func (m *memStore) removeMapping(member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mappings, key(one, member))
}

func (m *memStore) eventsOf(member string) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for _, e := range m.events {
		if e.Member == member {
			out = append(out, e)
		}
	}
	return out
}

func (m *memStore) kinds(member string) []string {
	var out []string
	for _, e := range m.eventsOf(member) {
		s := string(e.Kind)
		if e.Reason != "" {
			s += "/" + string(e.Reason)
		}
		out = append(out, s)
	}
	return out
}

// fakeCluster is Incus: member statuses set by the test; every Observe is logged.
type fakeCluster struct {
	mu       sync.Mutex
	now      func() time.Time
	statuses map[string]string
	down     bool
	noQuorum bool                // members answer, the database does not
	slow     time.Duration       // how long a read takes (the clock moves by it)
	advance  func(time.Duration) // moves the clock
	log      []observation
}

type observation struct {
	at       time.Time
	statuses map[string]string
	failed   bool // Incus could not be read
}

func (c *fakeCluster) set(name, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statuses[name] = status
}

func (c *fakeCluster) Observe(context.Context) ([]Observation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slow > 0 {
		c.advance(c.slow)
	}
	if c.noQuorum {
		c.log = append(c.log, observation{at: c.now(), failed: true})
		return nil, fmt.Errorf("list the Incus members: %w (500 context deadline exceeded)", ErrNoQuorum)
	}
	if c.down {
		c.log = append(c.log, observation{at: c.now(), failed: true})
		return nil, errors.New("Incus could not be reached")
	}
	var out []Observation
	for n, s := range c.statuses {
		out = append(out, Observation{Name: n, Status: membership.Status(s)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	c.log = append(c.log, observation{at: c.now(), statuses: maps.Clone(c.statuses)})
	return out, nil
}

// fakeMachine is one MAAS machine and its power controller.
type fakeMachine struct {
	uuid        string
	powerType   string // "ipmi" or "manual"
	on          bool
	ineffective bool      // power-off accepted, nothing happens
	offAt       time.Time // when an accepted power-off takes effect (zero: none pending)
	flaky       float64   // chance each call fails as unreachable
}

// maasCall is one call the worker made to MAAS.
type maasCall struct {
	seq      int
	at       time.Time
	op       string // "read", "query", "power_off"
	systemID string
	uuid     string // read: the UUID answered
	state    string // query: the state answered
	err      error
}

type fakeMAAS struct {
	mu       sync.Mutex
	seq      *seq
	now      func() time.Time
	machines map[string]*fakeMachine
	down     bool
	rand     func() float64
	calls    []maasCall
	// onPowerOff runs when a power-off takes effect (the member's daemon dies).
	onPowerOff func(systemID string)
	// dropPowerOff makes the next power_off never reach MAAS (the worker died before
	// sending it): the call fails and is not logged as sent.
	dropPowerOff bool
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:5240: connection refused")

func (f *fakeMAAS) settle() {
	now := f.now()
	for id, m := range f.machines {
		if !m.offAt.IsZero() && !now.Before(m.offAt) {
			m.offAt = time.Time{}
			if m.on {
				m.on = false
				if f.onPowerOff != nil {
					f.onPowerOff(id)
				}
			}
		}
	}
}

func (f *fakeMAAS) fail(m *fakeMachine) bool {
	return f.down || (m != nil && m.flaky > 0 && f.rand() < m.flaky)
}

func (f *fakeMAAS) Machine(_ context.Context, id string) (MachineFacts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	m := f.machines[id]
	c := maasCall{seq: f.seq.next(), at: f.now(), op: "read", systemID: id}
	switch {
	case f.fail(m):
		c.err = errUnreachable
	case m == nil:
		c.err = fmt.Errorf("MAAS GET machines/%s/: 404: %w", id, ErrMachineNotFound)
	default:
		c.uuid = m.uuid
	}
	f.calls = append(f.calls, c)
	if c.err != nil {
		return MachineFacts{}, c.err
	}
	return MachineFacts{SystemID: id, HardwareUUID: m.uuid, PowerType: m.powerType}, nil
}

func (f *fakeMAAS) QueryPowerState(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	m := f.machines[id]
	c := maasCall{seq: f.seq.next(), at: f.now(), op: "query", systemID: id}
	switch {
	case f.fail(m):
		c.err = errUnreachable
	case m == nil:
		c.err = ErrMachineNotFound
	case m.powerType == "manual":
		c.err = fmt.Errorf("400 Power state is not queryable: %w", ErrPowerNotQueryable)
	case m.on:
		c.state = "on"
	default:
		c.state = "off"
	}
	f.calls = append(f.calls, c)
	return c.state, c.err
}

func (f *fakeMAAS) PowerOff(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	if f.dropPowerOff {
		f.dropPowerOff = false
		return false, context.Canceled
	}
	m := f.machines[id]
	c := maasCall{seq: f.seq.next(), at: f.now(), op: "power_off", systemID: id}
	switch {
	case f.fail(m):
		c.err = errUnreachable
	case m == nil:
		c.err = ErrMachineNotFound
	case m.powerType == "manual" || m.ineffective:
		// accepted, changes nothing
	case m.offAt.IsZero():
		m.offAt = f.now().Add(2 * time.Second)
	}
	f.calls = append(f.calls, c)
	return c.err == nil, c.err
}

func (f *fakeMAAS) callsOf(op, id string) []maasCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []maasCall
	for _, c := range f.calls {
		if c.op == op && (id == "" || c.systemID == id) {
			out = append(out, c)
		}
	}
	return out
}

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (s *memLease) ClusterState(_ context.Context, cluster int64) (ClusterState, error) {
	if err := s.lock(); err != nil {
		return ClusterState{}, err
	}
	defer s.st.mu.Unlock()
	c, ok := s.st.states[cluster]
	if !ok {
		c.Cluster = cluster
	}
	return c, nil
}

func (s *memLease) SaveClusterState(_ context.Context, c ClusterState) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	s.st.states[c.Cluster] = c
	return nil
}

func (m *memStore) state(cluster int64) ClusterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[cluster]
}
