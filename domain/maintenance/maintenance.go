// Package maintenance takes a member out for maintenance and brings it back: evacuate and
// restore through Incus's own member state (POST /1.0/cluster/members/{name}/state);
// Incus moves or stops the instances, Apelora never moves one itself. The effect says what
// Incus will do to each instance and where capacity remains; the Incus operation that
// carries it out is recorded as a task in the change's transaction, and a Follower turns
// its progress into events every replica pushes (memberOperation), across API restarts.
//
// The rules are pure functions over the facts read at one moment (decide.go): Decide says
// what a request may do (its refusals, its warnings, its effect), Follow and Outcome what
// Incus's operation says of a task, Happened what a restart finds of a step. The Service and
// the Follower read those facts, and record and send what the rules decide.
//
// EVACUATED is not stored: it is Incus's member status (package lifecycle). Fencing never
// powers off an evacuated member (package fencing), drift suspends its checks of one.
package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
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

// Affected is an instance with its fate.
type Affected struct {
	Instance
	Fate Fate
}

// Target is a member an evacuated instance may land on: online, not evacuated, admitted
// (it carries the admission mark) and not held, with the instances it has now.
type Target struct {
	Member    string
	Instances int
}

// Effect is what an evacuation or a restore does (a dry run's plan shows it, a real call
// answers it).
type Effect struct {
	Member string
	Action string
	Mode   string
	// Instances are every instance on the member (every project), with what happens to it.
	Instances []Affected
	// Targets are where moved instances may go, fewest instances first (Incus's own
	// choice among them: the member with the fewest instances wins).
	Targets []Target
	Quorum  *quorum.Projection
	// Report is the admission checks a restore ran first.
	Report *admission.Report
	// Task is the recorded task (nil in a dry run).
	Task *Task
}

// Stopped are the instances that will only be stopped.
func (e *Effect) Stopped() []Affected {
	var out []Affected
	for _, in := range e.Instances {
		if in.Fate == FateStop {
			out = append(out, in)
		}
	}
	return out
}

// Task is an evacuation or restore Apelora asked Incus for, followed to its end
// (member_operations).
type Task struct {
	ID int64
	// Cluster is the id of the Incus cluster the member is in (domain/clusters): the
	// follower asks that cluster for the Incus operation.
	Cluster        int64
	Machine        string
	Action         string
	Mode           string
	IncusOperation string
	StartedBy      string
	RequestID      string
	StartedAt      time.Time
	// Instances are the effect's instances as the task began, to report each one's
	// outcome at the end.
	Instances []Affected
	// FinishedAt is zero while it runs; Outcome is then SUCCEEDED, FAILED or UNKNOWN.
	FinishedAt time.Time
	Outcome    Kind
	Message    string
}

// Running reports whether Incus's operation has not been seen to end.
func (t *Task) Running() bool { return t.FinishedAt.IsZero() }

// Kind is what a task's event says.
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

// Event is one line of a task's progress, as memberOperation pushes it.
type Event struct {
	ID   int64
	Task int64
	// Cluster is the task's cluster (0: not known); Machine the member's name in it.
	Cluster int64
	Machine string
	Action  string
	At      time.Time
	Kind    Kind
	Message string
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

// Checker runs the admission checks (admission.Checker) in a cluster.
type Checker interface {
	RunInCluster(ctx context.Context, cl clusters.Cluster, machine string, rec *machines.Record, trigger admission.Trigger) (*admission.Report, error)
}

// Store is what maintenance needs from the database.
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	Record(ctx context.Context, name string) (*machines.Record, error)
	// FenceInFlight reports whether the member of the cluster has a power-off requested
	// and not yet confirmed or given up.
	FenceInFlight(ctx context.Context, cluster int64, member string) (bool, error)
	// RunningTask is the task of the cluster's member not seen to end, nil for none.
	RunningTask(ctx context.Context, cluster int64, member string) (*Task, error)
	// StartTask records t and its STARTED event in the change in progress, and returns
	// the task as recorded (its id, start time and message filled in).
	StartTask(ctx context.Context, t Task) (*Task, error)
	// RecordFinished records t, which Incus carried out but whose start was never
	// recorded (the process that asked stopped), as finished with outcome, with its events,
	// in the change in progress.
	RecordFinished(ctx context.Context, t Task, outcome Kind, message string) (int64, error)
	// Tasks lists the tasks of members called machine in any cluster, newest first;
	// ClusterTasks those of the cluster's member.
	Tasks(ctx context.Context, machine string, limit int) ([]Task, error)
	ClusterTasks(ctx context.Context, cluster int64, member string, limit int) ([]Task, error)
	// EventsAfter lists events (of machine, or all for ""; of the cluster, or any for 0)
	// after the id, in id order.
	EventsAfter(ctx context.Context, cluster int64, machine string, after int64, limit int) ([]Event, error)
}

