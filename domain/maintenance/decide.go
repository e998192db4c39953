package maintenance

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// The maintenance rules, pure: each function here reads only its arguments (decide_test.go
// takes every case, property_test.go random clusters).

// Request is what a request to evacuate or restore a member is decided on: the facts read
// at one moment.
type Request struct {
	Action string // Evacuate or Restore
	Member string
	Mode   string // an evacuation's mode ("" for none)
	// Members are Incus's members as listed now.
	Members []membership.Member
	// Running is the member's task not seen to end (nil for none), RunningOp Incus's
	// operation of it as read now, and RunningFound false once Incus no longer lists it.
	Running      *Task
	RunningOp    IncusOperation
	RunningFound bool
	// FenceInFlight: the fence worker asked MAAS to power the member off and has not
	// confirmed it (an evacuation only).
	FenceInFlight bool
	// Instances are every instance of every project.
	Instances []Instance
	// Checks are the admission checks a restore ran; nil until they ran.
	Checks *admission.Report
}

// Verdict is what a request may do.
type Verdict struct {
	// Effect is what it does: the member's instances with their fates, the targets, the
	// quorum projection (an evacuation), the checks (a restore). Its Task is nil.
	Effect Effect
	// Refusals are what refuses it, in order: a real call answers the first, a plan
	// lists them all.
	Refusals []error
	// Warnings are what the administrator should know before approving it (a plan's).
	Warnings []string
}

// Refused reports whether anything refuses the request.
func (v Verdict) Refused() bool { return len(v.Refusals) > 0 }

// Decide applies the maintenance rules to a request. It is pure: the same request always
// gives the same verdict.
func Decide(r Request) Verdict {
	v := Verdict{Effect: Effect{Member: r.Member, Action: r.Action, Mode: r.Mode, Report: r.Checks}}
	m := find(r.Members, r.Member)
	if m == nil {
		v.Refusals = []error{notMember(r.Member)}
		return v
	}
	switch r.Action {
	case Evacuate:
		decideEvacuate(r, m, &v)
	case Restore:
		decideRestore(r, m, &v)
	default:
		v.Refusals = []error{apperr.New(apperr.Internal, "%s is neither an evacuation nor a restore", apperr.Quote(r.Action))}
	}
	return v
}

func decideEvacuate(r Request, m *membership.Member, v *Verdict) {
	name := apperr.Quote(r.Member)
	switch {
	case m.Evacuated():
		v.refuse(apperr.New(apperr.FailedPrecondition, "%s is already evacuated: restore it (restoreMember) when its maintenance is done", name))
	case m.Status == membership.StatusOffline:
		v.refuse(apperr.New(apperr.FailedPrecondition, "%s is offline: Incus cannot move instances off a member that does not answer; bring it back first", name))
	}
	v.refuse(r.busy())
	if r.FenceInFlight {
		v.refuse(apperr.New(apperr.FailedPrecondition, "%s has a power-off in flight (the fencing worker asked MAAS and has not confirmed it): it cannot be evacuated; see fenceEvents and wait for the outcome", name))
	}
	proj, others := projection(r.Members, r.Member)
	v.Effect.Quorum = &proj
	if proj.Refused() {
		// Evacuating keeps the member's database role; taking it down afterwards is what
		// costs the majority. With other members already in maintenance that is the intent
		// (they are down or about to be): refused. Alone, it is a warning.
		if len(others) > 0 {
			v.refuse(apperr.New(apperr.FailedPrecondition, "%s cannot be evacuated while %s %s in maintenance: %s. Restore %s first",
				name, strings.Join(others, ", "), plural(len(others), "is", "are"), proj.Refusals[0], plural(len(others), "it", "them")))
		} else {
			v.Warnings = append(v.Warnings, fmt.Sprintf("evacuating %s keeps its database role, but taking it down afterwards would not: %s", r.Member, proj.Refusals[0]))
		}
	}
	v.Effect.Instances, v.Effect.Targets = placement(r.Instances, r.Members, r.Member, r.Mode)
	stopped := v.Effect.Stopped()
	if moving := len(v.Effect.Instances) - len(stopped); moving > 0 && len(v.Effect.Targets) == 0 {
		v.refuse(apperr.New(apperr.FailedPrecondition, "%s holds %d %s Incus would move, but no other member can take them (online, not evacuated, admitted and not held): admit a member first, or evacuate with mode stop",
			name, moving, plural(moving, "instance", "instances")))
	}
	v.Warnings = append(v.Warnings, proj.Warnings...)
	if len(stopped) > 0 {
		v.Warnings = append(v.Warnings, fmt.Sprintf("%d %s will only be stopped and stay on %s until it is restored: %s", len(stopped), plural(len(stopped), "instance", "instances"), r.Member, ids(stopped)))
	}
}

