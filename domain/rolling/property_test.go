package rolling

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// A history is one generated rolling reboot: the real Service starts it and the real
// Driver (on Decide) drives it, round after round, in a simulated cluster (members, their
// machines' power and boot, Incus's evacuations and restores, MAAS) while the world does
// its worst for a while: the driving process dies between a stage's intent and its call or
// right after the call (the reconciler judges the stage, with StageJudge and
// maintenance.Happened), leadership moves, another change holds the member (BUSY), Incus
// and MAAS do not answer, a mapping disappears, the administrator pauses, resumes and
// cancels; some machines never come back, accept a power-off that never happens, have no
// power driver or a mapping naming another machine's UUID. Then the world calms down and
// the history must end. The invariants are checked at every call sent and every round.

// crash is what a simulated process panics with when it dies mid-stage.
type crash struct{}

type simMember struct {
	name   string
	voter  bool
	status membership.Status
	on     bool      // the machine's power
	offAt  time.Time // a power-off MAAS accepted takes effect then (zero: none pending)
	upAt   time.Time // when its daemon answers after its last power-on
	// The machine's nature, fixed for the history.
	dead        bool // a power-on brings nothing back
	ineffective bool // MAAS accepts a power-off that never happens
	noDriver    bool // MAAS says it cannot power it (null answer)
	wrongUUID   bool // its mapping names another machine's hardware UUID
	// What happened to it.
	wentOff   bool // it was really off since its evacuation was asked
	cycled    int  // power-offs that took effect
	poweredOn int  // power-ons sent
	touched   bool // some call was sent for it
}

func (m *simMember) uuid() string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", m.name) }

func (m *simMember) answers(now time.Time) bool { return m.on && !now.Before(m.upAt) }

// simOp is one of Incus's own operations (an evacuation or a restore); the task row that
// records it (if the asking process lived to write one) names it.
type simOp struct {
	id     string
	member string
	action string
	end    time.Time
	fails  bool
	done   bool
}

// simChange is one audited change in progress.
type simChange struct {
	machine  string
	action   *audit.Action
	intent   bool // an upstream write began: its intent was committed first
	verified map[string]bool
	staged   []func()
	// The process dies once the intent is committed (before the call is sent), or once
	// the call is sent (before its outcome).
	crashBefore, crashAfter bool
}

type changeKey struct{}

func changeOf(ctx context.Context) *simChange {
	c, _ := ctx.Value(changeKey{}).(*simChange)
	return c
}

type simCall struct {
	kind, member string
	at           time.Time
}

type world struct {
	t        *testing.T
	seed     uint64
	r        *rand.Rand
	now      time.Time
	limits   Limits
	members  []*simMember
	mappings map[string]fencing.Mapping
	row      *Task
	ops      []*simOp
	tasks    []maintenance.Task // every maintenance task row, oldest first
	busy     map[string]int     // rounds another change holds the machine
	// unfinished are the stages whose process died between intent and outcome.
	unfinished map[string]*simChange
	faulty     bool
	incusDown  int
	maasFlaky  bool
	calls      []simCall
	// The audit trail's count of changes that began an upstream write and of their
	// outcomes (the driver's or the reconciler's).
	intents, outcomes int
	// When the task was seen to finish (calls after it are a violation).
	endedAtCall int
	log         []string
	driver      *Driver
	counts      map[string]int
}

