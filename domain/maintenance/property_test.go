package maintenance

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// randomRequest is a request in a random cluster: members of every status, role,
// admission mark and scheduler, instances of several projects and evacuate settings spread
// over them (some moved by an earlier evacuation), a running task Incus may or may not
// still run, a fence in flight, a restore's checks.
func randomRequest(r *rand.Rand) Request {
	statuses := []membership.Status{membership.StatusOnline, membership.StatusOnline, membership.StatusEvacuated, membership.StatusOffline}
	n := 1 + r.IntN(6)
	var members []membership.Member
	for i := range n {
		m := membership.Member{Name: fmt.Sprintf("n%d", i+1), Status: statuses[r.IntN(len(statuses))], FailureDomain: fmt.Sprintf("fd%d", r.IntN(3)),
			Groups: []string{"default"}, Config: map[string]string{}}
		switch r.IntN(3) {
		case 0:
			m.Roles = []string{quorum.RoleVoter}
		case 1:
			m.Roles = []string{quorum.RoleStandby}
		}
		if r.Float64() < 0.8 {
			m.Config[lifecycle.AdmissionKey] = "admission 1"
		}
		if r.Float64() < 0.15 {
			m.Config["scheduler.instance"] = "manual"
		}
		members = append(members, m)
	}
	name := fmt.Sprintf("n%d", 1+r.IntN(n))
	if r.Float64() < 0.1 {
		name = "n9" // no member
	}
	req := Request{Action: []string{Evacuate, Restore}[r.IntN(2)], Member: name, Members: members,
		Mode: Modes[r.IntN(len(Modes))], FenceInFlight: r.Float64() < 0.2}
	for i := range r.IntN(12) {
		in := Instance{Name: fmt.Sprintf("c%d", i), Project: []string{"", "default", "p"}[r.IntN(3)], Type: "container", Status: "Running",
			Location: fmt.Sprintf("n%d", 1+r.IntN(n)), Evacuate: []string{"", "auto", "stop", "migrate", "live-migrate"}[r.IntN(5)]}
		if r.Float64() < 0.3 {
			in.Origin = fmt.Sprintf("n%d", 1+r.IntN(n))
		}
		req.Instances = append(req.Instances, in)
	}
	if r.Float64() < 0.3 {
		req.Running = &Task{ID: 1, Machine: req.Member, Action: Evacuate, IncusOperation: "op-1"}
		req.RunningFound = r.Float64() < 0.7
		req.RunningOp = IncusOperation{Done: r.Float64() < 0.3}
	}
	if req.Action == Restore && r.Float64() < 0.6 {
		rep := &admission.Report{Machine: req.Member}
		for _, name := range admission.CheckNames[:1+r.IntN(len(admission.CheckNames))] {
			c := admission.Check{Name: name, Result: []admission.Result{admission.Pass, admission.Warn, admission.Fail}[r.IntN(3)]}
			c.Inconclusive = c.Result == admission.Fail && r.Float64() < 0.6
			rep.Checks = append(rep.Checks, c)
		}
		req.Checks = rep
	}
	return req
}

func clone(r Request) Request {
	c := r
	c.Members = nil
	for _, m := range r.Members {
		m.Roles, m.Groups = slices.Clone(m.Roles), slices.Clone(m.Groups)
		cfg := map[string]string{}
		for k, v := range m.Config {
			cfg[k] = v
		}
		m.Config = cfg
		c.Members = append(c.Members, m)
	}
	c.Instances = slices.Clone(r.Instances)
	return c
}

func messages(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = string(apperr.CodeOf(e)) + " " + e.Error()
	}
	return out
}

