package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// The service reads the facts, asks Decide, and carries out its verdict: these tests pin
// what it sends and records for a verdict (the rules themselves are decide_test.go's; the
// real Incus, PostgreSQL and change machinery are e2e/maintenance_test.go's).

type fakeIncus struct {
	members []membership.Member
	sent    []string // member state changes asked
	op      IncusOperation
	found   bool
}

func (f *fakeIncus) Members(context.Context) ([]membership.Member, error) { return f.members, nil }
func (f *fakeIncus) AllInstances(context.Context) ([]Instance, error)     { return instances, nil }
func (f *fakeIncus) ChangeMemberState(ctx context.Context, name, action, mode string) (string, error) {
	f.sent = append(f.sent, action+" "+name)
	if plan.Active(ctx) {
		return "", nil
	}
	return "op-42", nil
}
func (f *fakeIncus) MemberOperation(context.Context, string) (IncusOperation, bool, error) {
	return f.op, f.found, nil
}

type fakeStore struct {
	running *Task
	fenced  bool
	started []Task
	record  *machines.Record
	asked   []int64 // the clusters RunningTask and FenceInFlight were asked about
}

func (f *fakeStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}
func (f *fakeStore) Record(context.Context, string) (*machines.Record, error) { return f.record, nil }
func (f *fakeStore) FenceInFlight(_ context.Context, cluster int64, _ string) (bool, error) {
	f.asked = append(f.asked, cluster)
	return f.fenced, nil
}
func (f *fakeStore) RunningTask(_ context.Context, cluster int64, _ string) (*Task, error) {
	f.asked = append(f.asked, cluster)
	return f.running, nil
}
func (f *fakeStore) StartTask(_ context.Context, t Task) (*Task, error) {
	t.ID = int64(len(f.started) + 1)
	f.started = append(f.started, t)
	return &t, nil
}
func (f *fakeStore) RecordFinished(context.Context, Task, Kind, string) (int64, error) { return 0, nil }
func (f *fakeStore) Tasks(context.Context, string, int) ([]Task, error)                { return nil, nil }
func (f *fakeStore) ClusterTasks(context.Context, int64, string, int) ([]Task, error) {
	return nil, nil
}
func (f *fakeStore) EventsAfter(context.Context, int64, string, int64, int) ([]Event, error) {
	return nil, nil
}

type fakeChecker struct {
	runs   int
	report *admission.Report
}

func (f *fakeChecker) RunInCluster(context.Context, clusters.Cluster, string, *machines.Record, admission.Trigger) (*admission.Report, error) {
	f.runs++
	return f.report, nil
}

// one is the service's view of a single cluster (id 1, "default") answered by ic.
func one(ic Incus, st Store) *Service {
	return &Service{Store: st, Clusters: lister{{ID: 1, Name: "default", FromEnvironment: true, Adopted: true}},
		Ports: clusters.PortsFunc[Incus](func(context.Context, int64) (Incus, error) { return ic, nil })}
}

type lister []clusters.Cluster

func (l lister) All() []clusters.Cluster { return l }