func newWorld(t *testing.T, seed uint64, counts map[string]int) *world {
	r := rand.New(rand.NewPCG(seed, 0x1e11))
	w := &world{t: t, seed: seed, r: r, now: t0, mappings: map[string]fencing.Mapping{}, busy: map[string]int{},
		unfinished: map[string]*simChange{}, faulty: true, maasFlaky: r.Float64() < 0.3, endedAtCall: -1, counts: counts,
		limits: Limits{OnlineTimeout: time.Duration(30+r.IntN(60)) * time.Second, Settle: time.Duration(r.IntN(12)) * time.Second}}
	n := 3 + r.IntN(3)
	if r.Float64() < 0.1 {
		n = 2 // two voters: the quorum projection refuses taking either down
	}
	for i := range n {
		m := &simMember{name: fmt.Sprintf("m%d", i+1), voter: i < 3, status: membership.StatusOnline, on: true}
		switch x := r.Float64(); {
		case x < 0.04:
			m.dead = true
		case x < 0.07:
			m.ineffective = true
		case x < 0.09:
			m.noDriver = true
		case x < 0.11:
			m.wrongUUID = true
		}
		w.members = append(w.members, m)
		if r.Float64() < 0.97 {
			mp := fencing.Mapping{Member: m.name, SystemID: "sys-" + m.name, HardwareUUID: m.uuid()}
			if m.wrongUUID {
				mp.HardwareUUID = "deadbeef-0000-4000-8000-000000000000"
			}
			w.mappings[m.name] = mp
		}
	}
	w.driver = w.newDriver()
	return w
}

func (w *world) newDriver() *Driver {
	return &Driver{Store: w, Ports: simPorts(w), Clusters: simClusters{}, Power: w, Maintenance: w, Tasks: w, Auditor: w, Actor: "apelora-worker sim",
		Limits: w.limits, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return w.now }}
}

func (w *world) say(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%s ", w.now.Sub(t0))+fmt.Sprintf(format, args...))
}

func (w *world) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("seed %d at %s: %s", w.seed, w.now.Sub(t0), fmt.Sprintf(format, args...))
}

func (w *world) member(name string) *simMember {
	for _, m := range w.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

func (w *world) bySystemID(id string) *simMember { return w.member(strings.TrimPrefix(id, "sys-")) }

// --- Store -------------------------------------------------------------------------------

func (w *world) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) (err error) {
	if changeOf(ctx) != nil {
		w.fail("a change inside a change")
	}
	a := audit.ActionFrom(ctx)
	if a == nil {
		w.fail("a change outside an audited action")
		return apperr.New(apperr.Internal, "no action")
	}
	if machine != "" && (w.busy[machine] > 0 || w.unfinished[machine] != nil) {
		w.counts["busy"]++
		return apperr.New(apperr.Busy, "machine %s is busy: another change holds it", machine)
	}
	c := &simChange{machine: machine, action: a, verified: map[string]bool{}}
	if w.faulty {
		switch x := w.r.Float64(); {
		case x < 0.03:
			c.crashBefore = true
		case x < 0.08:
			c.crashAfter = true
		}
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); ok && c.intent {
				w.intents++
				w.unfinished[machine] = c
				w.say("the process died in %s of %s (step %v)", a.Name, machine, a.Parameters["step"])
			}
			panic(r)
		}
	}()
	err = fn(context.WithValue(ctx, changeKey{}, c))
	if err == nil {
		for _, f := range c.staged {
			f()
		}
	}
	if c.intent {
		w.intents++
		w.outcomes++
	}
	a.MarkRecorded()
	return err
}

func (w *world) snapshotRow() *Task {
	if w.row == nil {
		return nil
	}
	t := *w.row
	t.Members = slices.Clone(w.row.Members)
	t.StageFor = w.now.Sub(t.StageSince)
	return &t
}

// simCluster is the world's one cluster.
var simCluster = clusters.Cluster{ID: 1, Name: "sim", FromEnvironment: true, Adopted: true}

type simClusters struct{}

func (simClusters) Lookup(context.Context, int64) (clusters.Cluster, error) { return simCluster, nil }
func (simClusters) All() []clusters.Cluster                                 { return []clusters.Cluster{simCluster} }

func simPorts(w *world) clusters.Ports[Incus] {
	return clusters.PortsFunc[Incus](func(context.Context, int64) (Incus, error) { return w, nil })
}

func (w *world) Record(context.Context, string) (*machines.Record, error) { return nil, nil }

