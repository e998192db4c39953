package maintenance

import (
	"context"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/admission"
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
}

func (f *fakeStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}
func (f *fakeStore) Record(context.Context, string) (*machines.Record, error) { return nil, nil }
func (f *fakeStore) FenceInFlight(context.Context, string) (bool, error)      { return f.fenced, nil }
func (f *fakeStore) RunningTask(context.Context, string) (*Task, error)       { return f.running, nil }
func (f *fakeStore) StartTask(_ context.Context, t Task) (*Task, error) {
	t.ID = int64(len(f.started) + 1)
	f.started = append(f.started, t)
	return &t, nil
}
func (f *fakeStore) RecordFinished(context.Context, Task, Kind, string) (int64, error) { return 0, nil }
func (f *fakeStore) Tasks(context.Context, string, int) ([]Task, error)                { return nil, nil }
func (f *fakeStore) EventsAfter(context.Context, string, int64, int) ([]Event, error) {
	return nil, nil
}

type fakeChecker struct {
	runs   int
	report *admission.Report
}

func (f *fakeChecker) Run(context.Context, string, *machines.Record, admission.Trigger) (*admission.Report, error) {
	f.runs++
	return f.report, nil
}

func TestServiceCarriesOutTheVerdict(t *testing.T) {
	planning := func() (context.Context, *plan.Recorder) {
		rec := plan.For("evacuateMember", nil)
		return plan.With(context.Background(), rec), rec
	}

	// A real evacuation that may go: Incus is asked once, the task recorded with the
	// effect's instances and answered.
	ic, st := &fakeIncus{members: voters(nil)}, &fakeStore{}
	s := &Service{Incus: ic, Store: st}
	e, err := s.Evacuate(context.Background(), "n1", "")
	if err != nil || strings.Join(ic.sent, ",") != "evacuate n1" || len(st.started) != 1 || e.Task == nil || e.Task.IncusOperation != "op-42" ||
		len(e.Task.Instances) != 2 || len(e.Targets) != 2 || e.Quorum == nil {
		t.Fatalf("evacuate: %v %v %+v %+v", err, ic.sent, st.started, e)
	}

	// A real call refused answers the first refusal and sends nothing.
	ic, st = &fakeIncus{members: voters(map[string]membership.Status{"n1": membership.StatusEvacuated}), found: true}, &fakeStore{fenced: true, running: running(Evacuate)}
	s = &Service{Incus: ic, Store: st}
	if _, err := s.Evacuate(context.Background(), "n1", ""); !strings.Contains(err.Error(), "already evacuated") || len(ic.sent) != 0 || len(st.started) != 0 {
		t.Fatalf("refused evacuation: %v %v", err, ic.sent)
	}
	// Its plan lists every refusal, and its warnings, and sends nothing changing.
	ctx, rec := planning()
	_, err = s.Evacuate(ctx, "n1", "")
	p := rec.Plan()
	if !strings.Contains(err.Error(), "already evacuated") || len(p.Refusals) != 3 || !strings.Contains(p.Refusals[1].Message, "still running") ||
		!strings.Contains(p.Refusals[2].Message, "power-off in flight") || len(p.Warnings) == 0 || p.Quorum == nil || len(st.started) != 0 {
		t.Fatalf("the plan of a refused evacuation: %v %+v", err, p)
	}
	// A plan that may go: the facts approved, Incus's change a step (the adapter's write
	// seam records it), no task.
	ic, st = &fakeIncus{members: voters(nil)}, &fakeStore{}
	s = &Service{Incus: ic, Store: st}
	ctx, rec = planning()
	if _, err := s.Evacuate(ctx, "n1", "stop"); err != nil || len(st.started) != 0 || len(rec.Plan().Facts) != 2 || rec.Plan().Refused() {
		t.Fatalf("plan: %v %+v", err, rec.Plan())
	}

	// A restore refused already runs no checks; one that may go runs them first, and a
	// failing check refuses it before Incus is asked.
	ck := &fakeChecker{report: &admission.Report{}}
	ic, st = &fakeIncus{members: voters(nil)}, &fakeStore{}
	s = &Service{Incus: ic, Store: st, Checker: ck}
	if _, err := s.Restore(context.Background(), "n1"); !strings.Contains(err.Error(), "is not evacuated") || ck.runs != 0 || len(ic.sent) != 0 {
		t.Fatalf("refused restore: %v, %d check runs", err, ck.runs)
	}
	// Planned, it runs them (the plan shows their outcome) and lists every refusal.
	ctx, rec = planning()
	if _, err := s.Restore(ctx, "n1"); err == nil || ck.runs != 1 || len(rec.Plan().Refusals) != 1 {
		t.Fatalf("planned refused restore: %v, %d check runs, %+v", err, ck.runs, rec.Plan())
	}
	ic.members = voters(map[string]membership.Status{"n1": membership.StatusEvacuated})
	ck.report = report(fail("storage-pools", false))
	if _, err := s.Restore(context.Background(), "n1"); apperr.CodeOf(err) != apperr.FailedPrecondition || ck.runs != 2 || len(ic.sent) != 0 {
		t.Fatalf("restore with a failing check: %v, %d runs, sent %v", err, ck.runs, ic.sent)
	}
	ck.report = report(admission.Check{Name: "online", Result: admission.Pass})
	e, err = s.Restore(context.Background(), "n1")
	if err != nil || strings.Join(ic.sent, ",") != "restore n1" || e.Report != ck.report || e.Task == nil || len(e.Instances) != 2 {
		t.Fatalf("restore: %v %v %+v", err, ic.sent, e)
	}

	// An unknown member is NOT_FOUND at once, planned or not.
	ctx, _ = planning()
	if _, err := s.Evacuate(ctx, "n9", ""); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("unknown member: %v", err)
	}
}
