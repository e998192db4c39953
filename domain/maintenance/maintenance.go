// Package maintenance takes a member out for maintenance and brings it back: evacuate and
// restore through Incus's own member state (POST /1.0/cluster/members/{name}/state);
// Incus moves or stops the instances, Apelora never moves one itself. The plan says what
// Incus will do to each instance and where capacity remains; the Incus operation that
// carries it out is recorded in the change's transaction, and a Follower turns its
// progress into events every replica pushes (memberOperation), across API restarts.
//
// EVACUATED is not stored: it is Incus's member status (package lifecycle). Fencing never
// powers off an evacuated member (package fencing), drift suspends its checks of one.
package maintenance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// Actions, as Incus names them.
const (
	Evacuate = "evacuate"
	Restore  = "restore"
)

// Modes an evacuation may force on every instance; "" lets each instance's
// cluster.evacuate decide.
var Modes = []string{"", "auto", "migrate", "live-migrate", "stop"}

// Instance is an instance as Incus lists it, with its effective cluster.evacuate.
type Instance struct {
	Project, Name, Type, Status, Location string
	// Evacuate is the instance's cluster.evacuate ("" when unset, which Incus reads as auto).
	Evacuate string
	// Origin is the member an evacuation moved it from (volatile.evacuate.origin), which
	// a restore of that member moves it back to; "" for none.
	Origin string
}

// ID is how an administrator names it: the name, "project/name" outside the default project.
func (i Instance) ID() string {
	if i.Project == "" || i.Project == "default" {
		return i.Name
	}
	return i.Project + "/" + i.Name
}

// Fate is what an evacuation does to one instance.
type Fate string

const (
	// FateMove: Incus moves it to another member (auto: migrate, or live-migrate a
	// running virtual machine that allows it).
	FateMove Fate = "MOVE"
	// FateMigrate: stopped, moved, started again if it ran.
	FateMigrate Fate = "MIGRATE"
	// FateLiveMigrate: moved while running.
	FateLiveMigrate Fate = "LIVE_MIGRATE"
	// FateStop: only stopped; it stays on the member, and restore starts it again.
	FateStop Fate = "STOP"
	// FateReturn (restore): moved back to the member it was evacuated from.
	FateReturn Fate = "RETURN"
	// FateStart (restore): on the member; started again if it ran before.
	FateStart Fate = "START"
)

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

// Planned is an instance with its fate.
type Planned struct {
	Instance
	Fate Fate
}

// Target is a member an evacuated instance may land on: online, not evacuated, admitted
// (it carries the admission mark) and not held, with the instances it has now.
type Target struct {
	Member    string
	Instances int
}

// Plan is what an evacuation or a restore does.
type Plan struct {
	Member string
	Action string
	Mode   string
	// Instances are every instance on the member (every project), with what happens to it.
	Instances []Planned
	// Targets are where moved instances may go, fewest instances first (Incus's own
	// choice among them: the member with the fewest instances wins).
	Targets []Target
	Quorum  *quorum.Projection
	// Report is the admission checks a restore ran first.
	Report *admission.Report
	// Operation is the recorded operation (nil in a dry run).
	Operation *Operation
}

// Stopped are the instances that will only be stopped.
func (p *Plan) Stopped() []Planned {
	var out []Planned
	for _, in := range p.Instances {
		if in.Fate == FateStop {
			out = append(out, in)
		}
	}
	return out
}

// Operation is an evacuation or restore Apelora asked Incus for.
type Operation struct {
	ID             int64
	Machine        string
	Action         string
	Mode           string
	IncusOperation string
	StartedBy      string
	RequestID      string
	StartedAt      time.Time
	// Instances are the plan's instances as the operation began, to report each one's
	// outcome at the end.
	Instances []Planned
	// FinishedAt is zero while it runs; Outcome is then SUCCEEDED, FAILED or UNKNOWN.
	FinishedAt time.Time
	Outcome    Kind
	Message    string
}

// Running reports whether Incus's operation has not been seen to end.
func (o *Operation) Running() bool { return o.FinishedAt.IsZero() }

// Kind is what an operation event says.
type Kind string

