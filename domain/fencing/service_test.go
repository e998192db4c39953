package fencing

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// apiStore is the API side's store on memory.
type apiStore struct {
	mu       sync.Mutex
	mappings map[string]Mapping
	events   []Event
	changes  int
	ws       *WorkerStatus
}

type apiTx struct{ s *apiStore }

func (s *apiStore) Change(ctx context.Context, member string, fn func(Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	saved := make(map[string]Mapping, len(s.mappings))
	for k, v := range s.mappings {
		saved[k] = v
	}
	if err := fn(apiTx{s}); err != nil {
		s.mappings = saved
		return err
	}
	s.changes++
	return nil
}

func (t apiTx) PutMapping(_ context.Context, m Mapping) (*Mapping, error) {
	prev, ok := t.s.mappings[m.Member]
	t.s.mappings[m.Member] = m
	if ok {
		return &prev, nil
	}
	return nil, nil
}

func (t apiTx) DeleteMapping(_ context.Context, _ int64, member string) (*Mapping, error) {
	prev, ok := t.s.mappings[member]
	if !ok {
		return nil, nil
	}
	delete(t.s.mappings, member)
	return &prev, nil
}

func (s *apiStore) Events(context.Context, EventFilter) ([]Event, error) { return nil, nil }

func (s *apiStore) EventsAfter(_ context.Context, cluster int64, member string, after int64, limit int) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.events {
		if e.ID > after && (member == "" || e.Member == member) && (cluster == 0 || e.Cluster == cluster) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *apiStore) WorkerStatus(context.Context) (*WorkerStatus, error) { return s.ws, nil }

func (s *apiStore) Statuses(context.Context) (map[clusters.MemberKey]Status, error) {
	out := map[clusters.MemberKey]Status{}
	for k, m := range s.mappings {
		out[clusters.MemberKey{Cluster: m.Cluster, Name: k}] = Status{Mapping: m}
	}
	return out, nil
}

func (s *apiStore) ClusterStates(context.Context) (map[int64]ClusterState, error) {
	return map[int64]ClusterState{}, nil
}

// envCluster is the one cluster the API tests know: the environment's.
type envCluster struct{}

func (envCluster) All() []clusters.Cluster {
	return []clusters.Cluster{{ID: 1, Name: "default", FromEnvironment: true, Adopted: true}}
}

// record appends an event as the worker would, and pushes it on the feed.
func (s *apiStore) record(feed Feed, member string, kind Kind) Event {
	s.mu.Lock()
	e := Event{ID: int64(len(s.events) + 1), At: t0, Member: member, Kind: kind}
	s.events = append(s.events, e)
	s.mu.Unlock()
	if feed != nil {
		feed.Publish(e.Member, e)
	}
	return e
}

type records map[string]*machines.Record

func (r records) Record(_ context.Context, name string) (*machines.Record, error) {
	return r[name], nil
}

type readerFunc func(ctx context.Context, id string) (MachineFacts, error)

func (f readerFunc) Machine(ctx context.Context, id string) (MachineFacts, error) { return f(ctx, id) }

// newFeed is a feed as the store's is: events keyed by member, positioned by id.
func newFeed() Feed { return broadcast.NewHub[string, Event](func(e Event) int64 { return e.ID }, 8) }

var sameEvents = broadcast.NewView(func(e Event) Event { return e })

func action() (context.Context, *audit.Action) {
	a := &audit.Action{Actor: "admin", Name: "setFenceMapping"}
	return audit.WithAction(context.Background(), a), a
}

func wantInvalid(t *testing.T, err error, code apperr.Code, field string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != code || e.Field != field {
		t.Fatalf("error %v, want %s on field %q", err, code, field)
	}
}

func TestSetMappingValidatesAndSaysWhatWasChecked(t *testing.T) {
	st := &apiStore{mappings: map[string]Mapping{}}
	recs := records{"m4": {Name: "m4", Provisioner: machines.MAAS, MAASSystemID: "abcd12", HardwareUUID: "4c4c4544-0000-0000-0000-000000000004"}}
	s := &Service{Clusters: envCluster{}, Store: st, Records: recs, Now: func() time.Time { return t0 }}
	ctx, act := action()
	good := MappingInput{Member: "m3", SystemID: "abcd13", HardwareUUID: "4C4C4544-0000-0000-0000-000000000003"}

	for _, c := range []struct {
		in    MappingInput
		field string
	}{
		{MappingInput{Member: "M3", SystemID: "abcd13", HardwareUUID: good.HardwareUUID}, "member"},
		{MappingInput{Member: "m3", SystemID: "AB-1", HardwareUUID: good.HardwareUUID}, "maasSystemId"},
		{MappingInput{Member: "m3", SystemID: "abcd13", HardwareUUID: "not-a-uuid"}, "hardwareUuid"},
	} {
		_, err := s.SetMapping(ctx, "admin", c.in)
		wantInvalid(t, err, apperr.InvalidInput, c.field)
	}
	// A machine registered from MAAS must be mapped to the machine it was registered as.
	_, err := s.SetMapping(ctx, "admin", MappingInput{Member: "m4", SystemID: "other1", HardwareUUID: "4c4c4544-0000-0000-0000-000000000004"})
	wantInvalid(t, err, apperr.FailedPrecondition, "maasSystemId")
	_, err = s.SetMapping(ctx, "admin", MappingInput{Member: "m4", SystemID: "abcd12", HardwareUUID: "4c4c4544-0000-0000-0000-000000000009"})
	wantInvalid(t, err, apperr.FailedPrecondition, "hardwareUuid")
	if st.changes != 0 {
		t.Fatal("a refused mapping was saved")
	}

	// No MAAS for the API: saved, and the notice says it was not checked.
	res, err := s.SetMapping(ctx, "admin", good)
	if err != nil || res.Verified || res.Notice != NoMAASNotice || res.Mapping.HardwareUUID != strings.ToLower(good.HardwareUUID) || res.Mapping.SetBy != "admin" {
		t.Fatalf("unchecked: %+v %v", res, err)
	}
	if ev := act.Event(audit.Succeeded, ""); ev.Details["verifiedWithMaas"] != false {
		t.Fatalf("audit details %v", ev.Details)
	}

	// With MAAS: asked, and its answer decides.
	answers := map[string]MachineFacts{"abcd13": {SystemID: "abcd13", Hostname: "m3", HardwareUUID: "4C4C4544-0000-0000-0000-000000000003", PowerType: "ipmi"}}
	down := false
	s.MAAS = readerFunc(func(_ context.Context, id string) (MachineFacts, error) {
		if down {
			return MachineFacts{}, errors.New("connection refused")
		}
		if m, ok := answers[id]; ok {
			return m, nil
		}
		return MachineFacts{}, ErrMachineNotFound
	})
	ctx, act = action()
	res, err = s.SetMapping(ctx, "admin", good)
	if err != nil || !res.Verified || res.Previous == nil || !strings.Contains(res.Notice, "ipmi") {
		t.Fatalf("checked: %+v %v", res, err)
	}
	if ev := act.Event(audit.Succeeded, ""); ev.Details["verifiedWithMaas"] != true || ev.Details["previous"] == nil {
		t.Fatalf("audit details %v", ev.Details)
	}
	_, err = s.SetMapping(ctx, "admin", MappingInput{Member: "m3", SystemID: "zzzz99", HardwareUUID: good.HardwareUUID})
	wantInvalid(t, err, apperr.NotFound, "maasSystemId")
	_, err = s.SetMapping(ctx, "admin", MappingInput{Member: "m3", SystemID: "abcd13", HardwareUUID: "4c4c4544-0000-0000-0000-00000000ffff"})
	wantInvalid(t, err, apperr.FailedPrecondition, "hardwareUuid")
	down = true
	_, err = s.SetMapping(ctx, "admin", good)
	if !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("MAAS down: %v", err)
	}

	// Removing.
	if m, err := s.RemoveMapping(ctx, "m3", ""); err != nil || m.SystemID != "abcd13" {
		t.Fatalf("remove: %+v %v", m, err)
	}
	_, err = s.RemoveMapping(ctx, "m3", "")
	wantInvalid(t, err, apperr.NotFound, "member")
}

