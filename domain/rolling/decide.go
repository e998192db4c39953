package rolling

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// The rolling reboot's rules, pure: each function here reads only its arguments, so the
// same snapshot always gives the same answer (decide_test.go takes every transition,
// property_test.go runs whole histories through the driver on them).

// Limits bound a rolling reboot's waits.
type Limits struct {
	// OnlineTimeout (APELORA_ROLLING_ONLINE_TIMEOUT) bounds the wait for a member to be seen
	// down after its power-off, back after its power-on, and ready for its restore.
	OnlineTimeout time.Duration
	// Settle is how long a member must have answered before it counts as back: Incus's
	// other members judge it by its heartbeat, which they refresh every half
	// cluster.offline_threshold; until then a restore is refused ("Target cluster member
	// is offline", seen on 6.0.4), while its status still says Evacuated.
	Settle time.Duration
}

// Read is a fact a stage reads beyond the task's row and Incus's member list. Decide asks
// for each when the stage gets to it (ActRead), so a round reads only what its decision
// needs: a live power read is a query of the machine's BMC through MAAS, and asking a
// member is a request Incus forwards to it.
type Read uint8

const (
	// ReadTasks: the member's latest evacuation or restore (package maintenance).
	ReadTasks Read = 1 << iota
	// ReadMapping: the member's fence mapping, the MAAS machine that powers it.
	ReadMapping
	// ReadPower: a live power read of that machine from MAAS.
	ReadPower
	// ReadAnswers: whether the member answers ready, itself and through the cluster.
	ReadAnswers
)

// Has reports whether every read in x is in r.
func (r Read) Has(x Read) bool { return r&x == x }

func (r Read) String() string {
	var out []string
	for _, x := range []struct {
		r    Read
		name string
	}{{ReadTasks, "maintenance tasks"}, {ReadMapping, "fence mapping"}, {ReadPower, "power state"}, {ReadAnswers, "member answers"}} {
		if r.Has(x.r) {
			out = append(out, x.name)
		}
	}
	return strings.Join(out, ", ")
}

// Answering is since when the member in WAIT_ONLINE has been seen answering, on the
// driving process's clock. Only that process keeps it: a new leader starts the settle
// period again, which only waits longer.
type Answering struct {
	Task     int64
	Position int
	// Since is zero when the member was not answering at the last look.
	Since time.Time
}

// observe folds one look at the member into a.
func (a Answering) observe(t *Task, up bool, now time.Time) Answering {
	switch {
	case !up:
		return Answering{}
	case a.Since.IsZero() || a.Task != t.ID || a.Position != t.Position:
		return Answering{Task: t.ID, Position: t.Position, Since: now}
	}
	return a
}

// Snapshot is everything Decide decides on, read at one moment.
type Snapshot struct {
	// Task is the cluster's active task (nil for none), its StageFor by the database's clock.
	Task *Task
	// Members are Incus's members as listed now.
	Members []membership.Member
	// Now is the driving process's clock (the settle period only).
	Now    time.Time
	Limits Limits
	// Answering is the driver's memory of the member answering (Decision.Answering).
	Answering Answering
	// Have are the reads made so far, whose facts follow.
	Have Read
	// Latest is the member's latest evacuation or restore, nil for none (ReadTasks).
	Latest *maintenance.Task
	// Mapping is the member's fence mapping, nil for none (ReadMapping).
	Mapping *fencing.Mapping
	// PowerState is what MAAS read of the machine's power now ("on", "off" …), PowerErr
	// why it could not (ReadPower).
	PowerState string
	PowerErr   error
	// Answers is nil when the member answered ready, itself and through the cluster, else
	// why not (ReadAnswers).
	Answers error
}

// Action is what the driver does next.
type Action string

