package maintenance

import (
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// voters is n1, n2, n3: database voters, admitted (marked), Online unless statuses says
// otherwise.
func voters(statuses map[string]membership.Status) []membership.Member {
	var out []membership.Member
	for _, n := range []string{"n1", "n2", "n3"} {
		s, ok := statuses[n]
		if !ok {
			s = membership.StatusOnline
		}
		out = append(out, membership.Member{Name: n, Status: s, Roles: []string{quorum.RoleVoter}, FailureDomain: n,
			Config: map[string]string{lifecycle.AdmissionKey: "admission 1"}})
	}
	return out
}

var instances = []Instance{
	{Name: "web", Type: "container", Status: "Running", Location: "n1"},
	{Name: "db", Project: "p", Type: "virtual-machine", Status: "Running", Location: "n1", Evacuate: "stop"},
	{Name: "other", Location: "n2"},
}

func running(action string) *Task {
	return &Task{ID: 4, Machine: "n1", Action: action, IncusOperation: "op-9", StartedAt: t0}
}

func report(checks ...admission.Check) *admission.Report {
	return &admission.Report{Machine: "n1", Checks: checks}
}

func fail(name string, inconclusive bool) admission.Check {
	return admission.Check{Name: name, Result: admission.Fail, Message: "no answer", Inconclusive: inconclusive}
}

// TestDecideRefusesWhatARequestMayNotDo: every refusal of an evacuation and a restore,
// with its code and in its order (a real call answers the first, a plan lists them all),
// and what goes ahead.
func TestDecideRefusesWhatARequestMayNotDo(t *testing.T) {
	evac := func(statuses map[string]membership.Status) Request {
		return Request{Action: Evacuate, Member: "n1", Members: voters(statuses), Instances: instances}
	}
	rest := func(statuses map[string]membership.Status) Request {
		return Request{Action: Restore, Member: "n1", Members: voters(statuses), Instances: instances}
	}
	n1 := func(s membership.Status) map[string]membership.Status { return map[string]membership.Status{"n1": s} }
	with := func(r Request, f func(*Request)) Request { f(&r); return r }
	cases := []struct {
		name  string
		r     Request
		codes []apperr.Code // the refusals' codes, in order
		says  []string      // each refusal says (by order)
	}{
		{"evacuate an online member", evac(nil), nil, nil},
		{"evacuate an unknown member", with(evac(nil), func(r *Request) { r.Member = "n9" }), []apperr.Code{apperr.NotFound}, []string{`"n9" is not a member`}},
		{"evacuate an evacuated member", evac(n1(membership.StatusEvacuated)), []apperr.Code{apperr.FailedPrecondition}, []string{"already evacuated"}},
		{"evacuate an offline member", evac(n1(membership.StatusOffline)), []apperr.Code{apperr.FailedPrecondition}, []string{"is offline"}},
		{"evacuate while an evacuation runs (Incus says so)", with(evac(nil), func(r *Request) { r.Running, r.RunningFound = running(Restore), true }),
			[]apperr.Code{apperr.FailedPrecondition}, []string{"an restore started at 2026-12-06T12:00:00Z is still running (Incus operation op-9)"}},
		{"the row runs but Incus finished it: not busy", with(evac(nil), func(r *Request) {
			r.Running, r.RunningFound, r.RunningOp = running(Evacuate), true, IncusOperation{Done: true}
		}), nil, nil},
		{"the row runs but Incus forgot it: not busy", with(evac(nil), func(r *Request) { r.Running = running(Evacuate) }), nil, nil},
		{"evacuate with a fence in flight", with(evac(nil), func(r *Request) { r.FenceInFlight = true }), []apperr.Code{apperr.FailedPrecondition}, []string{"power-off in flight"}},
		{"evacuate a voter while another is in maintenance: the quorum projection refuses", evac(map[string]membership.Status{"n2": membership.StatusEvacuated}),
			[]apperr.Code{apperr.FailedPrecondition}, []string{`"n1" cannot be evacuated while n2 is in maintenance`}},
		{"evacuate with nowhere to move the instances", evac(map[string]membership.Status{"n2": membership.StatusOffline, "n3": membership.StatusOffline}),
			[]apperr.Code{apperr.FailedPrecondition}, []string{"holds 1 instance Incus would move, but no other member can take them"}},
		{"evacuate with mode stop: nothing moves, no target needed", with(evac(map[string]membership.Status{"n2": membership.StatusOffline, "n3": membership.StatusOffline}),
			func(r *Request) { r.Mode = "stop" }), nil, nil},
		{"every refusal at once, in order", with(evac(map[string]membership.Status{"n1": membership.StatusEvacuated, "n2": membership.StatusEvacuated, "n3": membership.StatusOffline}),
			func(r *Request) { r.Running, r.RunningFound, r.FenceInFlight = running(Evacuate), true, true }),
			[]apperr.Code{apperr.FailedPrecondition, apperr.FailedPrecondition, apperr.FailedPrecondition, apperr.FailedPrecondition, apperr.FailedPrecondition},
			[]string{"already evacuated", "still running", "power-off in flight", "in maintenance", "no other member can take them"}},

		{"restore an evacuated member", rest(n1(membership.StatusEvacuated)), nil, nil},
		{"restore an unknown member", with(rest(nil), func(r *Request) { r.Member = "n9" }), []apperr.Code{apperr.NotFound}, []string{"not a member"}},
		{"restore a member that is not evacuated", rest(nil), []apperr.Code{apperr.FailedPrecondition}, []string{"is not evacuated (Incus lists it Online)"}},
		{"restore while a restore runs", with(rest(n1(membership.StatusEvacuated)), func(r *Request) { r.Running, r.RunningFound = running(Restore), true }),
			[]apperr.Code{apperr.FailedPrecondition}, []string{"still running"}},
		{"restore with every check passing", with(rest(n1(membership.StatusEvacuated)), func(r *Request) {
			r.Checks = report(admission.Check{Name: "online", Result: admission.Pass})
		}), nil, nil},
		{"restore with a check failing", with(rest(n1(membership.StatusEvacuated)), func(r *Request) {
			r.Checks = report(fail("storage-pools", false), fail("kernel", true))
		}), []apperr.Code{apperr.FailedPrecondition}, []string{"the admission checks failed: storage-pools (no answer); kernel (no answer)"}},
		{"restore with checks that could not be completed: UNAVAILABLE (a caller may wait)", with(rest(n1(membership.StatusEvacuated)), func(r *Request) {
			r.Checks = report(fail("incus-version", true), fail("kernel", true))
		}), []apperr.Code{apperr.Unavailable}, []string{"could not be completed"}},
		{"an action that is neither", Request{Action: "reboot", Member: "n1", Members: voters(nil)}, []apperr.Code{apperr.Internal}, []string{"neither"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(c.r)
			if len(v.Refusals) != len(c.codes) || v.Refused() != (len(c.codes) > 0) {
				t.Fatalf("refusals %v, want %v", v.Refusals, c.codes)
			}
			for i, e := range v.Refusals {
				if apperr.CodeOf(e) != c.codes[i] || !strings.Contains(e.Error(), c.says[i]) {
					t.Errorf("refusal %d: %v, want %s saying %q", i, e, c.codes[i], c.says[i])
				}
			}
			if v.Effect.Member != c.r.Member || v.Effect.Action != c.r.Action || v.Effect.Task != nil || v.Effect.Report != c.r.Checks {
				t.Errorf("effect: %+v", v.Effect)
			}
		})
	}
}

func TestDecideSaysTheEffectAndWarns(t *testing.T) {
	v := Decide(Request{Action: Evacuate, Member: "n1", Members: voters(nil), Instances: instances})
	if len(v.Effect.Instances) != 2 || v.Effect.Instances[0].ID() != "p/db" || v.Effect.Instances[0].Fate != FateStop || v.Effect.Instances[1].Fate != FateMove {
		t.Fatalf("instances: %+v", v.Effect.Instances)
	}
	if len(v.Effect.Targets) != 2 || v.Effect.Targets[0] != (Target{"n3", 0}) || v.Effect.Targets[1] != (Target{"n2", 1}) {
		t.Fatalf("targets: %+v", v.Effect.Targets)
	}
	if v.Effect.Quorum == nil || v.Effect.Quorum.Refused() || v.Effect.Quorum.Leaving[0] != "n1" {
		t.Fatalf("quorum: %+v", v.Effect.Quorum)
	}
	// The projection's warnings (no stand-by, a failure domain emptied), then the stopped
	// instances.
	if len(v.Warnings) != 3 || !strings.Contains(v.Warnings[0], "stand-by") || !strings.Contains(v.Warnings[1], "failure domain n1") ||
		v.Warnings[2] != "1 instance will only be stopped and stay on n1 until it is restored: p/db" {
		t.Fatalf("warnings: %q", v.Warnings)
	}
	// The only voter may be evacuated (it keeps its role), with a warning.
	alone := []membership.Member{{Name: "n1", Status: membership.StatusOnline, Roles: []string{quorum.RoleVoter}}}
	v = Decide(Request{Action: Evacuate, Member: "n1", Members: alone, Mode: "stop"})
	if v.Refused() || len(v.Warnings) == 0 || !strings.HasPrefix(v.Warnings[0], "evacuating n1 keeps its database role, but taking it down afterwards would not") {
		t.Fatalf("the only voter: %v %q", v.Refusals, v.Warnings)
	}
	// A restore brings back what left and starts what stayed; no projection.
	all := append(instances, Instance{Name: "gone", Location: "n2", Origin: "n1"})
	v = Decide(Request{Action: Restore, Member: "n1", Members: voters(map[string]membership.Status{"n1": membership.StatusEvacuated}), Instances: all})
	if len(v.Effect.Instances) != 3 || v.Effect.Instances[0].ID() != "gone" || v.Effect.Instances[0].Fate != FateReturn || v.Effect.Instances[2].Fate != FateStart || v.Effect.Quorum != nil || len(v.Warnings) != 0 {
		t.Fatalf("restore: %+v %q", v.Effect, v.Warnings)
	}
}

func TestStillRuns(t *testing.T) {
	finished := running(Evacuate)
	finished.FinishedAt = t0
	for _, c := range []struct {
		t     *Task
		op    IncusOperation
		found bool
		want  bool
	}{
		{nil, IncusOperation{}, true, false},
		{running(Evacuate), IncusOperation{}, true, true},
		{running(Evacuate), IncusOperation{Progress: "moved web"}, true, true},
		{running(Evacuate), IncusOperation{Done: true}, true, false},
		{running(Evacuate), IncusOperation{Done: true, Failed: true}, true, false},
		{running(Evacuate), IncusOperation{}, false, false},
		{finished, IncusOperation{}, true, false},
	} {
		if got := StillRuns(c.t, c.op, c.found); got != c.want {
			t.Errorf("StillRuns(%+v, %+v, %v) = %v", c.t, c.op, c.found, got)
		}
	}
}

// TestFollowAndOutcomeEndATask: a task is followed from Incus's operation: running (its
// progress recorded), succeeded, failed, or gone (judged by the member's status).
func TestFollowAndOutcomeEndATask(t *testing.T) {
	for _, c := range []struct {
		name     string
		op       IncusOperation
		found    bool
		progress string
		ended    bool
	}{
		{"running", IncusOperation{}, true, "", false},
		{"running with progress", IncusOperation{Progress: "Migrating web"}, true, "Migrating web", false},
		{"done", IncusOperation{Done: true, Progress: "Migrating web"}, true, "Migrating web", true},
		{"failed", IncusOperation{Done: true, Failed: true, Err: "no room"}, true, "", true},
		{"gone", IncusOperation{}, false, "", true},
	} {
		if p, e := Follow(c.op, c.found); p != c.progress || e != c.ended {
			t.Errorf("%s: Follow = %q %v", c.name, p, e)
		}
	}
	ev, re := *running(Evacuate), *running(Restore)
	for _, c := range []struct {
		name   string
		t      Task
		op     IncusOperation
		found  bool
		status membership.Status
		kind   Kind
		says   string
	}{
		{"evacuation succeeded", ev, IncusOperation{Done: true}, true, membership.StatusEvacuated, KindSucceeded, "evacuate of n1 finished"},
		{"evacuation failed", ev, IncusOperation{Done: true, Failed: true, Err: "no room"}, true, membership.StatusOnline, KindFailed, "evacuate of n1 failed: no room (Incus lists the member Online)"},
		{"failed, Incus not read", ev, IncusOperation{Done: true, Failed: true, Err: "x"}, true, membership.StatusUnknown, KindFailed, "lists the member Unknown"},
		{"evacuation gone, member Evacuated", ev, IncusOperation{}, false, membership.StatusEvacuated, KindSucceeded, "finished while Apelora was not looking (Incus no longer lists operation op-9)"},
		{"evacuation gone, member Online", ev, IncusOperation{}, false, membership.StatusOnline, KindUnknown, "the member is Online, not Evacuated: the evacuate may have failed"},
		{"restore gone, member Online", re, IncusOperation{}, false, membership.StatusOnline, KindSucceeded, "not looking"},
		{"restore gone, member Evacuated", re, IncusOperation{}, false, membership.StatusEvacuated, KindUnknown, "not Online"},
		{"restore gone, Incus not read", re, IncusOperation{}, false, membership.StatusUnknown, KindUnknown, "the member is Unknown"},
		{"restore succeeded", re, IncusOperation{Done: true}, true, membership.StatusOnline, KindSucceeded, "restore of n1 finished"},
	} {
		if k, msg := Outcome(c.t, c.op, c.found, c.status); k != c.kind || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q", c.name, k, msg)
		}
	}
	if StatusOf(voters(nil), "n2") != membership.StatusOnline || StatusOf(voters(nil), "n9") != membership.StatusUnknown {
		t.Error("StatusOf")
	}
}