func ids(evs []Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// collect reads n events from ch.
func collect(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	var out []Event
	for len(out) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %v", ids(out))
			}
			out = append(out, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %v, want %d events", ids(out), n)
		}
	}
	return out
}

func TestProgressReplaysThenGoesLiveWithoutGapsOrRepeats(t *testing.T) {
	st := &apiStore{mappings: map[string]Mapping{}}
	f := newFeed()
	s := &Service{Clusters: envCluster{}, Store: st, Feed: f}
	for range 3 {
		st.record(nil, "m3", KindRefused)
	}
	st.record(nil, "m2", KindOffline)
	f.Start(4) // the feed starts at the table's last event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(member string, after *int64) (<-chan Event, error) {
		want, err := s.Progress(member, 0, after)
		if err != nil {
			return nil, err
		}
		return broadcast.Subscribe(ctx, s.Feed, want, sameEvents, 16), nil
	}

	// From event 1: 2, 3, 4 are replayed, then live ones follow.
	after := int64(1)
	all, err := progress("", &after)
	if err != nil {
		t.Fatal(err)
	}
	m3, err := progress("m3", &after)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(collect(t, all, 3)); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("replayed %v", got)
	}
	if got := ids(collect(t, m3, 2)); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("replayed for m3 %v", got)
	}
	// An event already replayed and pushed again live is not repeated.
	f.Publish(st.events[3].Member, st.events[3])
	st.record(f, "m3", KindEligible)
	if got := ids(collect(t, all, 1)); !slices.Equal(got, []int64{5}) {
		t.Fatalf("live %v", got)
	}
	if got := ids(collect(t, m3, 1)); !slices.Equal(got, []int64{5}) {
		t.Fatalf("live for m3 %v", got)
	}

	// A subscriber that falls behind the feed is caught up from the store.
	slow, err := progress("", nil)
	if err != nil {
		t.Fatal(err)
	}
	st.record(f, "m1", KindOffline)
	if got := ids(collect(t, slow, 1)); !slices.Equal(got, []int64{6}) {
		t.Fatalf("live-only %v", got)
	}
	for range 600 { // more than the stream's buffer while nobody reads
		st.record(f, "m1", KindRefused)
	}
	got := ids(collect(t, slow, 600))
	for i, id := range got {
		if id != int64(7+i) {
			t.Fatalf("after falling behind: event %d is %d (gap or repeat)", i, id)
		}
	}
}

