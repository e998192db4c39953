package rolling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/leader"
	"github.com/apelora/fabric/internal/logging"
)

// StepAction is the audit action of every step a driver takes: one event per step, with
// the operation, the member and the step in its parameters.
const StepAction = "rollingRebootStep"

// Power is the MAAS side of a power cycle: fencing's reads and power-off, and power-on.
type Power interface {
	fencing.MAAS
	// PowerOn asks MAAS to power the machine on; sent is false when MAAS says it cannot.
	PowerOn(ctx context.Context, systemID string) (sent bool, err error)
}

// Maintenance evacuates and restores (maintenance.Service).
type Maintenance interface {
	Evacuate(ctx context.Context, name, mode string) (*maintenance.Plan, error)
	Restore(ctx context.Context, name string) (*maintenance.Plan, error)
}

// MemberOperations reads the evacuations and restores maintenance recorded.
type MemberOperations interface {
	Operations(ctx context.Context, machine string, limit int) ([]maintenance.Operation, error)
}

// Auditor writes an audit event on its own, for a step that failed outside a change.
type Auditor interface {
	RecordAudit(ctx context.Context, e audit.Event) error
}

// Leadership hands out the right to drive: a lease (one process at a time).
type Leadership interface {
	TryLead(ctx context.Context) (leader.Lease, error)
}

// Observer is told, each round, of the operation driven (nil when none is running), for
// the metric of how long the member has been in its step.
type Observer interface {
	RollingStep(op *Operation)
}

// Driver takes the running operation's steps, from its row, one at a time. Every step is
// safe to take again (it looks at Incus, MAAS and the recorded member operations first),
// so a driver that died mid-step, or a new leader, simply carries on.
type Driver struct {
	Store       Store
	Incus       Incus
	Power       Power
	Maintenance Maintenance
	Operations  MemberOperations
	Auditor     Auditor
	Leadership  Leadership
	// Lease is the driver's lease length (leader.Options.Lease).
	Lease time.Duration
	// Actor names the driver in audit events ("apelora-worker NAME").
	Actor string
	// OnlineTimeout bounds the wait for a member to go down after its power-off and to
	// come back after its power-on.
	OnlineTimeout time.Duration
	// Settle is how long a member must have answered before it counts as back: Incus's
	// other members judge it by its heartbeat, which they refresh every half
	// cluster.offline_threshold; until then a restore is refused ("Target cluster member
	// is offline", seen on 6.0.4), while its status still says Evacuated.
	Settle   time.Duration
	Poll     time.Duration
	Log      *slog.Logger
	Observer Observer

	// answering is when the member in WAIT_ONLINE was first seen answering (this process's
	// clock: a new leader starts the settle period again, which only waits longer).
	answering struct {
		key   string
		since time.Time
	}
}

// Run drives while this process leads, and stands by otherwise, until ctx ends.
func (d *Driver) Run(ctx context.Context) {
	leader.Run(ctx, d.Leadership.TryLead, d.lead, leader.Options{
		Retry: d.Poll, Lease: d.Lease, Log: d.Log, Attrs: []any{"actor", d.Actor},
		Unreachable: "cannot reach the database to take the rolling reboot lease; retrying",
		Standby:     "another apelora-worker drives rolling reboots: standing by",
	})
}

func (d *Driver) lead(ctx context.Context, h leader.Lease) {
	ctx = context.WithValue(ctx, leaseKey{}, h)
	for ctx.Err() == nil {
		if err := h.Check(ctx); err != nil {
			d.Log.Warn("lost the rolling reboot lease", "error", err)
			return
		}
		if err := d.Round(ctx); err != nil && ctx.Err() == nil {
			d.Log.Warn("rolling reboot round", "error", err)
		}
		if leader.Sleep(ctx, d.Poll) != nil {
			return
		}
	}
}

// leaseKey carries the driver's lease to the power steps (see stillLeading).
type leaseKey struct{}

// stillLeading asks the database, right before a power command, whether this process's
// lease is still the one that leads: a worker paused past its lease (or cut off from the
// database) sends nothing, as the fence worker does. Rounds run outside lead (tests) have
// no lease to check.
func stillLeading(ctx context.Context) error {
	if h, ok := ctx.Value(leaseKey{}).(leader.Lease); ok {
		return h.Check(ctx)
	}
	return nil
}

