package rolling

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// Two clusters, a and b, each with members m1–m3 (the same names: member names are unique
// within a cluster only). Records: r1 in a, r2 in b; m1–m3 have none.
var twoClusters = clusterList{{ID: 1, Name: "a", FromEnvironment: true, Adopted: true}, {ID: 2, Name: "b", Adopted: true}}

type clusterList []clusters.Cluster

func (l clusterList) All() []clusters.Cluster { return l }
func (l clusterList) Lookup(_ context.Context, id int64) (clusters.Cluster, error) {
	for _, c := range l {
		if c.ID == id {
			return c, nil
		}
	}
	return clusters.Cluster{}, apperr.New(apperr.NotFound, "no cluster %d", id)
}

// clusterIncus is one cluster's Incus: its members, and who asked.
type clusterIncus struct {
	name  string
	mu    sync.Mutex
	reads int
}

func (c *clusterIncus) Members(context.Context) ([]membership.Member, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	var out []membership.Member
	for _, n := range []string{"m1", "m2", "m3"} {
		out = append(out, member(n, membership.StatusOnline, quorum.RoleVoter))
	}
	return out, nil
}
func (c *clusterIncus) MemberAnswers(context.Context, string) error { return nil }

// twoStore is the database of two clusters: one active task per cluster at most.
type twoStore struct {
	mu       sync.Mutex
	tasks    []Task
	inserted []Task
	asked    []string // "Tasks cluster member", "Mappings cluster"
}

func (s *twoStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}
func (s *twoStore) Active(_ context.Context, cluster int64) (*Task, error) {
	for _, t := range s.tasks {
		if t.Cluster == cluster && t.Active() {
			return &t, nil
		}
	}
	return nil, nil
}
func (s *twoStore) Unfinished(context.Context) ([]Task, error) { return slices.Clone(s.tasks), nil }
func (s *twoStore) Task(_ context.Context, id int64) (*Task, error) {
	for _, t := range s.tasks {
		if t.ID == id {
			return &t, nil
		}
	}
	return nil, nil
}
func (s *twoStore) Latest(context.Context, int64) (*Task, error) {
	return nil, nil
}
func (s *twoStore) Insert(_ context.Context, t Task) (int64, error) {
	s.inserted = append(s.inserted, t)
	return 0, nil
}
func (s *twoStore) SetState(context.Context, int64, []State, State, string) (bool, error) {
	return true, nil
}
func (s *twoStore) Advance(context.Context, int64, int, Stage) (bool, error) { return true, nil }
func (s *twoStore) Mappings(_ context.Context, cluster int64) (map[string]fencing.Mapping, error) {
	s.mu.Lock()
	s.asked = append(s.asked, fmt.Sprintf("Mappings %d", cluster))
	s.mu.Unlock()
	out := map[string]fencing.Mapping{}
	for _, m := range []string{"m1", "m2", "m3"} {
		out[m] = fencing.Mapping{Member: m, SystemID: fmt.Sprintf("sys-%d-%s", cluster, m), HardwareUUID: "u"}
	}
	return out, nil
}
func (s *twoStore) Record(_ context.Context, name string) (*machines.Record, error) {
	one, two := int64(1), int64(2)
	switch name {
	case "r1":
		return &machines.Record{Name: name, Cluster: &one}, nil
	case "r2":
		return &machines.Record{Name: name, Cluster: &two}, nil
	}
	return nil, nil
}
func (s *twoStore) ClusterTasks(_ context.Context, cluster int64, member string, _ int) ([]maintenance.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, fmt.Sprintf("Tasks %d %s", cluster, member))
	return nil, nil
}
func (s *twoStore) RecordAudit(context.Context, audit.Event) error { return nil }

// twoMaintenance records the evacuations asked, with their cluster.
type twoMaintenance struct {
	mu    sync.Mutex
	calls []string
}

func (m *twoMaintenance) Evacuate(_ context.Context, cluster, name, _ string) (*maintenance.Effect, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "evacuate "+cluster+"/"+name)
	return &maintenance.Effect{}, nil
}
func (m *twoMaintenance) Restore(_ context.Context, cluster, name string) (*maintenance.Effect, error) {
	return &maintenance.Effect{}, nil
}

func twoPorts(a, b *clusterIncus) clusters.Ports[Incus] {
	return clusters.PortsFunc[Incus](func(_ context.Context, id int64) (Incus, error) {
		if id == 2 {
			return b, nil
		}
		return a, nil
	})
}