const (
	// ActNone: no running task (none, or paused): nothing to do.
	ActNone Action = "NONE"
	// ActRead: read Decision.Read into the snapshot and decide again.
	ActRead Action = "READ"
	// ActWait: the stage waits (on Incus, MAAS, the member, another change); look again
	// next round.
	ActWait Action = "WAIT"
	// ActAdvance: move the task to Position and Next, with no audit event of its own (the
	// evacuation or restore whose end made it so has its own).
	ActAdvance Action = "ADVANCE"
	// ActFinish: every member was rebooted; the task SUCCEEDED (stage DONE's event).
	ActFinish Action = "FINISH"
	// ActFail: the task stops FAILED with Reason; the member is left as it is. With
	// Record, the stage's refusal (Cause) is recorded as the stage's audit event first.
	ActFail Action = "FAIL"

	// The stages' calls, each one audited change (the stage's event): its intent is
	// committed before the call is sent, its outcome with the task's move to Next.

	// ActEvacuate: ask maintenance to evacuate the member (its change records the task).
	ActEvacuate Action = "EVACUATE"
	// ActPowerOff: the UUID check, then MAAS power_off unless a live read says off
	// already (PowerOffNeeded); then Next.
	ActPowerOff Action = "POWER_OFF"
	// ActConfirmOff: the UUID check, then Next: off is confirmed.
	ActConfirmOff Action = "CONFIRM_OFF"
	// ActPowerOn: the UUID check, then MAAS power_on; then Next.
	ActPowerOn Action = "POWER_ON"
	// ActConfirmOnline: Next: the member answers and has for the settle period.
	ActConfirmOnline Action = "CONFIRM_ONLINE"
	// ActRestore: ask maintenance to restore the member (its admission checks first).
	ActRestore Action = "RESTORE"
)

// Decision is what Decide says the task does next, and why.
type Decision struct {
	Action Action
	// Why says it in the administrator's words.
	Why string
	// Read is the fact to read (ActRead).
	Read Read
	// Member is the member in progress and Stage its stage (the audit event's).
	Member string
	Stage  Stage
	// Position and Next are where the task moves (ActAdvance, and the stages' calls once
	// they succeed).
	Position int
	Next     Stage
	// Mapping is the MAAS machine a power call is for.
	Mapping *fencing.Mapping
	// Details are facts for the stage's audit event.
	Details map[string]any
	// Cause is what made the task wait or fail; Reason the task's reason (ActFail); Record
	// whether Cause is recorded as the stage's audit event first (ActFail).
	Cause  error
	Reason string
	Record bool
	// Answering is what the driver remembers of the member answering, for the next round.
	Answering Answering
}

// Decide says what the active task does next. It is pure: the same snapshot always gives
// the same decision. Facts it needs and the snapshot lacks it asks for (ActRead), one at
// a time and each at most once.
func Decide(s Snapshot) Decision {
	t := s.Task
	if t == nil {
		return Decision{Action: ActNone, Why: "no rolling reboot is running", Answering: s.Answering}
	}
	if t.State != StateRunning {
		return Decision{Action: ActNone, Why: fmt.Sprintf("rolling reboot %d is %s", t.ID, strings.ToLower(string(t.State))), Answering: s.Answering}
	}
	member := t.Current()
	d := Decision{Member: member, Stage: t.Stage, Position: t.Position, Answering: s.Answering}
	if member == "" {
		d.Action, d.Stage, d.Why = ActFinish, StageDone, fmt.Sprintf("every member of rolling reboot %d was rebooted", t.ID)
		return d
	}
	m := find(s.Members, member)
	if m == nil {
		return d.fail(false, apperr.New(apperr.NotFound, "%s is no longer a member of this Incus cluster: the rolling reboot stops here", apperr.Quote(member)))
	}
	switch t.Stage {
	case StageEvacuate:
		return decideEvacuate(s, m, d)
	case StagePowerOff:
		return decidePowerOff(s, d)
	case StageConfirmOff:
		return decideConfirmOff(s, m, d)
	case StagePowerOn:
		return decidePowerOn(s, d)
	case StageWaitOnline:
		return decideWaitOnline(s, m, d)
	case StageRestore:
		return decideRestore(s, m, d)
	}
	// A stage this process does not know (one a newer apelora-worker recorded): it waits
	// for a process that does.
	return d.wait(fmt.Errorf("rolling reboot %d is at a stage this apelora-worker does not know (%q): a newer version's? it waits for one that knows it", t.ID, t.Stage))
}