// Round takes the running operation's current step, or waits in it.
func (d *Driver) Round(ctx context.Context) error {
	op, err := d.Store.Active(ctx)
	if err != nil {
		return err
	}
	if d.Observer != nil {
		if op != nil && op.State == StateRunning {
			d.Observer.RollingStep(op)
		} else {
			d.Observer.RollingStep(nil)
		}
	}
	if op == nil || op.State != StateRunning {
		return nil
	}
	member := op.Current()
	if member == "" {
		return d.act(ctx, op, "", StepDone, func(ctx context.Context) error {
			return d.Store.Audited(ctx, "", func(ctx context.Context) error {
				_, err := d.Store.SetState(ctx, op.ID, []State{StateRunning}, StateSucceeded, "")
				return err
			})
		})
	}
	members, err := d.Incus.Members(ctx)
	if err != nil {
		return err
	}
	m := find(members, member)
	if m == nil {
		return d.fail(ctx, op, member, apperr.New(apperr.NotFound, "%s is no longer a member of this Incus cluster: the rolling reboot stops here", apperr.Quote(member)))
	}
	switch op.Step {
	case StepEvacuate:
		return d.evacuate(ctx, op, members, m)
	case StepPowerOff:
		return d.powerOff(ctx, op, m)
	case StepConfirmOff:
		return d.confirmOff(ctx, op, m)
	case StepPowerOn:
		return d.powerOn(ctx, op, m)
	case StepWaitOnline:
		return d.waitOnline(ctx, op, m)
	case StepRestore:
		return d.restore(ctx, op, m)
	}
	return fmt.Errorf("rolling reboot %d is at an unknown step %q", op.ID, op.Step)
}

func (d *Driver) evacuate(ctx context.Context, op *Operation, members []membership.Member, m *membership.Member) error {
	last, err := d.lastOperation(ctx, op, m.Name, maintenance.Evacuate)
	if err != nil {
		return err
	}
	switch {
	case last != nil && last.Running():
		return nil // the follower reports its end
	case last != nil && last.Outcome == maintenance.KindFailed:
		return d.fail(ctx, op, m.Name, fmt.Errorf("the evacuation of %s failed: %s", m.Name, last.Message))
	case m.Evacuated():
		return d.advance(ctx, op, op.Position, StepPowerOff)
	case last != nil:
		return d.fail(ctx, op, m.Name, fmt.Errorf("the evacuation of %s ended (%s) but Incus lists it %s, not Evacuated", m.Name, last.Outcome, m.Status))
	}
	if err := Check(members, m.Name); err != nil {
		return d.failStep(ctx, op, m.Name, StepEvacuate, err)
	}
	err = d.act(ctx, op, m.Name, StepEvacuate, func(ctx context.Context) error {
		_, err := d.Maintenance.Evacuate(ctx, m.Name, "")
		return err
	})
	if err != nil {
		return d.failUnlessBusy(ctx, op, m.Name, err)
	}
	return nil
}

func (d *Driver) powerOff(ctx context.Context, op *Operation, m *membership.Member) error {
	mp, err := d.mapping(ctx, op, m.Name, StepPowerOff)
	if mp == nil {
		return err
	}
	if err := stillLeading(ctx); err != nil {
		return err // not this process's to act on any more: the next leader takes this step
	}
	err = d.act(ctx, op, m.Name, StepPowerOff, func(ctx context.Context) error {
		return d.Store.Audited(ctx, m.Name, func(ctx context.Context) error {
			if err := d.verify(ctx, mp); err != nil {
				return err
			}
			a := audit.ActionFrom(ctx)
			// Taken again after a restart, the power-off may already have happened.
			if state, err := d.Power.QueryPowerState(ctx, mp.SystemID); err == nil && state == "off" {
				a.Detail("powerState", state)
			} else {
				sent, err := d.Power.PowerOff(ctx, mp.SystemID)
				if err != nil {
					return fmt.Errorf("ask MAAS to power off machine %s: %w", mp.SystemID, err)
				}
				if !sent {
					return apperr.New(apperr.FailedPrecondition, "MAAS cannot power off machine %s (no power driver): %s stays evacuated", mp.SystemID, m.Name)
				}
			}
			_, err := d.Store.Advance(ctx, op.ID, op.Position, StepConfirmOff)
			return err
		})
	})
	if err != nil {
		return d.failUnlessBusy(ctx, op, m.Name, err)
	}
	return nil
}