// The members a start names are all of one cluster, named with the one rule (each
// member's record, or the cluster given); a mix is INVALID_INPUT, naming both clusters;
// one cluster's running task does not refuse a start in the other.
func TestStartIsOneClustersMembers(t *testing.T) {
	a, b := &clusterIncus{name: "a"}, &clusterIncus{name: "b"}
	st := &twoStore{tasks: []Task{{ID: 7, Cluster: 1, Members: []string{"m1"}, State: StateRunning, Stage: StageEvacuate}}}
	s := &Service{Ports: twoPorts(a, b), Clusters: twoClusters, Store: st}
	ctx := audit.WithAction(context.Background(), &audit.Action{Actor: "ada", Name: "startRollingReboot"})

	cl, err := s.Cluster(ctx, "", []string{"r2"})
	if err != nil || cl.Name != "b" {
		t.Fatalf("a record's cluster: %v %v", cl, err)
	}
	if _, err := s.Cluster(ctx, "", []string{"r1", "r2"}); apperr.CodeOf(err) != apperr.InvalidInput || !strings.Contains(err.Error(), "cluster a") || !strings.Contains(err.Error(), "cluster b") {
		t.Fatalf("members of two clusters: %v", err)
	}
	if _, err := s.Cluster(ctx, "b", []string{"m1", "r1"}); apperr.CodeOf(err) != apperr.FailedPrecondition {
		t.Fatalf("a record of another cluster than the one given: %v", err)
	}
	if _, err := s.Cluster(ctx, "", []string{"m1"}); apperr.CodeOf(err) != apperr.InvalidInput || !strings.Contains(err.Error(), "a, b") {
		t.Fatalf("no record, no cluster named, two clusters: %v", err)
	}
	if _, err := s.Cluster(ctx, "c", []string{"m1"}); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("an unknown cluster: %v", err)
	}

	// a runs one: a second start there is refused, b's goes on (in b, with b's mappings).
	if _, err := s.Start(ctx, "a", []string{"m2"}); apperr.CodeOf(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "rolling reboot 7") {
		t.Fatalf("a second in a: %v", err)
	}
	if _, err := s.Start(ctx, "b", []string{"m1", "m2"}); err != nil || len(st.inserted) != 1 || st.inserted[0].Cluster != 2 || !slices.Contains(st.asked, "Mappings 2") {
		t.Fatalf("a start in b while a runs one: %v %+v %v", err, st.inserted, st.asked)
	}
}

// A round drives every cluster's running task, each through its own cluster's ports and
// in its own cluster (the maintenance tasks read and the evacuation asked).
func TestRoundDrivesEachClustersTask(t *testing.T) {
	a, b := &clusterIncus{name: "a"}, &clusterIncus{name: "b"}
	st := &twoStore{tasks: []Task{
		{ID: 7, Cluster: 1, Members: []string{"m1", "m2"}, State: StateRunning, Stage: StageEvacuate},
		{ID: 8, Cluster: 2, Members: []string{"m2"}, State: StateRunning, Stage: StageEvacuate},
		{ID: 9, Cluster: 3, Members: []string{"m3"}, State: StatePaused, Stage: StageEvacuate},
	}}
	mnt := &twoMaintenance{}
	d := &Driver{Store: st, Ports: twoPorts(a, b), Clusters: twoClusters, Maintenance: mnt, Tasks: st, Auditor: st,
		Actor: "apelora-worker test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := d.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(mnt.calls)
	slices.Sort(st.asked)
	if fmt.Sprint(mnt.calls) != "[evacuate a/m1 evacuate b/m2]" || fmt.Sprint(st.asked) != "[Tasks 1 m1 Tasks 2 m2]" || a.reads != 1 || b.reads != 1 {
		t.Fatalf("evacuations %v, reads %v, member lists a %d b %d", mnt.calls, st.asked, a.reads, b.reads)
	}
}

// Pausing, resuming and cancelling a rolling reboot is audited naming its cluster, as its
// start is: two clusters' reboots may each be at their m1, and the trail must say which.
func TestPauseResumeCancelNameTheCluster(t *testing.T) {
	st := &twoStore{tasks: []Task{
		{ID: 7, Cluster: 1, Members: []string{"m1"}, State: StateRunning, Stage: StageEvacuate},
		{ID: 9, Cluster: 2, Members: []string{"m1"}, State: StatePaused, Stage: StageEvacuate},
	}}
	s := &Service{Ports: twoPorts(&clusterIncus{name: "a"}, &clusterIncus{name: "b"}), Clusters: twoClusters, Store: st}
	for _, c := range []struct {
		name, id, want string
		move           func(context.Context, string) (*Task, error)
	}{
		{"pauseRollingReboot", "7", "a", s.Pause},
		{"resumeRollingReboot", "9", "b", s.Resume},
		{"cancelRollingReboot", "9", "b", s.Cancel},
	} {
		a := &audit.Action{Actor: "ada", Name: c.name}
		if _, err := c.move(audit.WithAction(context.Background(), a), c.id); err != nil {
			t.Fatalf("%s %s: %v", c.name, c.id, err)
		}
		if got := a.Event(audit.Succeeded, "").Details["cluster"]; got != c.want {
			t.Fatalf("%s of rolling reboot %s: details.cluster %v, want %s", c.name, c.id, got, c.want)
		}
	}
}