func decideEvacuate(s Snapshot, m *membership.Member, d Decision) Decision {
	if !s.Have.Has(ReadTasks) {
		return d.read(ReadTasks, "whether an evacuation of "+m.Name+" ran")
	}
	last := s.latest(maintenance.Evacuate)
	switch {
	case last != nil && last.Running():
		return d.waitFor("the evacuation of %s runs (Incus operation %s): the follower records its end", m.Name, last.IncusOperation)
	case last != nil && last.Outcome == maintenance.KindFailed:
		return d.fail(false, fmt.Errorf("the evacuation of %s failed: %s", m.Name, last.Message))
	case m.Evacuated():
		return d.advance(s.Task, s.Task.Position, StagePowerOff, fmt.Sprintf("Incus lists %s Evacuated", m.Name))
	case last != nil:
		return d.fail(false, fmt.Errorf("the evacuation of %s ended (%s) but Incus lists it %s, not Evacuated", m.Name, last.Outcome, m.Status))
	}
	if err := Check(s.Members, m.Name); err != nil {
		return d.fail(true, err)
	}
	return d.call(ActEvacuate, "", "every other member is up and the quorum projection allows taking "+m.Name+" down: evacuate it")
}

func decidePowerOff(s Snapshot, d Decision) Decision {
	d, ok := d.needMapping(s)
	if !ok {
		return d
	}
	return d.call(ActPowerOff, StageConfirmOff, fmt.Sprintf("%s is evacuated: power machine %s off", d.Member, d.Mapping.SystemID))
}

func decideConfirmOff(s Snapshot, m *membership.Member, d Decision) Decision {
	d, ok := d.needMapping(s)
	if !ok {
		return d
	}
	if !s.Have.Has(ReadPower) {
		return d.read(ReadPower, "whether MAAS reads machine "+d.Mapping.SystemID+" off")
	}
	off := s.PowerErr == nil && s.PowerState == "off"
	if off {
		if !s.Have.Has(ReadAnswers) {
			return d.read(ReadAnswers, "whether "+m.Name+" still answers")
		}
		if s.Answers != nil {
			d.Details = map[string]any{"powerState": s.PowerState, "memberAnswers": false, "seconds": s.Task.StageFor.Seconds()}
			return d.call(ActConfirmOff, StagePowerOn, fmt.Sprintf("MAAS reads machine %s off and %s no longer answers", d.Mapping.SystemID, m.Name))
		}
	}
	if s.Task.StageFor > s.Limits.OnlineTimeout {
		seen := s.PowerState
		if s.PowerErr != nil {
			seen = "unreadable (" + s.PowerErr.Error() + ")"
		}
		answers := ""
		if off {
			answers = " and it still answers"
		}
		return d.fail(true, apperr.New(apperr.FailedPrecondition,
			"%s was not seen down within %v of its power-off (APELORA_ROLLING_ONLINE_TIMEOUT): MAAS reads its power %s%s; it stays evacuated: check the machine, then power it on and restore it",
			m.Name, s.Limits.OnlineTimeout, seen, answers))
	}
	if off {
		return d.waitFor("MAAS reads machine %s off but %s still answers", d.Mapping.SystemID, m.Name)
	}
	if s.PowerErr != nil {
		return d.waitFor("MAAS could not read machine %s's power: %v", d.Mapping.SystemID, s.PowerErr)
	}
	return d.waitFor("MAAS reads machine %s's power %s, not off yet", d.Mapping.SystemID, s.PowerState)
}

func decidePowerOn(s Snapshot, d Decision) Decision {
	d, ok := d.needMapping(s)
	if !ok {
		return d
	}
	return d.call(ActPowerOn, StageWaitOnline, fmt.Sprintf("%s is confirmed off: power machine %s on", d.Member, d.Mapping.SystemID))
}