func (w *world) Unfinished(ctx context.Context) ([]Task, error) {
	t, _ := w.Active(ctx, simCluster.ID)
	if t == nil {
		return nil, nil
	}
	return []Task{*t}, nil
}

func (w *world) Active(context.Context, int64) (*Task, error) {
	if w.row == nil || !w.row.FinishedAt.IsZero() {
		return nil, nil
	}
	return w.snapshotRow(), nil
}

func (w *world) Task(_ context.Context, id int64) (*Task, error) {
	if w.row == nil || w.row.ID != id {
		return nil, nil
	}
	return w.snapshotRow(), nil
}

func (w *world) Latest(context.Context, int64) (*Task, error) { return w.snapshotRow(), nil }

func (w *world) Insert(_ context.Context, t Task) (int64, error) {
	t.ID, t.StartedAt, t.StageSince = 1, w.now, w.now
	w.row = &t
	return 1, nil
}

// inChange applies f with the change's outcome, or now outside one.
func (w *world) inChange(ctx context.Context, f func()) {
	if c := changeOf(ctx); c != nil {
		c.staged = append(c.staged, f)
		return
	}
	f()
}

func (w *world) SetState(ctx context.Context, id int64, from []State, to State, reason string) (bool, error) {
	ok := w.row != nil && w.row.ID == id && slices.Contains(from, w.row.State)
	w.inChange(ctx, func() {
		if w.row == nil || w.row.ID != id || !slices.Contains(from, w.row.State) {
			return
		}
		w.say("task %s -> %s %s", w.row.State, to, reason)
		w.row.State, w.row.Reason = to, reason
		if to != StateRunning && to != StatePaused {
			w.row.FinishedAt = w.now
			w.endedAtCall = len(w.calls)
		}
	})
	return ok, nil
}

// stageAfter is the stage each stage moves to for the same member.
var stageAfter = map[Stage]Stage{StageEvacuate: StagePowerOff, StagePowerOff: StageConfirmOff, StageConfirmOff: StagePowerOn,
	StagePowerOn: StageWaitOnline, StageWaitOnline: StageRestore}

func (w *world) Advance(ctx context.Context, id int64, position int, stage Stage) (bool, error) {
	ok := w.row != nil && w.row.ID == id && w.row.FinishedAt.IsZero()
	w.inChange(ctx, func() {
		r := w.row
		if r == nil || r.ID != id || !r.FinishedAt.IsZero() {
			return
		}
		// The task only moves forward, one stage at a time.
		valid := position == r.Position && stageAfter[r.Stage] == stage ||
			r.Stage == StageRestore && position == r.Position+1 && (stage == StageEvacuate && position < len(r.Members) || stage == StageDone && position == len(r.Members))
		if !valid {
			w.fail("the task moved from %d %s to %d %s", r.Position, r.Stage, position, stage)
		}
		w.say("task at %d %s", position, stage)
		r.Position, r.Stage, r.StageSince = position, stage, w.now
	})
	return ok, nil
}

func (w *world) Mappings(context.Context, int64) (map[string]fencing.Mapping, error) {
	out := map[string]fencing.Mapping{}
	for k, v := range w.mappings {
		out[k] = v
	}
	return out, nil
}

func (w *world) RecordAudit(_ context.Context, e audit.Event) error {
	w.say("event %s %v %s %s", e.Action, e.Parameters["step"], e.Outcome, e.Error)
	return nil
}

// --- Incus -------------------------------------------------------------------------------

func (w *world) listMembers() []membership.Member {
	var out []membership.Member
	for _, m := range w.members {
		mm := membership.Member{Name: m.name, Status: m.status, FailureDomain: "default", Groups: []string{"default"}}
		if m.voter {
			mm.Roles = []string{quorum.RoleVoter}
		}
		out = append(out, mm)
	}
	return out
}

