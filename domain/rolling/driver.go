package rolling

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/leader"
	"github.com/apelora/fabric/internal/logging"
)

// StageAction is the audit action of every stage a driver takes: one event per stage
// (an intent and its outcome for a stage sent to Incus or MAAS), with the task, the
// member and the stage in its parameters ("rollingReboot", "member", "step").
const StageAction = "rollingRebootStep"

// Power is the MAAS side of a power cycle: fencing's reads and power-off, and power-on.
type Power interface {
	fencing.MAAS
	// PowerOn asks MAAS to power the machine on; sent is false when MAAS says it cannot.
	PowerOn(ctx context.Context, systemID string) (sent bool, err error)
}

// Maintenance evacuates and restores (maintenance.Service), in the cluster named.
type Maintenance interface {
	Evacuate(ctx context.Context, cluster, name, mode string) (*maintenance.Effect, error)
	Restore(ctx context.Context, cluster, name string) (*maintenance.Effect, error)
}

// MaintenanceTasks reads the evacuations and restores maintenance recorded of a
// cluster's member, newest first.
type MaintenanceTasks interface {
	ClusterTasks(ctx context.Context, cluster int64, member string, limit int) ([]maintenance.Task, error)
}

// ClusterLookup finds a cluster's record by id (clusters.Registry): its name, for the
// calls and events of its task.
type ClusterLookup interface {
	Lookup(ctx context.Context, id int64) (clusters.Cluster, error)
}

// Auditor writes an audit event on its own, for a stage that failed outside a change.
type Auditor interface {
	RecordAudit(ctx context.Context, e audit.Event) error
}

// Leadership hands out the right to drive: a lease (one process at a time).
type Leadership interface {
	TryLead(ctx context.Context) (leader.Lease, error)
}

// Observer is told, each round, of the running task whose member has been in its stage
// longest, across clusters (nil when none is running), for the metric of how long.
type Observer interface {
	RollingStage(t *Task)
}