func decideWaitOnline(s Snapshot, m *membership.Member, d Decision) Decision {
	up := false
	if m.Status != membership.StatusOffline {
		if !s.Have.Has(ReadAnswers) {
			return d.read(ReadAnswers, "whether "+m.Name+" answers again")
		}
		up = s.Answers == nil
	}
	d.Answering = s.Answering.observe(s.Task, up, s.Now)
	if up && s.Now.Sub(d.Answering.Since) >= s.Limits.Settle {
		d.Details = map[string]any{"memberStatus": string(m.Status), "seconds": s.Task.StageFor.Seconds(), "answeringSeconds": s.Now.Sub(d.Answering.Since).Seconds()}
		return d.call(ActConfirmOnline, StageRestore, fmt.Sprintf("%s has answered for %s (the settle period is %s)", m.Name, s.Now.Sub(d.Answering.Since).Round(time.Millisecond), s.Limits.Settle))
	}
	if s.Task.StageFor > s.Limits.OnlineTimeout {
		seen := fmt.Sprintf("it does not answer (Incus lists it %s)", m.Status)
		if up {
			seen = fmt.Sprintf("it answers, but not yet for the settle period (%s)", s.Limits.Settle)
		}
		return d.fail(true, apperr.New(apperr.FailedPrecondition,
			"%s did not come back within %v of its power-on (APELORA_ROLLING_ONLINE_TIMEOUT): %s; it stays evacuated: check the machine's console in MAAS, then restore it (restoreMember) once it is up",
			m.Name, s.Limits.OnlineTimeout, seen))
	}
	if up {
		return d.waitFor("%s answers; it counts as back once it has for %s", m.Name, s.Limits.Settle)
	}
	return d.waitFor("%s does not answer yet (Incus lists it %s)", m.Name, m.Status)
}

func decideRestore(s Snapshot, m *membership.Member, d Decision) Decision {
	if !s.Have.Has(ReadTasks) {
		return d.read(ReadTasks, "whether a restore of "+m.Name+" ran")
	}
	last := s.latest(maintenance.Restore)
	switch {
	case last != nil && last.Running():
		return d.waitFor("the restore of %s runs (Incus operation %s): the follower records its end", m.Name, last.IncusOperation)
	case last != nil && last.Outcome == maintenance.KindFailed:
		return d.fail(false, fmt.Errorf("the restore of %s failed: %s", m.Name, last.Message))
	case !m.Evacuated() && m.Status != membership.StatusOffline:
		return d.advance(s.Task, s.Task.Position+1, StageEvacuate, fmt.Sprintf("Incus lists %s %s: restored", m.Name, m.Status))
	case last != nil:
		return d.fail(false, fmt.Errorf("the restore of %s ended (%s) but Incus lists it %s", m.Name, last.Outcome, m.Status))
	}
	// The member must answer ready itself (its own API, as the admission checks ask it):
	// one back from a power cycle may answer "Server isn't ready yet" for a while, and the
	// checks would fail on it.
	if !s.Have.Has(ReadAnswers) {
		return d.read(ReadAnswers, "whether "+m.Name+" is ready to be restored")
	}
	if s.Answers != nil {
		return d.notReady(s, s.Answers)
	}
	return d.call(ActRestore, "", m.Name+" answers: run the admission checks and restore it")
}

// Failed says what the error of the decision's call means: BUSY waits (another change
// holds the member, or one of its stages awaits its outcome from the change reconciler:
// nothing was tried, the next round takes the stage again); a restore whose checks could
// not be completed (UNAVAILABLE: a read did not answer) is tried again within the stage's
// bound; anything else stops the task (the call's change recorded the stage's event).
func (d Decision) Failed(s Snapshot, err error) Decision {
	switch {
	case apperr.Is(err, apperr.Busy):
		return d.wait(err)
	case d.Action == ActRestore && apperr.CodeOf(err) == apperr.Unavailable:
		return d.notReady(s, err)
	}
	return d.fail(false, err)
}

// notReady waits for the member to be ready for its restore while the stage is within
// its bound, and stops the task after it.
func (d Decision) notReady(s Snapshot, cause error) Decision {
	if s.Task.StageFor <= s.Limits.OnlineTimeout {
		d = d.wait(cause)
		d.Why = fmt.Sprintf("waiting for %s to be ready before restoring it: %s", d.Member, d.Why)
		return d
	}
	return d.fail(true, apperr.New(apperr.FailedPrecondition,
		"%s was not ready to restore within %v (APELORA_ROLLING_ONLINE_TIMEOUT): %s; it stays evacuated: check it, then restore it once it is up",
		d.Member, s.Limits.OnlineTimeout, apperr.PublicMessage(cause)))
}