type clusterConfig map[string]string

func (c clusterConfig) ServerConfig(context.Context) (map[string]string, error) { return c, nil }

type snapshot membership.Snapshot

func (s *snapshot) Snapshot(context.Context) (*membership.Snapshot, error) {
	m := membership.Snapshot(*s)
	return &m, nil
}

func TestClusterViewWarns(t *testing.T) {
	st := &apiStore{mappings: map[string]Mapping{"m1": {Cluster: 1, Member: "m1"}}}
	now := t0
	s := &Service{Clusters: envCluster{}, Store: st, Now: func() time.Time { return now },
		Incus:      clusterConfig{"cluster.healing_threshold": "30"},
		Membership: &snapshot{Members: []membership.Member{{Name: "m1", Status: "Online"}, {Name: "m2", Status: "Offline"}, {Name: "m3", Status: "Online"}}}}
	v, err := s.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, w := range v.Warnings {
		codes = append(codes, w.Code)
	}
	if *v.HealingThreshold != 30 || *v.OfflineThreshold != 20 || *v.Members != 3 || *v.OfflineMembers != 1 ||
		!slices.Equal(v.UnmappedMembers, []string{"m2", "m3"}) || !slices.Equal(codes, []string{WarnNoFenceWorker, WarnHealingEnabled, WarnUnmappedMembers}) {
		t.Fatalf("view %+v codes %v", v, codes)
	}
	// A worker that reported recently: no worker warning; one that went quiet: warned.
	st.ws = &WorkerStatus{Worker: "w1", LastRoundAt: now.Add(-5 * time.Second), PollInterval: 5 * time.Second, Limits: Limits{OfflineAfter: time.Minute}}
	s.Incus = clusterConfig{}
	v, _ = s.Cluster(context.Background())
	if len(v.Warnings) != 1 || v.Warnings[0].Code != WarnUnmappedMembers || *v.HealingThreshold != 0 || *v.MinOfflineAfter != 25 {
		t.Fatalf("healthy view %+v", v.Warnings)
	}
	// Incus's offline threshold raised past the worker's offline time: warned.
	s.Incus = clusterConfig{"cluster.offline_threshold": "60"}
	v, _ = s.Cluster(context.Background())
	if len(v.Warnings) != 2 || v.Warnings[0].Code != WarnOfflineAfter || !strings.Contains(v.Warnings[0].Message, "1m5s") || *v.OfflineThreshold != 60 || *v.MinOfflineAfter != 65 {
		t.Fatalf("offline threshold above the worker's offline time: %+v", v.Warnings)
	}
	s.Incus = clusterConfig{}
	now = now.Add(time.Minute)
	v, _ = s.Cluster(context.Background())
	if v.Warnings[0].Code != WarnWorkerSilent {
		t.Fatalf("silent worker %+v", v.Warnings)
	}
}