func (w *world) Members(context.Context) ([]membership.Member, error) {
	if w.incusDown > 0 {
		return nil, apperr.New(apperr.Unavailable, "Incus did not answer")
	}
	return w.listMembers(), nil
}

func (w *world) MemberAnswers(_ context.Context, name string) error {
	// The network drops a request now and then: a member that is up may not answer. Not in
	// a world whose BMCs misread: CONFIRM_OFF trusts a power read that says off and a
	// member that does not answer, and both wrong in the same round would pass a member
	// that was never off (a known limit, two faults at once).
	if m := w.member(name); m != nil && m.answers(w.now) && !(w.faulty && !w.maasFlaky && w.r.Float64() < 0.1) {
		return nil
	}
	return apperr.New(apperr.Unavailable, "Incus answered \"Server isn't ready yet\" for member %s", name)
}

// --- MAAS --------------------------------------------------------------------------------

func (w *world) Machine(ctx context.Context, systemID string) (fencing.MachineFacts, error) {
	m := w.bySystemID(systemID)
	if m == nil {
		return fencing.MachineFacts{}, fencing.ErrMachineNotFound
	}
	if w.faulty && w.maasFlaky && w.r.Float64() < 0.05 {
		return fencing.MachineFacts{}, fmt.Errorf("MAAS did not answer")
	}
	if c := changeOf(ctx); c != nil {
		c.verified[systemID] = true
	}
	return fencing.MachineFacts{SystemID: systemID, HardwareUUID: m.uuid(), PowerType: "ipmi"}, nil
}

func (w *world) QueryPowerState(_ context.Context, systemID string) (string, error) {
	m := w.bySystemID(systemID)
	if w.faulty && w.maasFlaky {
		switch x := w.r.Float64(); {
		case x < 0.3:
			return "", fmt.Errorf("the BMC did not answer")
		case x < 0.35:
			return "off", nil // a BMC that reads wrong: only the member's silence confirms it
		}
	}
	if m.on {
		return "on", nil
	}
	return "off", nil
}

func (w *world) PowerOff(ctx context.Context, systemID string) (bool, error) {
	m := w.bySystemID(systemID)
	c := w.upstream(ctx, "power_off", m.name)
	if c != nil && !c.verified[systemID] {
		w.fail("power_off of %s without the UUID check in its change", m.name)
	}
	if m.noDriver {
		return false, nil
	}
	if !m.ineffective && m.offAt.IsZero() && m.on {
		m.offAt = w.now.Add(time.Duration(w.r.IntN(20)) * time.Second)
	}
	w.sent(c)
	return true, nil
}

func (w *world) PowerOn(ctx context.Context, systemID string) (bool, error) {
	m := w.bySystemID(systemID)
	c := w.upstream(ctx, "power_on", m.name)
	if c != nil && !c.verified[systemID] {
		w.fail("power_on of %s without the UUID check in its change", m.name)
	}
	if m.noDriver {
		return false, nil
	}
	m.poweredOn++
	if !m.on {
		m.on, m.upAt = true, w.now.Add(time.Duration(3+w.r.IntN(40))*time.Second)
		if m.dead {
			m.upAt = w.now.Add(1000 * time.Hour)
		}
	}
	w.sent(c)
	return true, nil
}

// --- maintenance (the service's behaviour as the driver meets it) -------------------------

func (w *world) runningOp(member string) *simOp {
	for _, op := range w.ops {
		if op.member == member && !op.done {
			return op
		}
	}
	return nil
}

func (w *world) runningTask(member string) bool {
	for _, t := range w.tasks {
		if t.Machine == member && t.Running() {
			return true
		}
	}
	return false
}