func TestServiceCarriesOutTheVerdict(t *testing.T) {
	planning := func() (context.Context, *plan.Recorder) {
		rec := plan.For("evacuateMember", nil)
		return plan.With(context.Background(), rec), rec
	}

	// A real evacuation that may go: Incus is asked once, the task recorded with the
	// effect's instances and answered.
	ic, st := &fakeIncus{members: voters(nil)}, &fakeStore{}
	s := one(ic, st)
	e, err := s.Evacuate(context.Background(), "", "n1", "")
	if err != nil || strings.Join(ic.sent, ",") != "evacuate n1" || len(st.started) != 1 || e.Task == nil || e.Task.IncusOperation != "op-42" ||
		len(e.Task.Instances) != 2 || len(e.Targets) != 2 || e.Quorum == nil {
		t.Fatalf("evacuate: %v %v %+v %+v", err, ic.sent, st.started, e)
	}

	// A real call refused answers the first refusal and sends nothing.
	ic, st = &fakeIncus{members: voters(map[string]membership.Status{"n1": membership.StatusEvacuated}), found: true}, &fakeStore{fenced: true, running: running(Evacuate)}
	s = one(ic, st)
	if _, err := s.Evacuate(context.Background(), "", "n1", ""); !strings.Contains(err.Error(), "already evacuated") || len(ic.sent) != 0 || len(st.started) != 0 {
		t.Fatalf("refused evacuation: %v %v", err, ic.sent)
	}
	// Its plan lists every refusal, and its warnings, and sends nothing changing.
	ctx, rec := planning()
	_, err = s.Evacuate(ctx, "", "n1", "")
	p := rec.Plan()
	if !strings.Contains(err.Error(), "already evacuated") || len(p.Refusals) != 3 || !strings.Contains(p.Refusals[1].Message, "still running") ||
		!strings.Contains(p.Refusals[2].Message, "power-off in flight") || len(p.Warnings) == 0 || p.Quorum == nil || len(st.started) != 0 {
		t.Fatalf("the plan of a refused evacuation: %v %+v", err, p)
	}
	// A plan that may go: the facts approved, Incus's change a step (the adapter's write
	// seam records it), no task.
	ic, st = &fakeIncus{members: voters(nil)}, &fakeStore{}
	s = one(ic, st)
	ctx, rec = planning()
	if _, err := s.Evacuate(ctx, "", "n1", "stop"); err != nil || len(st.started) != 0 || len(rec.Plan().Facts) != 3 || rec.Plan().Refused() {
		t.Fatalf("plan: %v %+v", err, rec.Plan())
	}

	// A restore refused already runs no checks; one that may go runs them first, and a
	// failing check refuses it before Incus is asked.
	ck := &fakeChecker{report: &admission.Report{}}
	ic, st = &fakeIncus{members: voters(nil)}, &fakeStore{}
	s = one(ic, st)
	s.Checker = ck
	if _, err := s.Restore(context.Background(), "", "n1"); !strings.Contains(err.Error(), "is not evacuated") || ck.runs != 0 || len(ic.sent) != 0 {
		t.Fatalf("refused restore: %v, %d check runs", err, ck.runs)
	}
	// Planned, it runs them (the plan shows their outcome) and lists every refusal.
	ctx, rec = planning()
	if _, err := s.Restore(ctx, "", "n1"); err == nil || ck.runs != 1 || len(rec.Plan().Refusals) != 1 {
		t.Fatalf("planned refused restore: %v, %d check runs, %+v", err, ck.runs, rec.Plan())
	}
	ic.members = voters(map[string]membership.Status{"n1": membership.StatusEvacuated})
	ck.report = report(fail("storage-pools", false))
	if _, err := s.Restore(context.Background(), "", "n1"); apperr.CodeOf(err) != apperr.FailedPrecondition || ck.runs != 2 || len(ic.sent) != 0 {
		t.Fatalf("restore with a failing check: %v, %d runs, sent %v", err, ck.runs, ic.sent)
	}
	ck.report = report(admission.Check{Name: "online", Result: admission.Pass})
	e, err = s.Restore(context.Background(), "", "n1")
	if err != nil || strings.Join(ic.sent, ",") != "restore n1" || e.Report != ck.report || e.Task == nil || len(e.Instances) != 2 {
		t.Fatalf("restore: %v %v %+v", err, ic.sent, e)
	}

	// An unknown member is NOT_FOUND at once, planned or not.
	ctx, _ = planning()
	if _, err := s.Evacuate(ctx, "", "n9", ""); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("unknown member: %v", err)
	}
}