// Service evacuates and restores members, each in its cluster: the one its machine record
// names, or the one the call names (clusters.OfRecord).
type Service struct {
	// Ports finds a cluster's Incus ports (the connection pool); Clusters lists the
	// registered clusters. Either nil: Incus is not configured.
	Ports    clusters.Ports[Incus]
	Clusters clusters.Lister
	Store    Store
	Checker  Checker
	// Feed carries the task events, keyed by machine (memberOperation).
	Feed *broadcast.Hub[string, Event]
	// Wake tells the follower a new task began; nil is fine (it polls anyway).
	Wake func()
}

// Evacuate asks Incus to evacuate the member: every instance is moved or stopped as its
// cluster.evacuate (or mode) says. cluster names the member's cluster ("": its record's,
// see Locate); the targets, fates and quorum projection are that cluster's.
func (s *Service) Evacuate(ctx context.Context, cluster, name, mode string) (*Effect, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	if !validMode(mode) {
		return nil, apperr.Invalid("mode", "%s is not an evacuation mode: use one of auto, migrate, live-migrate, stop (or none: each instance's cluster.evacuate decides)", apperr.Quote(mode))
	}
	if s.Ports == nil || s.Clusters == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	e := &Effect{Member: name, Action: Evacuate, Mode: mode}
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		cl, in, _, err := s.locate(ctx, cluster, name)
		if err != nil {
			return err
		}
		r, err := s.request(ctx, cl, in, Evacuate, name, mode)
		if err != nil {
			return err
		}
		if r.FenceInFlight, err = s.Store.FenceInFlight(ctx, cl.ID, name); err != nil {
			return err
		}
		if r.Instances, err = in.AllInstances(ctx); err != nil {
			return err
		}
		return s.carryOut(ctx, cl, in, e, r, Decide(r))
	})
	if err != nil {
		return e, err
	}
	s.wake(e)
	return e, nil
}

// Restore runs the admission checks on the member again and, when none fails, asks Incus
// to restore it: instances it moved come back, those it stopped start. cluster names the
// member's cluster as in Evacuate.
func (s *Service) Restore(ctx context.Context, cluster, name string) (*Effect, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	if s.Ports == nil || s.Clusters == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	e := &Effect{Member: name, Action: Restore}
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		cl, in, record, err := s.locate(ctx, cluster, name)
		if err != nil {
			return err
		}
		r, err := s.request(ctx, cl, in, Restore, name, "")
		if err != nil {
			return err
		}
		if r.Instances, err = in.AllInstances(ctx); err != nil {
			return err
		}
		v := Decide(r)
		if !plan.Active(ctx) && v.Refused() {
			return v.Refusals[0] // the checks are not run for a restore refused already
		}
		if s.Checker != nil {
			if r.Checks, err = s.Checker.RunInCluster(ctx, cl, name, record, admission.TriggerRestore); err != nil {
				return err
			}
			if a := audit.ActionFrom(ctx); a != nil {
				a.Detail("checks", r.Checks.Checks)
			}
			v = Decide(r)
		}
		return s.carryOut(ctx, cl, in, e, r, v)
	})
	if err == nil {
		s.wake(e)
	}
	return e, err
}

// Locate names the cluster of the member called name and returns its ports: its machine
// record's cluster, or the one given (a member without a record: the one given, else the
// only cluster; clusters.OfMember), with the record (nil for none).
func (s *Service) Locate(ctx context.Context, given, name string) (clusters.Cluster, Incus, *machines.Record, error) {
	if s.Ports == nil || s.Clusters == nil {
		return clusters.Cluster{}, nil, nil, apperr.NotConfigured(apperr.Incus)
	}
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	cl, err := clusters.OfMember(s.Clusters.All(), name, rec, given)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	in, err := s.Ports.For(ctx, cl.ID)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	return cl, in, rec, nil
}