func (w *world) startOp(ctx context.Context, c *simChange, member, action string) {
	op := &simOp{id: fmt.Sprintf("op-%d", len(w.ops)+1), member: member, action: action,
		end: w.now.Add(time.Duration(1+w.r.IntN(10)) * time.Second), fails: w.faulty && w.r.Float64() < 0.04}
	w.ops = append(w.ops, op)
	// The task row is written in the change's transaction, after the call.
	w.inChange(ctx, func() {
		w.tasks = append(w.tasks, maintenance.Task{ID: int64(len(w.tasks) + 1), Machine: member, Action: action, IncusOperation: op.id, StartedAt: w.now})
	})
	w.sent(c)
}

func (w *world) Evacuate(ctx context.Context, _, name, mode string) (*maintenance.Effect, error) {
	err := w.Audited(ctx, name, func(ctx context.Context) error {
		m := w.member(name)
		switch {
		case m.status == membership.StatusEvacuated:
			return apperr.New(apperr.FailedPrecondition, "%q is already evacuated", name)
		case m.status == membership.StatusOffline:
			return apperr.New(apperr.FailedPrecondition, "%q is offline", name)
		case w.runningTask(name) || w.runningOp(name) != nil:
			return apperr.New(apperr.FailedPrecondition, "%q: an evacuation or restore is still running", name)
		}
		c := w.upstream(ctx, "evacuate", name)
		m.status, m.wentOff = membership.StatusEvacuated, false
		w.startOp(ctx, c, name, maintenance.Evacuate)
		return nil
	})
	return &maintenance.Effect{Member: name, Action: maintenance.Evacuate}, err
}

func (w *world) Restore(ctx context.Context, _, name string) (*maintenance.Effect, error) {
	err := w.Audited(ctx, name, func(ctx context.Context) error {
		m := w.member(name)
		switch {
		case m.status != membership.StatusEvacuated:
			return apperr.New(apperr.FailedPrecondition, "%q is not evacuated", name)
		case w.runningTask(name) || w.runningOp(name) != nil:
			return apperr.New(apperr.FailedPrecondition, "%q: an evacuation or restore is still running", name)
		case !m.answers(w.now):
			return apperr.New(apperr.Unavailable, "%q stays evacuated: the admission checks could not be completed", name)
		case w.faulty && w.r.Float64() < 0.02:
			return apperr.New(apperr.FailedPrecondition, "%q stays evacuated: the admission checks failed: storage-pools", name)
		}
		c := w.upstream(ctx, "restore", name)
		w.startOp(ctx, c, name, maintenance.Restore)
		return nil
	})
	return &maintenance.Effect{Member: name, Action: maintenance.Restore}, err
}

func (w *world) ClusterTasks(_ context.Context, _ int64, machine string, limit int) ([]maintenance.Task, error) {
	var out []maintenance.Task
	for i := len(w.tasks) - 1; i >= 0 && len(out) < limit; i-- {
		if w.tasks[i].Machine == machine {
			out = append(out, w.tasks[i])
		}
	}
	return out, nil
}

// --- calls sent upstream ------------------------------------------------------------------

// upstream is a call about to be sent: its change commits its intent first (or dies
// there), and the call must be one the task's row allows now.
func (w *world) upstream(ctx context.Context, kind, member string) *simChange {
	c := changeOf(ctx)
	if c == nil {
		w.fail("%s of %s sent outside a change: no intent before it", kind, member)
		return nil
	}
	c.intent = true
	if c.crashBefore {
		w.counts["crash before the call"]++
		panic(crash{})
	}
	w.calls = append(w.calls, simCall{kind: kind, member: member, at: w.now})
	w.say("%s %s", kind, member)
	m := w.member(member)
	m.touched = true
	r := w.row
	want := map[string]Stage{"evacuate": StageEvacuate, "power_off": StagePowerOff, "power_on": StagePowerOn, "restore": StageRestore}[kind]
	switch {
	case r == nil || r.State != StateRunning:
		w.fail("%s of %s sent while the task is not running", kind, member)
	case r.Current() != member || r.Stage != want:
		w.fail("%s of %s sent while the task is at %s %s", kind, member, r.Current(), r.Stage)
	}
	switch kind {
	case "evacuate":
		for _, o := range w.members {
			if o != m && (o.status != membership.StatusOnline || !o.on) {
				w.fail("evacuate %s while %s is %s (power on: %v)", member, o.name, o.status, o.on)
			}
		}
	case "power_off":
		if m.status != membership.StatusEvacuated {
			w.fail("power_off of %s, which Incus lists %s", member, m.status)
		}
		if m.wrongUUID {
			w.fail("power_off of %s, whose mapping names another machine", member)
		}
	case "power_on":
		if !m.wentOff {
			w.fail("power_on of %s, never seen off since its evacuation", member)
		}
	case "restore":
		if !m.answers(w.now) || m.status != membership.StatusEvacuated {
			w.fail("restore of %s, not answering or not evacuated (%s)", member, m.status)
		}
		// Incus refuses a restore until the other members' heartbeat reached the member.
		if up := w.now.Sub(m.upAt); up < w.limits.Settle {
			w.fail("restore of %s, which has answered for %s only (settle %s)", member, up, w.limits.Settle)
		}
	}
	return c
}