// confirmOff waits for a live power read saying off and for the member to stop
// answering: only then is it known to be down, and its answering again meaningful.
func (d *Driver) confirmOff(ctx context.Context, op *Operation, m *membership.Member) error {
	mp, err := d.mapping(ctx, op, m.Name, StepConfirmOff)
	if mp == nil {
		return err
	}
	state, qerr := d.Power.QueryPowerState(ctx, mp.SystemID)
	var silent error
	if qerr == nil && state == "off" {
		silent = d.Incus.MemberAnswers(ctx, m.Name)
	}
	if qerr == nil && state == "off" && silent != nil {
		err := d.act(ctx, op, m.Name, StepConfirmOff, func(ctx context.Context) error {
			return d.Store.Audited(ctx, m.Name, func(ctx context.Context) error {
				if err := d.verify(ctx, mp); err != nil {
					return err
				}
				a := audit.ActionFrom(ctx)
				a.Detail("powerState", state)
				a.Detail("memberAnswers", false)
				a.Detail("seconds", op.StepFor.Seconds())
				_, err := d.Store.Advance(ctx, op.ID, op.Position, StepPowerOn)
				return err
			})
		})
		if err != nil {
			return d.failUnlessBusy(ctx, op, m.Name, err)
		}
		return nil
	}
	if op.StepFor > d.OnlineTimeout {
		seen := state
		if qerr != nil {
			seen = "unreadable (" + qerr.Error() + ")"
		}
		answers := "does not answer"
		if state == "off" && silent == nil {
			answers = "still answers"
		}
		return d.failStep(ctx, op, m.Name, StepConfirmOff, apperr.New(apperr.FailedPrecondition,
			"%s was not seen down within %v of its power-off (APELORA_ROLLING_ONLINE_TIMEOUT): MAAS reads its power %s and it %s; it stays evacuated: check the machine, then power it on and restore it",
			m.Name, d.OnlineTimeout, seen, answers))
	}
	return nil
}

func (d *Driver) powerOn(ctx context.Context, op *Operation, m *membership.Member) error {
	mp, err := d.mapping(ctx, op, m.Name, StepPowerOn)
	if mp == nil {
		return err
	}
	if err := stillLeading(ctx); err != nil {
		return err // not this process's to act on any more: the next leader takes this step
	}
	err = d.act(ctx, op, m.Name, StepPowerOn, func(ctx context.Context) error {
		return d.Store.Audited(ctx, m.Name, func(ctx context.Context) error {
			if err := d.verify(ctx, mp); err != nil {
				return err
			}
			sent, err := d.Power.PowerOn(ctx, mp.SystemID)
			if err != nil {
				return fmt.Errorf("ask MAAS to power on machine %s: %w", mp.SystemID, err)
			}
			if !sent {
				return apperr.New(apperr.FailedPrecondition, "MAAS cannot power on machine %s (no power driver): %s stays evacuated and off; power it on by hand, then restore it", mp.SystemID, m.Name)
			}
			_, err = d.Store.Advance(ctx, op.ID, op.Position, StepWaitOnline)
			return err
		})
	})
	if err != nil {
		return d.failUnlessBusy(ctx, op, m.Name, err)
	}
	return nil
}