// TestPropertyDecide checks the maintenance rules on random requests: Decide is pure (the
// same verdict twice, its request untouched), each refusal is there exactly when its
// condition holds, in the documented order, and the effect lists every affected instance
// once with its fate and only targets an instance may land on.
func TestPropertyDecide(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	counts := map[string]int{}
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 0x3a1e))
		req := randomRequest(r)
		before := clone(req)
		v := Decide(req)
		again := Decide(req)
		if !reflect.DeepEqual(req, before) {
			t.Fatalf("seed %d: Decide changed its request", seed)
		}
		if !reflect.DeepEqual(messages(v.Refusals), messages(again.Refusals)) || !reflect.DeepEqual(v.Effect, again.Effect) || !reflect.DeepEqual(v.Warnings, again.Warnings) {
			t.Fatalf("seed %d: two verdicts on one request", seed)
		}
		got := messages(v.Refusals)
		want := expectedRefusals(req)
		if len(got) != len(want) {
			t.Fatalf("seed %d: refusals %q, want %q\n%+v", seed, got, want, req)
		}
		for i := range want {
			code, kind, _ := strings.Cut(want[i], " ")
			if apperr.CodeOf(v.Refusals[i]) != apperr.Code(code) || !strings.Contains(v.Refusals[i].Error(), refusalWords[kind]) {
				t.Fatalf("seed %d: refusal %d is %q, want %q", seed, i, got[i], want[i])
			}
			counts[want[i]]++
		}
		if len(want) == 0 {
			counts[req.Action+" goes ahead"]++
		}
		if m := find(req.Members, req.Member); m != nil {
			checkEffect(t, seed, req, v)
		}
	}
	t.Logf("over %d requests: %v", n, counts)
	for _, k := range []string{"evacuate goes ahead", "restore goes ahead", "NOT_FOUND", "FAILED_PRECONDITION already evacuated", "FAILED_PRECONDITION offline",
		"FAILED_PRECONDITION busy", "FAILED_PRECONDITION fence", "FAILED_PRECONDITION quorum", "FAILED_PRECONDITION no target",
		"FAILED_PRECONDITION not evacuated", "FAILED_PRECONDITION checks", "UNAVAILABLE checks"} {
		if counts[k] == 0 {
			t.Errorf("no request reached %q", k)
		}
	}
}

// expectedRefusals restates the rules independently, as kinds ("CODE kind"); the
// verdict's refusals are matched to them by their code and their words (refusalWords).
func expectedRefusals(r Request) []string {
	m := find(r.Members, r.Member)
	if m == nil {
		return []string{"NOT_FOUND"}
	}
	var out []string
	busy := r.Running != nil && r.RunningFound && !r.RunningOp.Done
	if r.Action == Evacuate {
		switch m.Status {
		case membership.StatusEvacuated:
			out = append(out, "FAILED_PRECONDITION already evacuated")
		case membership.StatusOffline:
			out = append(out, "FAILED_PRECONDITION offline")
		}
		if busy {
			out = append(out, "FAILED_PRECONDITION busy")
		}
		if r.FenceInFlight {
			out = append(out, "FAILED_PRECONDITION fence")
		}
		leaving := []string{r.Member}
		for _, o := range r.Members {
			if o.Name != r.Member && o.Status == membership.StatusEvacuated {
				leaving = append(leaving, o.Name)
			}
		}
		if quorum.Project(quorum.FromMembership(r.Members), leaving...).Refused() && len(leaving) > 1 {
			out = append(out, "FAILED_PRECONDITION quorum")
		}
		moving, targets := 0, 0
		for _, in := range r.Instances {
			if in.Location == r.Member && FateOf(in, r.Mode) != FateStop {
				moving++
			}
		}
		for _, o := range r.Members {
			if _, marked := o.Config[lifecycle.AdmissionKey]; o.Name != r.Member && o.Status == membership.StatusOnline && marked && o.Config["scheduler.instance"] != "manual" {
				targets++
			}
		}
		if moving > 0 && targets == 0 {
			out = append(out, "FAILED_PRECONDITION no target")
		}
		return out
	}
	if m.Status != membership.StatusEvacuated {
		out = append(out, "FAILED_PRECONDITION not evacuated")
	}
	if busy {
		out = append(out, "FAILED_PRECONDITION busy")
	}
	if r.Checks != nil {
		failed, inconclusive := 0, true
		for _, c := range r.Checks.Checks {
			if c.Result == admission.Fail {
				failed++
				inconclusive = inconclusive && c.Inconclusive
			}
		}
		switch {
		case failed > 0 && inconclusive:
			out = append(out, "UNAVAILABLE checks")
		case failed > 0:
			out = append(out, "FAILED_PRECONDITION checks")
		}
	}
	return out
}