// latest is the member's latest task of action started since the stage began, nil for none.
func (s Snapshot) latest(action string) *maintenance.Task {
	if s.Latest == nil || s.Latest.Action != action || s.Latest.StartedAt.Before(s.Task.StageSince) {
		return nil
	}
	return s.Latest
}

func (d Decision) read(r Read, why string) Decision {
	d.Action, d.Read, d.Why = ActRead, r, "read "+why
	return d
}

func (d Decision) waitFor(format string, args ...any) Decision {
	d.Action, d.Why = ActWait, fmt.Sprintf(format, args...)
	return d
}

// wait is a wait the driver logs: its cause is worth saying (BUSY, a member not ready).
func (d Decision) wait(cause error) Decision {
	d.Action, d.Cause, d.Why = ActWait, cause, apperr.Text(cause)
	return d
}

// call is one of the stages' calls; next is where the task moves once it succeeded (""
// for an evacuation or a restore: the task moves on once Incus lists the member so).
func (d Decision) call(a Action, next Stage, why string) Decision {
	d.Action, d.Next, d.Why = a, next, why
	return d
}

func (d Decision) advance(t *Task, position int, next Stage, why string) Decision {
	if position >= len(t.Members) {
		next = StageDone
	}
	d.Action, d.Position, d.Next, d.Why = ActAdvance, position, next, why
	return d
}

func (d Decision) fail(record bool, cause error) Decision {
	d.Action, d.Cause, d.Record = ActFail, cause, record
	d.Reason = Reason(d.Member, d.Stage, cause)
	d.Why = d.Reason
	return d
}

// needMapping asks for the member's fence mapping, and stops the task when it has none.
func (d Decision) needMapping(s Snapshot) (Decision, bool) {
	if !s.Have.Has(ReadMapping) {
		return d.read(ReadMapping, "the fence mapping of "+d.Member), false
	}
	if s.Mapping == nil {
		return d.fail(true, apperr.New(apperr.FailedPrecondition,
			"%s has no fence mapping any more, so Apelora does not know which MAAS machine powers it; it stays evacuated: set the mapping, then power it on and restore it", apperr.Quote(d.Member))), false
	}
	d.Mapping = s.Mapping
	return d, true
}

// Reason is a failed task's reason: the member, its stage and what went wrong.
func Reason(member string, stage Stage, cause error) string {
	var ae *apperr.Error
	why := cause.Error()
	if errors.As(cause, &ae) {
		why = apperr.PublicMessage(cause)
	}
	return fmt.Sprintf("%s (stage %s): %s", member, stage, why)
}

// PowerOffNeeded is the rule of a POWER_OFF taken again (after a restart, or by a new
// leader): a live read that says off means the power-off already happened, and none is
// sent; any other answer, or none, sends it.
func PowerOffNeeded(state string, readErr error) bool {
	return readErr != nil || state != "off"
}

// Check is the rule applied before the start and before each member: every other member
// of the cluster is up and not in maintenance, and taking member down leaves Incus's
// database its majority (package quorum). It returns the refusal, nil when member may go.
func Check(members []membership.Member, member string) error {
	var found bool
	var down []string
	for i := range members {
		m := &members[i]
		if m.Name == member {
			found = true
			if m.Status == membership.StatusOffline {
				return apperr.New(apperr.FailedPrecondition, "%s is offline: a rolling reboot reboots members that are up; bring it back (or fence it) first", apperr.Quote(member))
			}
			continue
		}
		if m.Status == membership.StatusOffline || m.Evacuated() {
			down = append(down, fmt.Sprintf("%s (%s)", m.Name, m.Status))
		}
	}
	if !found {
		return apperr.New(apperr.NotFound, "%s is not a member of this Incus cluster: check the name (the fleet lists the members)", apperr.Quote(member))
	}
	if len(down) > 0 {
		return apperr.New(apperr.FailedPrecondition, "%s cannot be rebooted while %s: a rolling reboot takes one member down at a time; bring %s back (restore or power on) first",
			apperr.Quote(member), strings.Join(down, ", "), plural(len(down), "it", "them"))
	}
	if p := quorum.Project(quorum.FromMembership(members), member); p.Refused() {
		return apperr.New(apperr.FailedPrecondition, "%s cannot be rebooted: %s", apperr.Quote(member), p.Refusals[0])
	}
	return nil
}