// waitOnline waits until the member answers again and Incus lists it (Evacuated: it is
// still in maintenance; or Online).
func (d *Driver) waitOnline(ctx context.Context, op *Operation, m *membership.Member) error {
	up := m.Status != membership.StatusOffline && d.Incus.MemberAnswers(ctx, m.Name) == nil
	key := fmt.Sprintf("%d/%d", op.ID, op.Position)
	switch {
	case !up:
		d.answering.key = ""
	case d.answering.key != key:
		d.answering.key, d.answering.since = key, time.Now()
	}
	if up && time.Since(d.answering.since) >= d.Settle {
		err := d.act(ctx, op, m.Name, StepWaitOnline, func(ctx context.Context) error {
			return d.Store.Audited(ctx, m.Name, func(ctx context.Context) error {
				a := audit.ActionFrom(ctx)
				a.Detail("memberStatus", string(m.Status))
				a.Detail("seconds", op.StepFor.Seconds())
				a.Detail("answeringSeconds", time.Since(d.answering.since).Seconds())
				_, err := d.Store.Advance(ctx, op.ID, op.Position, StepRestore)
				return err
			})
		})
		if err != nil {
			return d.failUnlessBusy(ctx, op, m.Name, err)
		}
		return nil
	}
	if op.StepFor > d.OnlineTimeout {
		return d.failStep(ctx, op, m.Name, StepWaitOnline, apperr.New(apperr.FailedPrecondition,
			"%s did not come back within %v of its power-on (APELORA_ROLLING_ONLINE_TIMEOUT): it does not answer (Incus lists it %s); it stays evacuated: check the machine's console in MAAS, then restore it (restoreMember) once it is up",
			m.Name, d.OnlineTimeout, m.Status))
	}
	return nil
}

func (d *Driver) restore(ctx context.Context, op *Operation, m *membership.Member) error {
	last, err := d.lastOperation(ctx, op, m.Name, maintenance.Restore)
	if err != nil {
		return err
	}
	switch {
	case last != nil && last.Running():
		return nil
	case last != nil && last.Outcome == maintenance.KindFailed:
		return d.fail(ctx, op, m.Name, fmt.Errorf("the restore of %s failed: %s", m.Name, last.Message))
	case !m.Evacuated() && m.Status != membership.StatusOffline:
		return d.advance(ctx, op, op.Position+1, StepEvacuate)
	case last != nil:
		return d.fail(ctx, op, m.Name, fmt.Errorf("the restore of %s ended (%s) but Incus lists it %s", m.Name, last.Outcome, m.Status))
	}
	// The member must answer ready itself (its own API, as the admission checks ask it):
	// one back from a power cycle may answer "Server isn't ready yet" for a while, and
	// the checks would fail on it. Wait within the step's bound.
	if err := d.Incus.MemberAnswers(ctx, m.Name); err != nil {
		return d.waitOrFail(ctx, op, m.Name, err)
	}
	err = d.act(ctx, op, m.Name, StepRestore, func(ctx context.Context) error {
		_, err := d.Maintenance.Restore(ctx, m.Name)
		return err
	})
	if apperr.CodeOf(err) == apperr.Unavailable {
		// Checks that could not be completed (a read did not answer): audited as that
		// attempt's failure, and tried again next round within the step's bound.
		return d.waitOrFail(ctx, op, m.Name, err)
	}
	if err != nil {
		return d.failUnlessBusy(ctx, op, m.Name, err)
	}
	return nil
}

// waitOrFail leaves the member in RESTORE for another round while the step is within its
// bound (APELORA_ROLLING_ONLINE_TIMEOUT), and stops the operation after it.
func (d *Driver) waitOrFail(ctx context.Context, op *Operation, member string, cause error) error {
	if op.StepFor <= d.OnlineTimeout {
		d.Log.Info("rolling reboot: waiting for the member to be ready before restoring it", "member", member, "reason", apperr.PublicMessage(cause))
		return nil
	}
	return d.failStep(ctx, op, member, StepRestore, apperr.New(apperr.FailedPrecondition,
		"%s was not ready to restore within %v (APELORA_ROLLING_ONLINE_TIMEOUT): %s; it stays evacuated: check it, then restore it once it is up",
		member, d.OnlineTimeout, apperr.PublicMessage(cause)))
}

// lastOperation is the member's latest evacuation or restore (action) started since the
// operation entered its step, nil for none.
func (d *Driver) lastOperation(ctx context.Context, op *Operation, member, action string) (*maintenance.Operation, error) {
	ops, err := d.Operations.Operations(ctx, member, 1)
	if err != nil || len(ops) == 0 {
		return nil, err
	}
	if ops[0].Action != action || ops[0].StartedAt.Before(op.StepSince) {
		return nil, nil
	}
	return &ops[0], nil
}