const (
	KindStarted   Kind = "STARTED"
	KindProgress  Kind = "PROGRESS"
	KindSucceeded Kind = "SUCCEEDED"
	KindFailed    Kind = "FAILED"
	// KindUnknown: Incus forgot the operation (it keeps finished ones a few seconds)
	// before anyone saw it end; the message says what the member's status tells.
	KindUnknown Kind = "UNKNOWN"
)

// Event is one step of an operation, as memberOperation pushes it.
type Event struct {
	ID        int64
	Operation int64
	Machine   string
	Action    string
	At        time.Time
	Kind      Kind
	Message   string
}

// Incus is what maintenance asks Incus.
type Incus interface {
	Members(ctx context.Context) ([]membership.Member, error)
	// AllInstances lists every instance of every project in a constant number of calls.
	AllInstances(ctx context.Context) ([]Instance, error)
	// ChangeMemberState posts the action and returns Incus's operation id ("" in a dry run).
	ChangeMemberState(ctx context.Context, name, action, mode string) (string, error)
	// MemberOperation reads Incus's operation; found is false once Incus forgot it.
	MemberOperation(ctx context.Context, id string) (op IncusOperation, found bool, err error)
}

// IncusOperation is Incus's operation as the follower reads it.
type IncusOperation struct {
	Done     bool
	Failed   bool
	Err      string
	Progress string
}

// Checker runs the admission checks (admission.Checker).
type Checker interface {
	Run(ctx context.Context, machine string, rec *machines.Record, trigger admission.Trigger) (*admission.Report, error)
}

// Store is what maintenance needs from the database.
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	Record(ctx context.Context, name string) (*machines.Record, error)
	// FenceInFlight reports whether the member has a power-off requested and not yet
	// confirmed or given up.
	FenceInFlight(ctx context.Context, member string) (bool, error)
	// RunningOperation is the machine's operation still running, nil for none.
	RunningOperation(ctx context.Context, machine string) (*Operation, error)
	// StartOperation records op and its STARTED event in the change in progress, and
	// returns the operation as recorded (its id, start time and message filled in).
	StartOperation(ctx context.Context, op Operation) (*Operation, error)
	// RecordFinished records op, which Incus carried out but whose start was never
	// recorded (the process that asked stopped), as finished with outcome, with its events,
	// in the change in progress.
	RecordFinished(ctx context.Context, op Operation, outcome Kind, message string) (int64, error)
	// Operations lists the machine's operations, newest first.
	Operations(ctx context.Context, machine string, limit int) ([]Operation, error)
	// EventsAfter lists events (of machine, or all for "") after the id, in id order.
	EventsAfter(ctx context.Context, machine string, after int64, limit int) ([]Event, error)
}

// Service evacuates and restores members.
type Service struct {
	Incus   Incus
	Store   Store
	Checker Checker
	// Feed carries the operation events, keyed by machine (memberOperation).
	Feed *broadcast.Hub[string, Event]
	// Wake tells the follower a new operation began; nil is fine (it polls anyway).
	Wake func()
}