// sent: the call reached Incus or MAAS; the process may die before its outcome.
func (w *world) sent(c *simChange) {
	if c != nil && c.crashAfter {
		w.counts["crash after the call"]++
		panic(crash{})
	}
}

// --- the world moves ----------------------------------------------------------------------

func (w *world) tick() {
	w.now = w.now.Add(time.Second)
	for _, m := range w.members {
		if !m.offAt.IsZero() && !w.now.Before(m.offAt) {
			m.on, m.offAt, m.wentOff = false, time.Time{}, true
			m.cycled++
		}
	}
	// Incus ends its operations; the follower records the end of those with a row.
	for _, op := range w.ops {
		if op.done || w.now.Before(op.end) {
			continue
		}
		op.done = true
		m := w.member(op.member)
		switch {
		case op.action == maintenance.Evacuate && op.fails && w.r.Float64() < 0.5:
			m.status = membership.StatusOnline
		case op.action == maintenance.Restore && !op.fails:
			m.status = membership.StatusOnline
		}
		for i := range w.tasks {
			if t := &w.tasks[i]; t.IncusOperation == op.id && t.Running() {
				t.FinishedAt, t.Outcome = w.now, maintenance.KindSucceeded
				if op.fails {
					t.Outcome, t.Message = maintenance.KindFailed, "Incus: the operation failed"
				}
			}
		}
	}
	for k := range w.busy {
		if w.busy[k]--; w.busy[k] <= 0 {
			delete(w.busy, k)
		}
	}
	if w.incusDown > 0 {
		w.incusDown--
	}
	if w.faulty {
		r := w.r
		if r.Float64() < 0.03 {
			w.busy[w.members[r.IntN(len(w.members))].name] = 1 + r.IntN(5)
		}
		if r.Float64() < 0.02 {
			w.incusDown = 1 + r.IntN(3)
		}
		// Another member's daemon stops for a while (not the machine: it stays on).
		if m := w.members[r.IntN(len(w.members))]; r.Float64() < 0.01 && m.status == membership.StatusOnline && (w.row == nil || w.row.Current() != m.name) {
			m.status = membership.StatusOffline
			w.say("%s is offline", m.name)
		}
	}
	for _, m := range w.members {
		if m.status == membership.StatusOffline && (!w.faulty || w.r.Float64() < 0.1) {
			m.status = membership.StatusOnline
		}
	}
	if w.faulty {
		r := w.r
		if w.row != nil && r.Float64() < 0.002 {
			if cur := w.row.Current(); cur != "" {
				delete(w.mappings, cur)
				w.say("the mapping of %s was removed", cur)
			}
		}
		if w.row != nil && w.row.FinishedAt.IsZero() {
			switch x := r.Float64(); {
			case x < 0.0005:
				w.admin(Cancel)
			case x < 0.01 && w.row.State == StateRunning:
				w.admin(Pause)
			case x < 0.10 && w.row.State == StatePaused:
				w.admin(Resume)
			}
		}
		if r.Float64() < 0.02 {
			w.counts["leader change"]++
			w.driver = w.newDriver()
		}
	} else if w.row != nil && w.row.State == StatePaused {
		w.admin(Resume)
	}
	if len(w.unfinished) > 0 && (!w.faulty || w.r.Float64() < 0.3) {
		w.reconcile()
	}
}