type failingCluster struct{ err error }

func (f failingCluster) ServerConfig(context.Context) (map[string]string, error) { return nil, f.err }
func (f failingCluster) Snapshot(context.Context) (*membership.Snapshot, error)  { return nil, f.err }

// A cluster view never shows "could not ask" as 0 members.
func TestClusterViewSaysWhenIncusCouldNotBeAsked(t *testing.T) {
	hung := apperr.New(apperr.Unavailable, "Incus did not answer within 2s while trying to list the cluster members")
	st := &apiStore{mappings: map[string]Mapping{}, ws: &WorkerStatus{Worker: "w1", LastRoundAt: t0, PollInterval: 5 * time.Second, Limits: Limits{OfflineAfter: time.Minute}}}
	for name, s := range map[string]*Service{
		"configuration unreadable": {Store: st, Now: func() time.Time { return t0 }, Incus: failingCluster{hung}, Membership: failingCluster{hung}},
		"members unreadable":       {Store: st, Now: func() time.Time { return t0 }, Incus: clusterConfig{}, Membership: failingCluster{hung}},
		"not configured":           {Store: st, Now: func() time.Time { return t0 }},
	} {
		v, err := s.Cluster(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v.Members != nil || v.OfflineMembers != nil || v.UnmappedMembers != nil {
			t.Errorf("%s: counts %v/%v, unmapped %v; want unknown (nil)", name, v.Members, v.OfflineMembers, v.UnmappedMembers)
		}
		if len(v.Warnings) != 1 || v.Warnings[0].Code != WarnIncusUnavailable {
			t.Errorf("%s: warnings %+v, want one INCUS_UNAVAILABLE", name, v.Warnings)
		} else if name != "not configured" && v.Warnings[0].Message != hung.Message {
			t.Errorf("%s: warning %q does not give the reason", name, v.Warnings[0].Message)
		}
	}
}

// registry is a list of registered clusters.
type registry []clusters.Cluster

func (r registry) All() []clusters.Cluster { return r }

// A mapping's plan covers the cluster it is written in, by its identity and not only its
// name (as evacuations', rolling reboots' and the guard's plans do): a cluster removed and
// registered again under the same name is another cluster, so a plan approved for the
// one does not confirm a mapping in the other.
func TestMappingPlansCoverTheCluster(t *testing.T) {
	first := registry{{ID: 1, Name: "rack2", Fingerprint: strings.Repeat("a", 64), SeedURLs: []string{"https://127.0.0.2:8443"}, Adopted: true}}
	again := registry{{ID: 7, Name: "rack2", Fingerprint: strings.Repeat("b", 64), SeedURLs: []string{"https://127.0.0.2:8443"}, Adopted: true}}
	in := MappingInput{Member: "m3", Cluster: "rack2", SystemID: "abcd13", HardwareUUID: "4c4c4544-0000-0000-0000-000000000003"}
	hashes := map[string][]string{}
	for _, reg := range []registry{first, again} {
		st := &apiStore{mappings: map[string]Mapping{"m3": {Cluster: reg[0].ID, Member: "m3", SystemID: "abcd13", HardwareUUID: in.HardwareUUID}}}
		s := &Service{Clusters: reg, Store: st, Now: func() time.Time { return t0 }}
		for _, call := range []string{"setFenceMapping", "removeFenceMapping"} {
			ctx, _ := action()
			rec := plan.For(call, map[string]any{"member": "m3", "cluster": "rack2"})
			ctx = plan.With(ctx, rec)
			var err error
			if call == "setFenceMapping" {
				_, err = s.SetMapping(ctx, "admin", in)
			} else {
				_, err = s.RemoveMapping(ctx, "m3", "rack2")
			}
			if err != nil {
				t.Fatalf("%s in cluster %d: %v", call, reg[0].ID, err)
			}
			p := rec.Plan()
			if !slices.ContainsFunc(p.Facts, func(f plan.Fact) bool { return f.Name == "cluster" && strings.Contains(f.Value, reg[0].Fingerprint) }) {
				t.Fatalf("%s: the plan's facts %v do not name cluster %d", call, p.Facts, reg[0].ID)
			}
			hashes[call] = append(hashes[call], p.Hash())
		}
	}
	for call, h := range hashes {
		if h[0] == h[1] {
			t.Fatalf("%s: the same plan hash for two clusters called rack2", call)
		}
	}
}

// A member name is unique within its cluster only: fenceProgress(member, cluster) follows
// that cluster's member, replayed and live, never the other cluster's of the same name.
func TestProgressOfOneClustersMember(t *testing.T) {
	st := &apiStore{mappings: map[string]Mapping{}}
	f := newFeed()
	s := &Service{Clusters: envCluster{}, Store: st, Feed: f}
	in := func(feed Feed, cluster int64, member string, kind Kind) {
		st.mu.Lock()
		e := Event{ID: int64(len(st.events) + 1), At: t0, Member: member, Kind: kind, Cluster: cluster}
		st.events = append(st.events, e)
		st.mu.Unlock()
		if feed != nil {
			feed.Publish(e.Member, e)
		}
	}
	in(nil, 1, "m2", KindOffline)
	in(nil, 2, "m2", KindOffline)
	in(nil, 2, "m2", KindRefused)
	f.Start(3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after := int64(0)
	want, err := s.Progress("m2", 2, &after)
	if err != nil {
		t.Fatal(err)
	}
	ch := broadcast.Subscribe(ctx, s.Feed, want, sameEvents, 16)
	if got := ids(collect(t, ch, 2)); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("replayed for cluster 2's m2: %v", got)
	}
	in(f, 1, "m2", KindEligible) // cluster 1's m2: not this subscriber's
	in(f, 2, "m2", KindEligible)
	if got := ids(collect(t, ch, 1)); !slices.Equal(got, []int64{5}) {
		t.Fatalf("live for cluster 2's m2: %v", got)
	}
}