// Evacuate asks Incus to evacuate the member: every instance is moved or stopped as its
// cluster.evacuate (or mode) says.
func (s *Service) Evacuate(ctx context.Context, name, mode string) (*Plan, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	if !validMode(mode) {
		return nil, apperr.Invalid("mode", "%s is not an evacuation mode: use one of auto, migrate, live-migrate, stop (or none: each instance's cluster.evacuate decides)", apperr.Quote(mode))
	}
	if s.Incus == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	p := &Plan{Member: name, Action: Evacuate, Mode: mode}
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		members, m, err := s.member(ctx, name)
		if err != nil {
			return err
		}
		rec := plan.From(ctx)
		r := &refusals{rec: rec}
		refuse := r.refuse
		if m.Evacuated() {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "%s is already evacuated: restore it (restoreMember) when its maintenance is done", apperr.Quote(name))); err != nil {
				return err
			}
		} else if m.Status == "Offline" {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "%s is offline: Incus cannot move instances off a member that does not answer; bring it back first", apperr.Quote(name))); err != nil {
				return err
			}
		}
		if err := s.notBusy(ctx, name, refuse); err != nil {
			return err
		}
		fenced, err := s.Store.FenceInFlight(ctx, name)
		if err != nil {
			return err
		}
		if fenced {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "%s has a power-off in flight (the fencing worker asked MAAS and has not confirmed it): it cannot be evacuated; see fenceEvents and wait for the outcome", apperr.Quote(name))); err != nil {
				return err
			}
		}
		proj, others := projection(members, name)
		p.Quorum = &proj
		if proj.Refused() {
			// Evacuating keeps the member's database role; taking it down afterwards is
			// what costs the majority. With other members already in maintenance that is
			// the plan (they are down or about to be): refused. Alone, it is a warning.
			if len(others) > 0 {
				if err := refuse(apperr.New(apperr.FailedPrecondition, "%s cannot be evacuated while %s %s in maintenance: %s. Restore %s first",
					apperr.Quote(name), strings.Join(others, ", "), plural(len(others), "is", "are"), proj.Refusals[0], plural(len(others), "it", "them"))); err != nil {
					return err
				}
			} else if rec != nil {
				rec.Warn("", "evacuating %s keeps its database role, but taking it down afterwards would not: %s", name, proj.Refusals[0])
			}
		}
		all, err := s.Incus.AllInstances(ctx)
		if err != nil {
			return err
		}
		p.Instances, p.Targets = placement(all, members, name, mode)
		moving := len(p.Instances) - len(p.Stopped())
		if moving > 0 && len(p.Targets) == 0 {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "%s holds %d %s Incus would move, but no other member can take them (online, not evacuated, admitted and not held): admit a member first, or evacuate with mode stop",
				apperr.Quote(name), moving, plural(moving, "instance", "instances"))); err != nil {
				return err
			}
		}
		s.detail(ctx, p, m)
		if err := s.facts(ctx, p); err != nil {
			return err
		}
		if rec != nil {
			rec.Project(proj)
			for _, w := range proj.Warnings {
				rec.Warn("", "%s", w)
			}
			if st := p.Stopped(); len(st) > 0 {
				rec.Warn("", "%d %s will only be stopped and stay on %s until it is restored: %s", len(st), plural(len(st), "instance", "instances"), name, ids(st))
			}
		}
		if err := r.settle(); err != nil {
			return err
		}
		return s.start(ctx, p)
	})
	if err != nil {
		return p, err
	}
	s.wake(p)
	return p, nil
}

// Restore runs the admission checks on the member again and, when none fails, asks Incus
// to restore it: instances it moved come back, those it stopped start.
func (s *Service) Restore(ctx context.Context, name string) (*Plan, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	if s.Incus == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	p := &Plan{Member: name, Action: Restore}
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		_, m, err := s.member(ctx, name)
		if err != nil {
			return err
		}
		rec := plan.From(ctx)
		r := &refusals{rec: rec}
		refuse := r.refuse
		if !m.Evacuated() {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "%s is not evacuated (Incus lists it %s): there is nothing to restore", apperr.Quote(name), m.Status)); err != nil {
				return err
			}
		}
		if err := s.notBusy(ctx, name, refuse); err != nil {
			return err
		}
		record, err := s.Store.Record(ctx, name)
		if err != nil {
			return err
		}
		if s.Checker != nil {
			report, err := s.Checker.Run(ctx, name, record, admission.TriggerRestore)
			if err != nil {
				return err
			}
			p.Report = report
			if a := audit.ActionFrom(ctx); a != nil {
				a.Detail("checks", report.Checks)
			}
			if failed := report.Failed(); len(failed) > 0 {
				names := make([]string, len(failed))
				inconclusive := true
				for i, f := range failed {
					names[i] = f.Name + " (" + f.Message + ")"
					inconclusive = inconclusive && f.Inconclusive
				}
				// Checks that failed only because a read did not answer (a member still
				// starting) are Incus unavailable, not a fact against the member: a caller
				// that waits (the rolling driver) may try again.
				code, what := apperr.FailedPrecondition, "failed"
				if inconclusive {
					code, what = apperr.Unavailable, "could not be completed"
				}
				if err := refuse(apperr.New(code, "%s stays evacuated: the admission checks %s: %s. Fix them and restore again", apperr.Quote(name), what, strings.Join(names, "; "))); err != nil {
					return err
				}
			}
		}
		all, err := s.Incus.AllInstances(ctx)
		if err != nil {
			return err
		}
		p.Instances = returning(all, name)
		s.detail(ctx, p, m)
		if err := s.facts(ctx, p); err != nil {
			return err
		}
		if err := r.settle(); err != nil {
			return err
		}
		return s.start(ctx, p)
	})
	if err == nil {
		s.wake(p)
	}
	return p, err
}