// locate is Locate inside a change: the cluster is a fact of the plan and a detail of the
// audit event.
func (s *Service) locate(ctx context.Context, given, name string) (clusters.Cluster, Incus, *machines.Record, error) {
	cl, in, rec, err := s.Locate(ctx, given, name)
	if err != nil {
		return cl, nil, nil, err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("cluster", cl.Name)
	}
	if err := plan.Read(ctx, "cluster of "+name, cl.Name+"; "+cl.Fact()); err != nil {
		return cl, nil, nil, err
	}
	return cl, in, rec, nil
}

// request reads the facts a request is decided on (Decide) that evacuations and restores
// share: the member list (a member it does not list is refused at once, in a plan too) and
// the member's running task with Incus's word on it.
func (s *Service) request(ctx context.Context, cl clusters.Cluster, in Incus, action, name, mode string) (Request, error) {
	members, err := in.Members(ctx)
	if err != nil {
		return Request{}, err
	}
	if find(members, name) == nil {
		return Request{}, apperr.New(apperr.NotFound, "%s is not a member of this Incus cluster (%s): check the name and the cluster (the fleet lists the members with their cluster)", apperr.Quote(name), cl.Name)
	}
	r := Request{Action: action, Member: name, Mode: mode, Members: members}
	if r.Running, err = s.Store.RunningTask(ctx, cl.ID, name); err != nil || r.Running == nil {
		return r, err
	}
	// Whether it runs is Incus's to say: the row is unfinished until the follower has
	// recorded the end, which may come after Incus finished it.
	r.RunningOp, r.RunningFound, err = in.MemberOperation(ctx, r.Running.IncusOperation)
	return r, err
}

// carryOut does what the verdict says: a real call stops at its first refusal; a plan
// lists every refusal and warning, so the administrator sees them all at once. Then the
// facts the effect shows are read (what the administrator approves) and Incus is asked.
func (s *Service) carryOut(ctx context.Context, cl clusters.Cluster, in Incus, e *Effect, r Request, v Verdict) error {
	*e = v.Effect
	rec := plan.From(ctx)
	if rec == nil && v.Refused() {
		return v.Refusals[0]
	}
	s.detail(ctx, e, find(r.Members, r.Member))
	if err := s.facts(ctx, e); err != nil {
		return err
	}
	if rec != nil {
		if e.Quorum != nil {
			rec.Project(*e.Quorum)
		}
		for _, w := range v.Warnings {
			rec.Warn("", "%s", w)
		}
		for _, err := range v.Refusals {
			rec.Refuse(err)
		}
		if v.Refused() {
			return v.Refusals[0]
		}
	}
	return s.start(ctx, cl, in, e)
}

// wake tells the follower of the task the change just committed: woken before the
// commit, it read the database before the row was there and looked again only after its
// idle period (an instant evacuation stayed "running" for about 5 s).
func (s *Service) wake(e *Effect) {
	if e.Task != nil && s.Wake != nil {
		s.Wake()
	}
}

// start asks Incus and records its operation as the task in the change in progress.
func (s *Service) start(ctx context.Context, cl clusters.Cluster, in Incus, e *Effect) error {
	id, err := in.ChangeMemberState(ctx, e.Member, e.Action, e.Mode)
	if err != nil {
		return err
	}
	if plan.Active(ctx) {
		return nil
	}
	t := Task{Cluster: cl.ID, Machine: e.Member, Action: e.Action, Mode: e.Mode, IncusOperation: id, Instances: e.Instances}
	if a := audit.ActionFrom(ctx); a != nil {
		t.StartedBy, t.RequestID = a.Actor, a.RequestID
		a.Detail("incusOperation", id)
	}
	// The payload answers the task as recorded, whole: its id and start time come from
	// the database (a zero start time is a null startedAt, an INTERNAL answer to a change
	// that was made).
	if e.Task, err = s.Store.StartTask(ctx, t); err != nil {
		return err
	}
	return nil
}