func (d *Driver) mapping(ctx context.Context, op *Operation, member string, step Step) (*fencing.Mapping, error) {
	all, err := d.Store.Mappings(ctx)
	if err != nil {
		return nil, err
	}
	mp, ok := all[member]
	if !ok {
		return nil, d.failStep(ctx, op, member, step, apperr.New(apperr.FailedPrecondition,
			"%s has no fence mapping any more, so Apelora does not know which MAAS machine powers it; it stays evacuated: set the mapping, then power it on and restore it", apperr.Quote(member)))
	}
	return &mp, nil
}

// verify is fencing's hardware UUID check, before any power read or command.
func (d *Driver) verify(ctx context.Context, mp *fencing.Mapping) error {
	if _, reason, msg := fencing.Verify(ctx, d.Power, mp.SystemID, mp.HardwareUUID); reason != fencing.ReasonNone {
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("reason", string(reason))
		}
		return apperr.New(apperr.FailedPrecondition, "%s", msg)
	}
	return nil
}

// act runs one step under an audit action of its own, so that each step is exactly one
// audit event: the change's, or, when the step failed before one was written, its own.
func (d *Driver) act(ctx context.Context, op *Operation, member string, step Step, fn func(ctx context.Context) error) error {
	rid := logging.NewRequestID()
	a := &audit.Action{Actor: d.Actor, Name: StepAction, Machine: member, RequestID: rid,
		Parameters: map[string]any{"rollingReboot": op.ID, "member": member, "step": string(step)}}
	err := fn(audit.WithAction(logging.WithRequestID(ctx, rid), a))
	if a.Recorded() || apperr.Is(err, apperr.Busy) {
		// BUSY: nothing was tried (another change holds the member, or a step of it awaits
		// its outcome from the reconciler); the next round takes the step again.
		return err
	}
	outcome, msg := audit.Succeeded, ""
	if err != nil {
		outcome, msg = audit.Failed, apperr.PublicMessage(err)
	}
	if rerr := d.Auditor.RecordAudit(context.WithoutCancel(ctx), a.Event(outcome, msg)); rerr != nil && err == nil {
		err = rerr
	}
	d.Log.Info("rolling reboot step", "rolling_reboot", op.ID, "member", member, "step", step, "error", err)
	return err
}

// failUnlessBusy stops the operation (fail), unless the member was only busy: another
// change holds it, or a step of it awaits its outcome from the change reconciler (a
// driver killed in the middle of a power command); the next round takes the step again.
func (d *Driver) failUnlessBusy(ctx context.Context, op *Operation, member string, cause error) error {
	if apperr.Is(cause, apperr.Busy) {
		d.Log.Info("rolling reboot waits: the member is busy", "rolling_reboot", op.ID, "member", member, "step", op.Step, "reason", apperr.PublicMessage(cause))
		return nil
	}
	return d.fail(ctx, op, member, cause)
}

// failStep records the step's refusal as its audit event, then stops the operation.
func (d *Driver) failStep(ctx context.Context, op *Operation, member string, step Step, cause error) error {
	_ = d.act(ctx, op, member, step, func(context.Context) error { return cause })
	return d.fail(ctx, op, member, cause)
}

// fail stops the operation with the reason; the member stays as it is (evacuated once its
// evacuation was done).
func (d *Driver) fail(ctx context.Context, op *Operation, member string, cause error) error {
	var ae *apperr.Error
	reason := cause.Error()
	if errors.As(cause, &ae) {
		reason = apperr.PublicMessage(cause)
	}
	reason = fmt.Sprintf("%s (step %s): %s", member, op.Step, reason)
	if _, err := d.Store.SetState(ctx, op.ID, []State{StateRunning}, StateFailed, reason); err != nil {
		return err
	}
	d.Log.Warn("rolling reboot stopped", "rolling_reboot", op.ID, "member", member, "step", op.Step, "reason", reason)
	return nil
}

// advance moves on without an audit event of its own: the step that made it so (an
// evacuation or restore the follower saw end) has one.
func (d *Driver) advance(ctx context.Context, op *Operation, position int, step Step) error {
	if position >= len(op.Members) {
		step = StepDone
	}
	_, err := d.Store.Advance(ctx, op.ID, position, step)
	return err
}

func find(members []membership.Member, name string) *membership.Member {
	for i := range members {
		if members[i].Name == name {
			return &members[i]
		}
	}
	return nil
}