// Each member is evacuated in its own cluster: the one its record names (or the call
// names, for a member without a record), through that cluster's ports only; its targets
// and projection are that cluster's members, and the task records the cluster. Naming
// another cluster than the record's is refused before anything is read; an unknown name
// is NOT_FOUND on field cluster; with several clusters and neither, the environment's.
func TestEvacuationIsInTheMembersCluster(t *testing.T) {
	a := &fakeIncus{members: voters(nil)}
	b := &fakeIncus{members: voters(nil)} // another cluster, where n3 is not admitted
	b.members[2].Config = map[string]string{}
	all := lister{{ID: 1, Name: "a", FromEnvironment: true, Adopted: true}, {ID: 2, Name: "b", Adopted: true}}
	var asked []int64
	ports := clusters.PortsFunc[Incus](func(_ context.Context, id int64) (Incus, error) {
		asked = append(asked, id)
		if id == 2 {
			return b, nil
		}
		return a, nil
	})
	two := int64(2)
	st := &fakeStore{record: &machines.Record{Name: "n1", Cluster: &two}}
	s := &Service{Store: st, Clusters: all, Ports: ports}
	e, err := s.Evacuate(context.Background(), "", "n1", "")
	if err != nil || len(b.sent) != 1 || len(a.sent) != 0 || st.started[0].Cluster != 2 || fmt.Sprint(asked) != "[2]" || fmt.Sprint(st.asked) != "[2 2]" {
		t.Fatalf("evacuate in the record's cluster: %v, sent a %v b %v, started %+v, ports asked %v, store asked %v", err, a.sent, b.sent, st.started, asked, st.asked)
	}
	if len(e.Targets) != 1 || e.Targets[0].Member != "n2" {
		t.Fatalf("targets are the record's cluster's members: %+v", e.Targets)
	}
	if _, err := s.Evacuate(context.Background(), "a", "n1", ""); apperr.CodeOf(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "machine of cluster b, not a") || len(a.sent) != 0 {
		t.Fatalf("another cluster than the record's: %v", err)
	}
	if _, err := s.Evacuate(context.Background(), "nope", "n1", ""); apperr.CodeOf(err) != apperr.NotFound || !onField(err, "cluster") {
		t.Fatalf("an unknown cluster: %v", err)
	}
	// A member without a record: the cluster named; with several, none named is refused.
	st.record, asked = nil, nil
	if _, err := s.Evacuate(context.Background(), "b", "n2", ""); err != nil || fmt.Sprint(asked) != "[2]" {
		t.Fatalf("a member without a record, in the cluster named: %v %v", err, asked)
	}
	asked = nil
	if _, err := s.Evacuate(context.Background(), "", "n3", ""); apperr.CodeOf(err) != apperr.InvalidInput || !strings.Contains(err.Error(), "a, b") || len(asked) != 0 {
		t.Fatalf("a member without a record, no cluster named: %v %v", err, asked)
	}
	// A record naming no cluster (from before clusters were records): the environment's.
	st.record = &machines.Record{Name: "n3"}
	if _, err := s.Evacuate(context.Background(), "", "n3", ""); err != nil || fmt.Sprint(asked) != "[1]" || len(a.sent) != 1 {
		t.Fatalf("a record naming no cluster: %v %v", err, asked)
	}
}

// The follower reads each task's Incus operation from the task's cluster; a cluster it
// cannot reach leaves its tasks running and the other cluster's are still followed.
func TestFollowerAsksEachTasksCluster(t *testing.T) {
	a := &fakeIncus{members: voters(nil), found: true, op: IncusOperation{Done: true}}
	st := &followStore{running: []Task{{ID: 1, Cluster: 1, Machine: "n1", Action: Evacuate}, {ID: 2, Cluster: 2, Machine: "n1", Action: Evacuate}}}
	f := NewFollower(clusters.PortsFunc[Incus](func(_ context.Context, id int64) (Incus, error) {
		if id == 2 {
			return nil, apperr.New(apperr.Unavailable, "cluster b does not answer")
		}
		return a, nil
	}), st, slog.New(slog.DiscardHandler), time.Millisecond)
	if n := f.Round(context.Background()); n != 1 || fmt.Sprint(st.finished) != "[1]" {
		t.Fatalf("%d still running, finished %v", n, st.finished)
	}
}

type followStore struct {
	running  []Task
	finished []int64
}

func (f *followStore) Running(context.Context) ([]Task, error)      { return f.running, nil }
func (f *followStore) Progress(context.Context, Task, string) error { return nil }
func (f *followStore) Finish(_ context.Context, t Task, _ Kind, _ string, _ []string) error {
	f.finished = append(f.finished, t.ID)
	return nil
}

func onField(err error, field string) bool {
	var e *apperr.Error
	return errors.As(err, &e) && e.Field == field
}