func (w *world) admin(verb Verb) {
	ctx := audit.WithAction(context.Background(), &audit.Action{Actor: "ada", Name: string(verb) + "RollingReboot"})
	s := &Service{Ports: simPorts(w), Clusters: simClusters{}, Store: w}
	if _, err := s.move(ctx, "1", verb); err != nil {
		w.fail("%s: %v", verb, err)
	}
	w.counts[string(verb)]++
}

// reconcile judges every stage whose process died between its intent and its outcome, as
// the change reconciler does: StageJudge for the power stages, maintenance.Happened (the
// maintenance judge's rule) for evacuations and restores.
func (w *world) reconcile() {
	names := make([]string, 0, len(w.unfinished))
	for n := range w.unfinished {
		names = append(names, n)
	}
	sort.Strings(names)
	ctx := context.Background()
	for _, n := range names {
		c := w.unfinished[n]
		st := changes.Step{Action: c.action.Name, Machine: n, Parameters: c.action.Parameters}
		j := StageJudge{Store: w,
			Maintenance: func(_ context.Context, st changes.Step, action string) (changes.Verdict, error) {
				v := maintenance.Happened(action, st.Machine, find(w.listMembers(), st.Machine))
				if v.Outcome == audit.Succeeded {
					op := w.runningOp(st.Machine)
					id := "not recorded"
					if op != nil {
						id = op.id
					}
					t := maintenance.Task{ID: int64(len(w.tasks) + 1), Machine: st.Machine, Action: action, IncusOperation: id, StartedAt: w.now}
					if op == nil {
						t.FinishedAt, t.Outcome = w.now, maintenance.KindSucceeded
					}
					w.tasks = append(w.tasks, t)
				}
				return v, nil
			},
			PowerState: func(ctx context.Context, systemID string) (string, error) {
				m := w.bySystemID(systemID)
				if m.on {
					return "on", nil
				}
				return "off", nil
			}}
		v, err := j.Judge(ctx, st)
		if err != nil {
			w.fail("judge %s: %v", n, err)
			continue
		}
		w.outcomes++
		w.counts["reconciled "+string(v.Outcome)]++
		w.say("reconciled %v of %s: %s (%s)", st.Parameters["step"], n, v.Outcome, v.Found)
		delete(w.unfinished, n)
	}
}

// round is one round of the driving process, which may die in it.
func (w *world) round() {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			w.driver = w.newDriver() // another process leads now
		}
	}()
	if err := w.driver.Round(context.Background()); err != nil {
		w.say("round: %v", err)
	}
}

// invariants hold after every round.
func (w *world) invariants() {
	var down []string
	for _, m := range w.members {
		if m.status == membership.StatusEvacuated || !m.on {
			down = append(down, m.name)
		}
	}
	if len(down) > 1 {
		w.fail("more than one member down at once: %v", down)
	}
	if w.endedAtCall >= 0 && len(w.calls) > w.endedAtCall {
		w.fail("%s of %s sent after the task ended", w.calls[w.endedAtCall].kind, w.calls[w.endedAtCall].member)
	}
}