func decideRestore(r Request, m *membership.Member, v *Verdict) {
	name := apperr.Quote(r.Member)
	if !m.Evacuated() {
		v.refuse(apperr.New(apperr.FailedPrecondition, "%s is not evacuated (Incus lists it %s): there is nothing to restore", name, m.Status))
	}
	v.refuse(r.busy())
	if r.Checks != nil {
		if failed := r.Checks.Failed(); len(failed) > 0 {
			names := make([]string, len(failed))
			inconclusive := true
			for i, f := range failed {
				names[i] = f.Name + " (" + f.Message + ")"
				inconclusive = inconclusive && f.Inconclusive
			}
			// Checks that failed only because a read did not answer (a member still
			// starting) are Incus unavailable, not a fact against the member: a caller that
			// waits (the rolling driver) may try again.
			code, what := apperr.FailedPrecondition, "failed"
			if inconclusive {
				code, what = apperr.Unavailable, "could not be completed"
			}
			v.refuse(apperr.New(code, "%s stays evacuated: the admission checks %s: %s. Fix them and restore again", name, what, strings.Join(names, "; ")))
		}
	}
	v.Effect.Instances = returning(r.Instances, r.Member)
}

func (v *Verdict) refuse(err error) {
	if err != nil {
		v.Refusals = append(v.Refusals, err)
	}
}

// busy refuses while a task Apelora started on the member still runs: whether it runs is
// Incus's operation's to say (StillRuns), not the row's.
func (r Request) busy() error {
	if !StillRuns(r.Running, r.RunningOp, r.RunningFound) {
		return nil
	}
	return apperr.New(apperr.FailedPrecondition, "%s: an %s started at %s is still running (Incus operation %s): wait for it (memberOperation shows its progress)",
		apperr.Quote(r.Member), r.Running.Action, r.Running.StartedAt.UTC().Format(time.RFC3339), r.Running.IncusOperation)
}

// StillRuns reports whether a task not seen to end still runs: Incus lists its operation,
// not done. The row stays unfinished until the follower records the end, which may come
// after Incus finished it.
func StillRuns(t *Task, op IncusOperation, found bool) bool {
	return t != nil && t.Running() && found && !op.Done
}

// Follow is what one look at a task's Incus operation says: a progress line to record
// ("" for none), and whether the operation ended (done, or no longer listed).
func Follow(op IncusOperation, found bool) (progress string, ended bool) {
	if found {
		progress = op.Progress
	}
	return progress, !found || op.Done
}

// Outcome is the end of a task whose Incus operation ended or is gone, from the
// operation and the member's status now (membership.StatusUnknown when Incus did not
// list it): SUCCEEDED, FAILED (Incus says so), or, for an operation Incus no longer lists,
// SUCCEEDED when the member's status is what the action leads to and UNKNOWN otherwise.
func Outcome(t Task, op IncusOperation, found bool, status membership.Status) (Kind, string) {
	switch {
	case found && op.Failed:
		return KindFailed, fmt.Sprintf("%s of %s failed: %s (Incus lists the member %s)", t.Action, t.Machine, op.Err, status)
	case !found:
		// Incus keeps a finished operation a few seconds only: one that ended while no
		// server looked (a restart) is judged by the member's status.
		want := map[string]membership.Status{Evacuate: membership.StatusEvacuated, Restore: membership.StatusOnline}[t.Action]
		if status == want {
			return KindSucceeded, fmt.Sprintf("%s of %s finished while Apelora was not looking (Incus no longer lists operation %s); the member is %s", t.Action, t.Machine, t.IncusOperation, status)
		}
		return KindUnknown, fmt.Sprintf("Incus no longer lists operation %s and the member is %s, not %s: the %s may have failed; look at the member and run it again", t.IncusOperation, status, want, t.Action)
	}
	return KindSucceeded, fmt.Sprintf("%s of %s finished", t.Action, t.Machine)
}

// StatusOf is the member's status in the list, membership.StatusUnknown when it is not
// there.
func StatusOf(members []membership.Member, name string) membership.Status {
	if m := find(members, name); m != nil {
		return m.Status
	}
	return membership.StatusUnknown
}