// wake tells the follower of the operation the change just committed: woken before the
// commit, it read the database before the row was there and looked again only after its
// idle period (an instant evacuation stayed "running" for about 5 s).
func (s *Service) wake(p *Plan) {
	if p.Operation != nil && s.Wake != nil {
		s.Wake()
	}
}

// member reads the member list and finds name in it.
func (s *Service) member(ctx context.Context, name string) ([]membership.Member, *membership.Member, error) {
	members, err := s.Incus.Members(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i := range members {
		if members[i].Name == name {
			return members, &members[i], nil
		}
	}
	return nil, nil, apperr.New(apperr.NotFound, "%s is not a member of this Incus cluster: check the name (the fleet lists the members)", apperr.Quote(name))
}

// refusals gathers what refuses an evacuation or a restore: a real call stops at the
// first, a plan lists every one so the administrator sees them all at once.
type refusals struct {
	rec   *plan.Recorder
	found []error
}

// refuse returns e at once in a real call; in a plan it keeps e and lets the plan go on.
func (r *refusals) refuse(e error) error {
	if r.rec == nil {
		return e
	}
	r.found = append(r.found, e)
	return nil
}

// settle hands a plan its refusals and returns the first: nothing more of the step runs.
func (r *refusals) settle() error {
	for _, e := range r.found {
		r.rec.Refuse(e)
	}
	if len(r.found) > 0 {
		return r.found[0]
	}
	return nil
}

// notBusy refuses while an operation Apelora started on the machine still runs.
func (s *Service) notBusy(ctx context.Context, name string, refuse func(error) error) error {
	running, err := s.Store.RunningOperation(ctx, name)
	if err != nil {
		return err
	}
	if running == nil {
		return nil
	}
	// Whether it runs is Incus's to say: the row is unfinished until the follower has
	// recorded the end, which may come after Incus finished it.
	iop, found, err := s.Incus.MemberOperation(ctx, running.IncusOperation)
	if err != nil {
		return err
	}
	if found && !iop.Done {
		return refuse(apperr.New(apperr.FailedPrecondition, "%s: an %s started at %s is still running (Incus operation %s): wait for it (memberOperation shows its progress)",
			apperr.Quote(name), running.Action, running.StartedAt.UTC().Format(time.RFC3339), running.IncusOperation))
	}
	return nil
}

// start asks Incus and records its operation in the change in progress.
func (s *Service) start(ctx context.Context, p *Plan) error {
	id, err := s.Incus.ChangeMemberState(ctx, p.Member, p.Action, p.Mode)
	if err != nil {
		return err
	}
	if plan.Active(ctx) {
		return nil
	}
	op := Operation{Machine: p.Member, Action: p.Action, Mode: p.Mode, IncusOperation: id, Instances: p.Instances}
	if a := audit.ActionFrom(ctx); a != nil {
		op.StartedBy, op.RequestID = a.Actor, a.RequestID
		a.Detail("incusOperation", id)
	}
	// The payload answers the operation as recorded, whole: its id and start time come
	// from the database (a zero start time is a null startedAt, an INTERNAL answer to a
	// change that was made).
	if p.Operation, err = s.Store.StartOperation(ctx, op); err != nil {
		return err
	}
	return nil
}

// facts are what the plan shows of the instances and where they go: what the
// administrator approves (the payload lists them), covered by the plan's hash.
func (s *Service) facts(ctx context.Context, p *Plan) error {
	fates := make([]string, len(p.Instances))
	for i, in := range p.Instances {
		fates[i] = fmt.Sprintf("%s (%s, %s): %s", in.ID(), in.Type, in.Status, in.Fate)
	}
	if err := plan.Read(ctx, "instances of "+p.Action, orNone(fates)); err != nil {
		return err
	}
	if p.Action != Evacuate {
		return nil
	}
	// Which members can take them; how many instances each has now is shown, not
	// approved (any launch elsewhere would change it).
	targets := make([]string, len(p.Targets))
	for i, t := range p.Targets {
		targets[i] = t.Member
	}
	slices.Sort(targets)
	return plan.Read(ctx, "evacuation targets", orNone(targets))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (s *Service) detail(ctx context.Context, p *Plan, m *membership.Member) {
	a := audit.ActionFrom(ctx)
	if a == nil {
		return
	}
	a.Detail("memberStatus", m.Status)
	if p.Mode != "" {
		a.Detail("mode", p.Mode)
	}
	fates := map[string]string{}
	for _, in := range p.Instances {
		fates[in.ID()] = string(in.Fate)
	}
	a.Detail("instances", fates)
	if p.Quorum != nil {
		a.Detail("quorum", p.Quorum.Detail())
	}
}

// placement is the rule for the plan's instances (those on the member, with their fate)
// and targets (members an instance may land on). The targets are those the placement
// guard lets untargeted placement reach: admitted (marked), not held, online.
func placement(all []Instance, members []membership.Member, name, mode string) ([]Planned, []Target) {
	counts := map[string]int{}
	var on []Planned
	for _, in := range all {
		counts[in.Location]++
		if in.Location == name {
			on = append(on, Planned{Instance: in, Fate: FateOf(in, mode)})
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
// member is evacuated to be taken down (rebooted, repaired), so the plan projects taking
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
func returning(all []Instance, name string) []Planned {
	var out []Planned
	for _, in := range all {
		switch {
		case in.Location == name:
			out = append(out, Planned{Instance: in, Fate: FateStart})
		case in.Origin == name:
			out = append(out, Planned{Instance: in, Fate: FateReturn})
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

func ids(ps []Planned) string {
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

// History lists the machine's operations, newest first.
func (s *Service) History(ctx context.Context, name string, limit int) ([]Operation, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	return s.Store.Operations(ctx, name, limit)
}

// Progress says what a memberOperation subscriber receives: the machine's operation
// events after the id after (when given) from the store, then live ones.
func (s *Service) Progress(name string, after *int64) (broadcast.Want[string, Event], error) {
	if err := machines.ValidateName(name); err != nil {
		return broadcast.Want[string, Event]{}, err
	}
	return broadcast.Want[string, Event]{Key: name, After: after,
		Replay: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			return s.Store.EventsAfter(ctx, name, after, limit)
		}}, nil
}

// ParseEventID reads an event id given by a client.
func ParseEventID(field, v string) (int64, error) {
	var id int64
	if _, err := fmt.Sscan(strings.TrimSpace(v), &id); err != nil || id < 0 {
		return 0, apperr.Invalid(field, "%s is not a member operation event id (a whole number, as MemberOperationEvent.id gives it)", apperr.Quote(v))
	}
	return id, nil
}

// JudgeStep says what became of an evacuateMember or restoreMember whose outcome its
// process did not record (package changes), from the member's status in Incus (Incus lists
// a member Evacuated from the start of its evacuation, and Online again once restored),
// and records the operation Incus carried out, finished.
func (s *Service) JudgeStep(ctx context.Context, st changes.Step, action string) (changes.Verdict, error) {
	if s.Incus == nil {
		return changes.Verdict{}, apperr.NotConfigured(apperr.Incus)
	}
	name := st.Machine
	_, m, err := s.member(ctx, name)
	if apperr.Is(err, apperr.NotFound) {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s is no member of this Incus cluster", name)}, nil
	}
	if err != nil {
		return changes.Verdict{}, err
	}
	done := m.Evacuated()
	if action == Restore {
		done = !m.Evacuated() && m.Status != membership.StatusOffline
	}
	if !done {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("Incus lists %s %s: the %s did not happen", name, m.Status, action)}, nil
	}
	mode, _ := st.Input()["mode"].(string)
	op := Operation{Machine: name, Action: action, Mode: strings.ToLower(strings.ReplaceAll(mode, "_", "-")),
		IncusOperation: "not recorded", StartedBy: st.Actor, RequestID: st.RequestID}
	msg := fmt.Sprintf("%s of %s found done after a restart: Incus lists it %s", action, name, m.Status)
	if _, err := s.Store.RecordFinished(ctx, op, KindSucceeded, msg); err != nil {
		return changes.Verdict{}, err
	}
	return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus lists %s %s: the %s happened", name, m.Status, action)}, nil
}