// The words each kind of refusal says.
var refusalWords = map[string]string{
	"": "is not a member", "already evacuated": "is already evacuated", "offline": "is offline", "busy": "is still running",
	"fence": "power-off in flight", "quorum": "cannot be evacuated while", "no target": "no other member can take them",
	"not evacuated": "is not evacuated", "checks": "the admission checks",
}

func checkEffect(t *testing.T, seed uint64, r Request, v Verdict) {
	t.Helper()
	e := v.Effect
	if e.Task != nil || e.Member != r.Member || e.Action != r.Action || e.Report != r.Checks {
		t.Fatalf("seed %d: effect %+v", seed, e)
	}
	var want []string
	for _, in := range r.Instances {
		switch {
		case r.Action == Evacuate && in.Location == r.Member:
			want = append(want, in.ID()+" "+string(FateOf(in, r.Mode)))
		case r.Action == Restore && in.Location == r.Member:
			want = append(want, in.ID()+" "+string(FateStart))
		case r.Action == Restore && in.Origin == r.Member:
			want = append(want, in.ID()+" "+string(FateReturn))
		}
	}
	var got []string
	for _, in := range e.Instances {
		got = append(got, in.ID()+" "+string(in.Fate))
	}
	if !sort.StringsAreSorted(ids2(e.Instances)) {
		t.Fatalf("seed %d: instances not in order: %v", seed, got)
	}
	sort.Strings(want)
	sorted := slices.Clone(got)
	sort.Strings(sorted)
	if !slices.Equal(sorted, want) {
		t.Fatalf("seed %d: instances %v, want %v", seed, got, want)
	}
	if r.Action == Restore {
		if len(e.Targets) != 0 || e.Quorum != nil {
			t.Fatalf("seed %d: a restore with targets or a projection: %+v", seed, e)
		}
		return
	}
	if e.Quorum == nil || e.Quorum.Leaving[0] != r.Member {
		t.Fatalf("seed %d: no projection of the member: %+v", seed, e.Quorum)
	}
	on := map[string]int{}
	for _, in := range r.Instances {
		on[in.Location]++
	}
	for i, tg := range e.Targets {
		m := find(r.Members, tg.Member)
		if _, marked := m.Config[lifecycle.AdmissionKey]; m == nil || m.Name == r.Member || m.Status != membership.StatusOnline || !marked || m.Held() || tg.Instances != on[tg.Member] {
			t.Fatalf("seed %d: target %+v", seed, tg)
		}
		if i > 0 {
			p := e.Targets[i-1]
			if p.Instances > tg.Instances || p.Instances == tg.Instances && p.Member > tg.Member {
				t.Fatalf("seed %d: targets out of order: %+v", seed, e.Targets)
			}
		}
	}
}

func ids2(as []Affected) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID()
	}
	return out
}

// TestPropertyOutcome: a task ends SUCCEEDED only when Incus says it did or, once Incus
// forgot its operation, when the member's status is what the action leads to; FAILED only
// when Incus says so; UNKNOWN only for a forgotten operation.
func TestPropertyOutcome(t *testing.T) {
	statuses := []membership.Status{membership.StatusOnline, membership.StatusEvacuated, membership.StatusOffline, membership.StatusUnknown}
	for _, action := range []string{Evacuate, Restore} {
		for _, found := range []bool{true, false} {
			for _, done := range []bool{true, false} {
				for _, failed := range []bool{true, false} {
					for _, st := range statuses {
						op := IncusOperation{Done: done, Failed: failed, Err: "e"}
						_, ended := Follow(op, found)
						if ended != (!found || done) {
							t.Fatalf("Follow(%+v, %v) ended %v", op, found, ended)
						}
						if !ended {
							continue
						}
						k, msg := Outcome(Task{Machine: "n1", Action: action, IncusOperation: "op"}, op, found, st)
						want := map[string]membership.Status{Evacuate: membership.StatusEvacuated, Restore: membership.StatusOnline}[action]
						switch {
						case found && failed && k != KindFailed,
							found && !failed && k != KindSucceeded,
							!found && st == want && k != KindSucceeded,
							!found && st != want && k != KindUnknown:
							t.Errorf("%s found %v done %v failed %v member %s: %s %q", action, found, done, failed, st, k, msg)
						}
						if msg == "" {
							t.Errorf("an outcome without words")
						}
					}
				}
			}
		}
	}
}