// run plays the history: start, a faulty phase, then calm until the task ends.
func (w *world) run() {
	r := w.r
	names := make([]string, len(w.members))
	for i, m := range w.members {
		names[i] = m.name
	}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:1+r.IntN(len(names))]
	ctx := audit.WithAction(context.Background(), &audit.Action{Actor: "ada", Name: "startRollingReboot"})
	if _, err := (&Service{Ports: simPorts(w), Clusters: simClusters{}, Store: w}).Start(ctx, "", names); err != nil {
		if apperr.CodeOf(err) != apperr.FailedPrecondition {
			w.fail("start: %v", err)
		}
		w.counts["refused at start"]++
		return
	}
	faultyFor := 30 + r.IntN(600)
	for i := 0; i < faultyFor+20000; i++ {
		if i == faultyFor {
			w.faulty = false
		}
		w.tick()
		w.round()
		w.invariants()
		if !w.row.FinishedAt.IsZero() {
			break
		}
	}
	if w.row.FinishedAt.IsZero() {
		w.fail("the task did not end %s after the world calmed down: %s %d %s", 20000*time.Second, w.row.State, w.row.Position, w.row.Stage)
		return
	}
	for len(w.unfinished) > 0 {
		w.reconcile()
	}
	w.check()
}

// check is what must hold once the task ended.
func (w *world) check() {
	r := w.row
	if w.intents != w.outcomes {
		w.fail("%d changes sent something upstream, %d outcomes recorded", w.intents, w.outcomes)
	}
	cur := r.Current()
	switch r.State {
	case StateSucceeded:
		w.counts["SUCCEEDED"]++
		for _, n := range r.Members {
			m := w.member(n)
			if m.status == membership.StatusEvacuated || !m.on || m.cycled == 0 || m.poweredOn == 0 {
				w.fail("succeeded, but %s is %s, power on %v, cycled %d, powered on %d", n, m.status, m.on, m.cycled, m.poweredOn)
			}
		}
	case StateFailed:
		w.counts["FAILED/"+string(r.Stage)]++
		if !strings.HasPrefix(r.Reason, fmt.Sprintf("%s (stage %s): ", cur, r.Stage)) {
			w.fail("a failure's reason names the member and the stage: %q", r.Reason)
		}
		if strings.Contains(r.Reason, "busy") {
			w.fail("a busy member failed the task: %q", r.Reason)
		}
		if r.Stage != StageEvacuate && w.member(cur).status != membership.StatusEvacuated {
			w.fail("failed at %s but %s is %s, not left evacuated", r.Stage, cur, w.member(cur).status)
		}
	case StateCancelled:
		w.counts["CANCELLED"]++
	default:
		w.fail("ended %s", r.State)
	}
	// The members before the one it ended at were rebooted and restored; those after it
	// were never touched.
	for i, n := range r.Members {
		m := w.member(n)
		switch {
		case i < r.Position && (m.status == membership.StatusEvacuated || m.cycled == 0):
			w.fail("%s was passed but is %s (cycled %d)", n, m.status, m.cycled)
		case i > r.Position && m.touched:
			w.fail("%s, after the member the task ended at, was touched", n)
		}
	}
}

func TestPropertyRollingRebootHistories(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 100
	}
	counts := map[string]int{}
	for i := range n {
		w := newWorld(t, uint64(i), counts)
		w.run()
		if t.Failed() {
			tail := w.log
			if len(tail) > 80 {
				tail = tail[len(tail)-80:]
			}
			t.Fatalf("history seed %d (limits %+v) failed; its last events:\n%s", w.seed, w.limits, strings.Join(tail, "\n"))
		}
	}
	t.Logf("over %d histories: %v", n, counts)
	// The generator reaches every ending and every fault.
	for _, k := range []string{"SUCCEEDED", "CANCELLED", "refused at start", "FAILED/EVACUATE", "FAILED/POWER_OFF", "FAILED/CONFIRM_OFF",
		"FAILED/POWER_ON", "FAILED/WAIT_ONLINE", "FAILED/RESTORE", "crash before the call", "crash after the call",
		"reconciled SUCCEEDED", "reconciled FAILED", "busy", "leader change", "pause", "resume", "cancel"} {
		if counts[k] == 0 {
			t.Errorf("no history reached %q", k)
		}
	}
}