// facts are what the plan shows of the instances and where they go: what the
// administrator approves (the payload lists them), covered by the plan's hash.
func (s *Service) facts(ctx context.Context, e *Effect) error {
	fates := make([]string, len(e.Instances))
	for i, in := range e.Instances {
		fates[i] = fmt.Sprintf("%s (%s, %s): %s", in.ID(), in.Type, in.Status, in.Fate)
	}
	if err := plan.Read(ctx, "instances of "+e.Action, orNone(fates)); err != nil {
		return err
	}
	if e.Action != Evacuate {
		return nil
	}
	// Which members can take them; how many instances each has now is shown, not
	// approved (any launch elsewhere would change it).
	targets := make([]string, len(e.Targets))
	for i, t := range e.Targets {
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

func (s *Service) detail(ctx context.Context, e *Effect, m *membership.Member) {
	a := audit.ActionFrom(ctx)
	if a == nil || m == nil {
		return
	}
	a.Detail("memberStatus", m.Status)
	if e.Mode != "" {
		a.Detail("mode", e.Mode)
	}
	fates := map[string]string{}
	for _, in := range e.Instances {
		fates[in.ID()] = string(in.Fate)
	}
	a.Detail("instances", fates)
	if e.Quorum != nil {
		a.Detail("quorum", e.Quorum.Detail())
	}
}

// row names the member of the fleet row called name: a machine record's name is its
// member in the record's cluster (clusters.OfRecord); "m1.rack2" (the fleet's name for
// rack2's m1 when another row is called m1, decision D1) is m1 of rack2; a name with
// neither record nor cluster is the member of that name wherever it is (cluster 0: no
// other row claims it). A member name is unique within its cluster only.
func (s *Service) row(ctx context.Context, name string) (member string, cluster int64, err error) {
	if member, cluster, ok := strings.Cut(name, "."); ok {
		var all []clusters.Cluster
		if s.Clusters != nil {
			all = s.Clusters.All()
		}
		i := slices.IndexFunc(all, func(c clusters.Cluster) bool { return c.Name == cluster })
		if i < 0 || machines.ValidateName(member) != nil {
			return "", 0, apperr.Invalid("name", "%s names no member: give a machine's name, or a member's as the fleet shows it (m1.rack2: m1 of cluster rack2)", apperr.Quote(name))
		}
		return member, all[i].ID, nil
	}
	if err := machines.ValidateName(name); err != nil {
		return "", 0, err
	}
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return "", 0, err
	}
	if rec != nil && s.Clusters != nil {
		if c, err := clusters.OfRecord(s.Clusters.All(), name, rec.Cluster, ""); err == nil {
			return name, c.ID, nil
		}
	}
	return name, 0, nil
}

// History lists the tasks of the fleet row called name (see row), newest first.
func (s *Service) History(ctx context.Context, name string, limit int) ([]Task, error) {
	member, cluster, err := s.row(ctx, name)
	if err != nil {
		return nil, err
	}
	if cluster != 0 {
		return s.Store.ClusterTasks(ctx, cluster, member, limit)
	}
	return s.Store.Tasks(ctx, member, limit)
}

// Progress says what a memberOperation subscriber receives: the task events of the fleet
// row called name (see row) after the id after (when given) from the store, then live ones.
func (s *Service) Progress(ctx context.Context, name string, after *int64) (broadcast.Want[string, Event], error) {
	member, cluster, err := s.row(ctx, name)
	if err != nil {
		return broadcast.Want[string, Event]{}, err
	}
	var match func(Event) bool
	if cluster != 0 {
		match = func(e Event) bool { return e.Cluster == cluster }
	}
	return broadcast.Want[string, Event]{Key: member, After: after, Match: match,
		Replay: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			return s.Store.EventsAfter(ctx, cluster, member, after, limit)
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
// process did not record (package changes), from the member's status in Incus (Happened),
// and records the task Incus carried out, finished.
func (s *Service) JudgeStep(ctx context.Context, st changes.Step, action string) (changes.Verdict, error) {
	name := st.Machine
	// The cluster the call named (its input), or the one its change recorded (a rolling
	// reboot's stage: the detail).
	cl, in, _, err := s.Locate(ctx, st.Text("cluster"), name)
	if err != nil {
		return changes.Verdict{}, err
	}
	members, err := in.Members(ctx)
	if err != nil {
		return changes.Verdict{}, err
	}
	m := find(members, name)
	v := Happened(action, name, m)
	if v.Outcome != audit.Succeeded {
		return v, nil
	}
	mode, _ := st.Input()["mode"].(string)
	t := Task{Cluster: cl.ID, Machine: name, Action: action, Mode: strings.ToLower(strings.ReplaceAll(mode, "_", "-")),
		IncusOperation: "not recorded", StartedBy: st.Actor, RequestID: st.RequestID}
	msg := fmt.Sprintf("%s of %s found done after a restart: Incus lists it %s", action, name, m.Status)
	if _, err := s.Store.RecordFinished(ctx, t, KindSucceeded, msg); err != nil {
		return changes.Verdict{}, err
	}
	return v, nil
}