// Driver carries out the running tasks' decisions (Decide), one per task per round, from
// their rows: it reads the snapshot Decide asks for, does what it says, and records it.
// Every stage is safe to take again (Decide looks at Incus, MAAS and the recorded
// maintenance tasks first), so a driver that died mid-stage, or a new leader, simply
// carries on. Each cluster has at most one running task; a round takes every cluster's
// decision at the same time, each through its own cluster's ports, so clusters go on
// independently (one that does not answer holds back only its own task).
type Driver struct {
	Store Store
	// Ports finds a cluster's Incus ports (the connection pool); Clusters its record.
	Ports       clusters.Ports[Incus]
	Clusters    ClusterLookup
	Power       Power
	Maintenance Maintenance
	Tasks       MaintenanceTasks
	Auditor     Auditor
	Leadership  Leadership
	// Lease is the driver's lease length (leader.Options.Lease).
	Lease time.Duration
	// Actor names the driver in audit events ("apelora-worker NAME").
	Actor    string
	Limits   Limits
	Poll     time.Duration
	Log      *slog.Logger
	Observer Observer
	// Now is the process's clock, for the settle period (nil: time.Now).
	Now func() time.Time

	// answering is each task's last decision's memory of the member answering
	// (Decision.Answering), by task id.
	mu        sync.Mutex
	answering map[int64]Answering
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

// leaseKey carries the driver's lease to the power stages (see stillLeading).
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

// Round takes one decision on each running task (one per cluster) and carries it out,
// the clusters at the same time. An error is one of reading or recording (the database, a
// cluster's member list): the next round tries again; the first is returned, each logged.
func (d *Driver) Round(ctx context.Context) error {
	ts, err := d.Store.Unfinished(ctx)
	if err != nil {
		return err
	}
	var running []*Task
	var longest *Task
	for i := range ts {
		if t := &ts[i]; t.State == StateRunning {
			running = append(running, t)
			if longest == nil || t.StageFor > longest.StageFor {
				longest = t
			}
		}
	}
	if d.Observer != nil {
		d.Observer.RollingStage(longest)
	}
	d.forget(running)
	if len(running) == 1 {
		return d.roundOf(ctx, running[0]) // in this goroutine: nothing to wait for
	}
	errs := make([]error, len(running))
	var wg sync.WaitGroup
	for i, t := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = d.roundOf(ctx, t); errs[i] != nil && ctx.Err() == nil {
				d.Log.Warn("rolling reboot round", "rolling_reboot", t.ID, "cluster", t.Cluster, "error", errs[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// roundOf takes one decision on the running task t, in its cluster.
func (d *Driver) roundOf(ctx context.Context, t *Task) error {
	in, err := d.Ports.For(ctx, t.Cluster)
	if err != nil {
		return err
	}
	cl, err := d.Clusters.Lookup(ctx, t.Cluster)
	if err != nil {
		return err
	}
	s := Snapshot{Task: t, Now: d.now(), Limits: d.Limits, Answering: d.memory(t.ID)}
	if t.Current() != "" {
		if s.Members, err = in.Members(ctx); err != nil {
			return err
		}
	}
	run := taskRun{Driver: d, in: in, cluster: cl}
	dec, err := run.decide(ctx, &s)
	if err != nil {
		return err
	}
	d.remember(t.ID, dec.Answering)
	return run.carryOut(ctx, s, dec)
}

func (d *Driver) memory(id int64) Answering {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answering[id]
}

func (d *Driver) remember(id int64, a Answering) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.answering == nil {
		d.answering = map[int64]Answering{}
	}
	d.answering[id] = a
}

// forget drops the memory of tasks no longer running.
func (d *Driver) forget(running []*Task) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.answering {
		keep := false
		for _, t := range running {
			keep = keep || t.ID == id
		}
		if !keep {
			delete(d.answering, id)
		}
	}
}

// taskRun is one task's round: the driver with its cluster's ports and record.
type taskRun struct {
	*Driver
	in      Incus
	cluster clusters.Cluster
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// decide asks Decide until it decides, reading each fact it asks for into the snapshot.
func (d taskRun) decide(ctx context.Context, s *Snapshot) (Decision, error) {
	for {
		dec := Decide(*s)
		if dec.Action != ActRead {
			return dec, nil
		}
		if s.Have.Has(dec.Read) {
			return dec, fmt.Errorf("rolling reboot %d: the decision asked again for %s, already read", s.Task.ID, dec.Read)
		}
		if err := d.read(ctx, s, dec); err != nil {
			return dec, err
		}
		s.Have |= dec.Read
	}
}

// read reads one fact Decide asked for.
func (d taskRun) read(ctx context.Context, s *Snapshot, dec Decision) error {
	switch dec.Read {
	case ReadTasks:
		ts, err := d.Tasks.ClusterTasks(ctx, d.cluster.ID, dec.Member, 1)
		if err != nil {
			return err
		}
		if len(ts) > 0 {
			s.Latest = &ts[0]
		}
	case ReadMapping:
		all, err := d.Store.Mappings(ctx, d.cluster.ID)
		if err != nil {
			return err
		}
		if mp, ok := all[dec.Member]; ok {
			s.Mapping = &mp
		}
	case ReadPower:
		s.PowerState, s.PowerErr = d.Power.QueryPowerState(ctx, dec.Mapping.SystemID)
	case ReadAnswers:
		s.Answers = d.in.MemberAnswers(ctx, dec.Member)
	default:
		return fmt.Errorf("rolling reboot %d: the decision asked for an unknown read %d", s.Task.ID, dec.Read)
	}
	return nil
}

// carryOut does what the decision says.
func (d taskRun) carryOut(ctx context.Context, s Snapshot, dec Decision) error {
	t := s.Task
	switch dec.Action {
	case ActNone:
		return nil
	case ActWait:
		if dec.Cause != nil {
			d.Log.Info("rolling reboot waits", "rolling_reboot", t.ID, "member", dec.Member, "stage", dec.Stage, "reason", dec.Why)
		}
		return nil
	case ActAdvance:
		_, err := d.Store.Advance(ctx, t.ID, dec.Position, dec.Next)
		return err
	case ActFinish:
		return d.act(ctx, t, dec, func(ctx context.Context) error {
			return d.Store.Audited(ctx, "", func(ctx context.Context) error {
				_, err := d.Store.SetState(ctx, t.ID, []State{StateRunning}, StateSucceeded, "")
				return err
			})
		})
	case ActFail:
		return d.fail(ctx, t, dec)
	case ActPowerOff, ActPowerOn:
		if err := stillLeading(ctx); err != nil {
			return err // not this process's to act on any more: the next leader takes this stage
		}
	}
	if err := d.call(ctx, t, dec); err != nil {
		return d.carryOut(ctx, s, dec.Failed(s, err))
	}
	return nil
}

// call makes the decision's call, one audited change: an evacuation or a restore through
// package maintenance, or a power stage (the UUID check first) whose outcome moves the
// task to its next stage in the same transaction.
func (d taskRun) call(ctx context.Context, t *Task, dec Decision) error {
	return d.act(ctx, t, dec, func(ctx context.Context) error {
		switch dec.Action {
		case ActEvacuate:
			_, err := d.Maintenance.Evacuate(ctx, d.cluster.Name, dec.Member, "")
			return err
		case ActRestore:
			_, err := d.Maintenance.Restore(ctx, d.cluster.Name, dec.Member)
			return err
		case ActPowerOff, ActConfirmOff, ActPowerOn, ActConfirmOnline:
		default:
			return fmt.Errorf("rolling reboot %d: no call for %s", t.ID, dec.Action)
		}
		return d.Store.Audited(ctx, dec.Member, func(ctx context.Context) error {
			a := audit.ActionFrom(ctx)
			a.Detail("cluster", d.cluster.Name)
			for k, v := range dec.Details {
				a.Detail(k, v)
			}
			if mp := dec.Mapping; mp != nil {
				if err := d.verify(ctx, mp); err != nil {
					return err
				}
			}
			switch dec.Action {
			case ActPowerOff:
				// Taken again after a restart, the power-off may already have happened.
				if state, err := d.Power.QueryPowerState(ctx, dec.Mapping.SystemID); !PowerOffNeeded(state, err) {
					a.Detail("powerState", state)
					break
				}
				sent, err := d.Power.PowerOff(ctx, dec.Mapping.SystemID)
				if err != nil {
					return fmt.Errorf("ask MAAS to power off machine %s: %w", dec.Mapping.SystemID, err)
				}
				if !sent {
					return apperr.New(apperr.FailedPrecondition, "MAAS cannot power off machine %s (no power driver): %s stays evacuated", dec.Mapping.SystemID, dec.Member)
				}
			case ActPowerOn:
				sent, err := d.Power.PowerOn(ctx, dec.Mapping.SystemID)
				if err != nil {
					return fmt.Errorf("ask MAAS to power on machine %s: %w", dec.Mapping.SystemID, err)
				}
				if !sent {
					return apperr.New(apperr.FailedPrecondition, "MAAS cannot power on machine %s (no power driver): %s stays evacuated and off; power it on by hand, then restore it", dec.Mapping.SystemID, dec.Member)
				}
			}
			_, err := d.Store.Advance(ctx, t.ID, t.Position, dec.Next)
			return err
		})
	})
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

// act runs one stage under an audit action of its own, so that each stage is exactly one
// audit event: the change's, or, when the stage failed before one was written, its own.
func (d taskRun) act(ctx context.Context, t *Task, dec Decision, fn func(ctx context.Context) error) error {
	rid := logging.NewRequestID()
	a := &audit.Action{Actor: d.Actor, Name: StageAction, Machine: dec.Member, RequestID: rid,
		Parameters: map[string]any{"rollingReboot": t.ID, "member": dec.Member, "step": string(dec.Stage)}}
	err := fn(audit.WithAction(logging.WithRequestID(ctx, rid), a))
	if a.Recorded() || apperr.Is(err, apperr.Busy) {
		// BUSY: nothing was tried (another change holds the member, or a stage of it awaits
		// its outcome from the reconciler); the next round takes the stage again.
		return err
	}
	outcome, msg := audit.Succeeded, ""
	if err != nil {
		outcome, msg = audit.Failed, apperr.PublicMessage(err)
	}
	if rerr := d.Auditor.RecordAudit(context.WithoutCancel(ctx), a.Event(outcome, msg)); rerr != nil && err == nil {
		err = rerr
	}
	d.Log.Info("rolling reboot stage", "rolling_reboot", t.ID, "member", dec.Member, "stage", dec.Stage, "error", err)
	return err
}

// fail stops the task with the decision's reason, after recording its cause as the
// stage's audit event when the decision says so; the member stays as it is (evacuated once
// its evacuation was done).
func (d taskRun) fail(ctx context.Context, t *Task, dec Decision) error {
	if dec.Record {
		_ = d.act(ctx, t, dec, func(context.Context) error { return dec.Cause })
	}
	if _, err := d.Store.SetState(ctx, t.ID, []State{StateRunning}, StateFailed, dec.Reason); err != nil {
		return err
	}
	d.Log.Warn("rolling reboot stopped", "rolling_reboot", t.ID, "member", dec.Member, "stage", dec.Stage, "reason", dec.Reason)
	return nil
}