// Outcomes says where each of the task's instances is now.
func Outcomes(t Task, all []Instance) []string {
	now := map[string]Instance{}
	for _, in := range all {
		now[in.ID()] = in
	}
	var out []string
	for _, p := range t.Instances {
		in, ok := now[p.ID()]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no longer exists", p.ID()))
		case t.Action == Evacuate && in.Location != t.Machine:
			out = append(out, fmt.Sprintf("%s: moved to %s (%s)", p.ID(), in.Location, strings.ToLower(in.Status)))
		case t.Action == Evacuate:
			out = append(out, fmt.Sprintf("%s: stopped, stays on %s until it is restored (%s)", p.ID(), t.Machine, strings.ToLower(in.Status)))
		case in.Location == t.Machine:
			out = append(out, fmt.Sprintf("%s: back on %s (%s)", p.ID(), t.Machine, strings.ToLower(in.Status)))
		default:
			out = append(out, fmt.Sprintf("%s: still on %s (%s)", p.ID(), in.Location, strings.ToLower(in.Status)))
		}
	}
	return out
}

// Happened is the rule for an evacuateMember or restoreMember whose outcome its process
// did not record (package changes), from the member as Incus lists it now (nil: not
// listed): Incus lists a member Evacuated from the start of its evacuation, and up and not
// Evacuated once restored.
func Happened(action, name string, m *membership.Member) changes.Verdict {
	if m == nil {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s is no member of this Incus cluster", name)}
	}
	done := m.Evacuated()
	if action == Restore {
		done = !m.Evacuated() && m.Status != membership.StatusOffline
	}
	if !done {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("Incus lists %s %s: the %s did not happen", name, m.Status, action)}
	}
	return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus lists %s %s: the %s happened", name, m.Status, action)}
}

// FateOf is the rule for what Incus does to an instance: the evacuation's mode when one
// is given, else the instance's cluster.evacuate.
func FateOf(in Instance, mode string) Fate {
	v := mode
	if v == "" {
		v = in.Evacuate
	}
	switch v {
	case "stop":
		return FateStop
	case "migrate":
		return FateMigrate
	case "live-migrate":
		return FateLiveMigrate
	}
	return FateMove
}

// placement is the rule for an evacuation's instances (those on the member, with their
// fate) and targets (members an instance may land on). The targets are those the
// placement guard lets untargeted placement reach: admitted (marked), not held, online.
func placement(all []Instance, members []membership.Member, name, mode string) ([]Affected, []Target) {
	counts := map[string]int{}
	var on []Affected
	for _, in := range all {
		counts[in.Location]++
		if in.Location == name {
			on = append(on, Affected{Instance: in, Fate: FateOf(in, mode)})
		}
	}
	sort.Slice(on, func(i, j int) bool { return on[i].ID() < on[j].ID() })
	var targets []Target
	for i := range members {
		m := &members[i]
		if m.Name == name || !m.Online() || m.Held() {
			continue
		}
		if _, marked := m.Config[lifecycle.AdmissionKey]; !marked {
			continue
		}
		targets = append(targets, Target{Member: m.Name, Instances: counts[m.Name]})
	}
	sort.Slice(targets, func(i, j int) bool {
		if targets[i].Instances != targets[j].Instances {
			return targets[i].Instances < targets[j].Instances
		}
		return targets[i].Member < targets[j].Member
	})
	return on, targets
}

// projection applies the quorum rule to the evacuation. An evacuated member keeps its
// database role and its daemon, so evacuating alone costs the database nothing; but a
// member is evacuated to be taken down (rebooted, repaired), so the effect projects taking
// it away together with every member already in maintenance: two voters of three in
// maintenance at once would leave the database without a majority when both reboot, so
// that is refused; the member alone is only warned about.
// It returns the projection and the other members in maintenance.
func projection(members []membership.Member, name string) (quorum.Projection, []string) {
	var others []string
	for _, m := range members {
		if m.Name != name && m.Evacuated() {
			others = append(others, m.Name)
		}
	}
	return quorum.Project(quorum.FromMembership(members), append([]string{name}, others...)...), others
}

// returning is the rule for a restore's instances: those on the member start again, and
// those an evacuation moved from it come back.
func returning(all []Instance, name string) []Affected {
	var out []Affected
	for _, in := range all {
		switch {
		case in.Location == name:
			out = append(out, Affected{Instance: in, Fate: FateStart})
		case in.Origin == name:
			out = append(out, Affected{Instance: in, Fate: FateReturn})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

func validMode(mode string) bool {
	for _, m := range Modes {
		if m == mode {
			return true
		}
	}
	return false
}

func notMember(name string) error {
	return apperr.New(apperr.NotFound, "%s is not a member of this Incus cluster: check the name (the fleet lists the members)", apperr.Quote(name))
}

func find(members []membership.Member, name string) *membership.Member {
	for i := range members {
		if members[i].Name == name {
			return &members[i]
		}
	}
	return nil
}

func ids(ps []Affected) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID()
	}
	return strings.Join(out, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