// ValidateMembers is the rule for the members a start names: at least one, each a valid
// member name, none twice.
func ValidateMembers(members []string) error {
	if len(members) == 0 {
		return apperr.Invalid("members", "name at least one member to reboot")
	}
	seen := map[string]bool{}
	for _, m := range members {
		if err := machines.ValidateName(m); err != nil {
			return err
		}
		if seen[m] {
			return apperr.Invalid("members", "%s is named twice: name each member once, in the order to reboot them", apperr.Quote(m))
		}
		seen[m] = true
	}
	return nil
}

// StartRefusals is what refuses a start, in order: another task still active (one per
// cluster), then, for each member named, Check against the cluster as listed now and a
// fence mapping (the MAAS machine that powers it). A real call answers the first; a plan
// lists them all.
func StartRefusals(active *Task, members []membership.Member, names []string, mappings map[string]fencing.Mapping) []error {
	var out []error
	if active != nil && active.Active() {
		out = append(out, apperr.New(apperr.FailedPrecondition, "rolling reboot %d (%s, at %s) is still %s: one rolling reboot per cluster at a time; wait for it, or cancel it (cancelRollingReboot)",
			active.ID, strings.Join(active.Members, ", "), describeCurrent(active), strings.ToLower(string(active.State))))
	}
	for _, m := range names {
		if err := Check(members, m); err != nil {
			out = append(out, err)
			continue
		}
		if _, ok := mappings[m]; !ok {
			out = append(out, apperr.New(apperr.FailedPrecondition, "%s has no fence mapping, so Apelora does not know which MAAS machine powers it: set one (setFenceMapping) first", apperr.Quote(m)))
		}
	}
	return out
}

// Verb is what an administrator asks of a task.
type Verb string

const (
	Pause  Verb = "pause"
	Resume Verb = "resume"
	Cancel Verb = "cancel"
)

func (v Verb) past() string {
	switch v {
	case Pause:
		return "paused"
	case Resume:
		return "resumed"
	}
	return "cancelled"
}

// Move is what a pause, resume or cancel does to a task: from which states to which, and
// the reason it records.
type Move struct {
	From   []State
	To     State
	Reason string
}

// Transition is the rule of pause, resume and cancel: pause a running task (the stage in
// progress finishes, no next one starts), resume a paused one (from its stage), cancel
// either (no further stage; the member in progress is left as it is). actor names who
// asked, for a cancel's reason.
func Transition(t Task, verb Verb, actor string) (Move, error) {
	var mv Move
	switch verb {
	case Pause:
		mv = Move{From: []State{StateRunning}, To: StatePaused}
	case Resume:
		mv = Move{From: []State{StatePaused}, To: StateRunning}
	case Cancel:
		mv = Move{From: []State{StateRunning, StatePaused}, To: StateCancelled}
		mv.Reason = fmt.Sprintf("cancelled at %s", describeCurrent(&t))
		if actor != "" {
			mv.Reason += " by " + actor
		}
		if cur := t.Current(); cur != "" && t.Stage != StageEvacuate {
			mv.Reason += fmt.Sprintf("; %s is left as it is (restore it with restoreMember when it is up)", cur)
		}
	default:
		return Move{}, apperr.New(apperr.Internal, "%q is not something a rolling reboot can be asked (pause, resume, cancel)", string(verb))
	}
	if !slices.Contains(mv.From, t.State) {
		return Move{}, apperr.New(apperr.FailedPrecondition, "rolling reboot %d is %s: it cannot be %s; %s", t.ID, strings.ToLower(string(t.State)), verb.past(), nextFor(&t))
	}
	return mv, nil
}

func describeCurrent(t *Task) string {
	if cur := t.Current(); cur != "" {
		return fmt.Sprintf("%s, stage %s", cur, t.Stage)
	}
	return "its end"
}

func nextFor(t *Task) string {
	switch t.State {
	case StateRunning:
		return "pause or cancel it"
	case StatePaused:
		return "resume or cancel it"
	}
	return "it has finished; start a new one (startRollingReboot)"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func find(members []membership.Member, name string) *membership.Member {
	for i := range members {
		if members[i].Name == name {
			return &members[i]
		}
	}
	return nil
}