// TestHappenedJudgesAStepFromTheMembersStatus: what the change reconciler records of an
// evacuateMember or restoreMember whose process stopped before its outcome.
func TestHappenedJudgesAStepFromTheMembersStatus(t *testing.T) {
	m := func(s membership.Status) *membership.Member { return &membership.Member{Name: "n1", Status: s} }
	for _, c := range []struct {
		action string
		m      *membership.Member
		want   audit.Outcome
		says   string
	}{
		{Evacuate, m(membership.StatusEvacuated), audit.Succeeded, "Incus lists n1 Evacuated: the evacuate happened"},
		{Evacuate, m(membership.StatusOnline), audit.Failed, "did not happen"},
		{Evacuate, m(membership.StatusOffline), audit.Failed, "did not happen"},
		{Restore, m(membership.StatusOnline), audit.Succeeded, "the restore happened"},
		{Restore, m(membership.StatusEvacuated), audit.Failed, "did not happen"},
		{Restore, m(membership.StatusOffline), audit.Failed, "did not happen"},
		{Evacuate, nil, audit.Failed, "n1 is no member"},
		{Restore, nil, audit.Failed, "n1 is no member"},
	} {
		if v := Happened(c.action, "n1", c.m); v.Outcome != c.want || !strings.Contains(v.Found, c.says) {
			t.Errorf("%s of %+v: %+v", c.action, c.m, v)
		}
	}
}
