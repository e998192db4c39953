// Package rolling reboots members one at a time through MAAS: each member in turn is
// evacuated (package maintenance), power cycled through MAAS with the fence worker's
// hardware UUID check (package fencing), waited for until Incus lists it again, checked
// (the admission checks restore runs) and restored; then the next. The operation is a row
// in PostgreSQL and apelora-worker's leader (the one process holding the power
// credential) drives it from that row, so it carries on after a restart or when
// leadership moves. It stops at the first failure, leaving that member evacuated with the
// reason.
//
// The API side (Service) starts, pauses, resumes and cancels it; the worker side (Driver)
// takes its steps. Before the start and before each member, Check refuses when any other
// member is offline or evacuated, or when taking the member down would fail the quorum
// projection (package quorum).
package rolling

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// State is where the operation as a whole stands.
type State string

const (
	StateRunning   State = "RUNNING"
	StatePaused    State = "PAUSED"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateCancelled State = "CANCELLED"
)

// Step is what the operation is doing to its current member, in order.
type Step string

const (
	StepEvacuate Step = "EVACUATE"
	// StepPowerOff: UUID check, then MAAS is asked to power the machine off.
	StepPowerOff Step = "POWER_OFF"
	// StepConfirmOff: a later live power read says off, and Incus lists the member
	// Offline (so the Online that follows is the member back, not Incus not noticing).
	StepConfirmOff Step = "CONFIRM_OFF"
	StepPowerOn    Step = "POWER_ON"
	// StepWaitOnline: until Incus lists the member up again (Evacuated: it is still in
	// maintenance), within the online timeout.
	StepWaitOnline Step = "WAIT_ONLINE"
	// StepRestore: the admission checks run again, then Incus restores the member.
	StepRestore Step = "RESTORE"
	// StepDone: every member was rebooted.
	StepDone Step = "DONE"
)

// Steps lists the steps in order.
var Steps = []Step{StepEvacuate, StepPowerOff, StepConfirmOff, StepPowerOn, StepWaitOnline, StepRestore, StepDone}

// Operation is a rolling reboot as PostgreSQL keeps it.
type Operation struct {
	ID       int64
	Members  []string
	Position int // index of the member in progress; len(Members) once done
	Step     Step
	// StepSince is when the current member entered its step (the database's clock).
	StepSince time.Time
	// StepFor is how long it has been in the step, by the database's clock when read.
	StepFor   time.Duration
	State     State
	Reason    string
	StartedBy string
	RequestID string
	StartedAt time.Time
	// FinishedAt is zero while it is running or paused.
	FinishedAt time.Time
}

// Active reports whether the operation is running or paused.
func (o *Operation) Active() bool { return o.State == StateRunning || o.State == StatePaused }

// Current is the member in progress, "" once done.
func (o *Operation) Current() string {
	if o.Position < 0 || o.Position >= len(o.Members) {
		return ""
	}
	return o.Members[o.Position]
}

// Incus is what a rolling reboot reads of Incus.
type Incus interface {
	Members(ctx context.Context) ([]membership.Member, error)
	// MemberAnswers asks the member's own API (a request Incus forwards to it, the read the
	// incus-version admission check makes): nil when it answers ready. Incus keeps listing
	// an evacuated member Evacuated while it is down, and a member back from a power cycle
	// may answer "Server isn't ready yet" for seconds after the cluster lists it (both seen
	// on 6.0.4), so its status alone cannot tell a member that is ready from one that is not.
	MemberAnswers(ctx context.Context, name string) error
}

// Store is what a rolling reboot needs from the database.
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	// Active is the cluster's running or paused operation, nil for none.
	Active(ctx context.Context) (*Operation, error)
	// Operation reads one by id; nil when there is none.
	Operation(ctx context.Context, id int64) (*Operation, error)
	// Latest is the newest operation, nil for none.
	Latest(ctx context.Context) (*Operation, error)
	// Insert records a new RUNNING operation in the change in progress. A second active
	// one is refused (ALREADY_EXISTS) by the database.
	Insert(ctx context.Context, op Operation) (int64, error)
	// SetState moves an active operation from one state to another (finishing it when the
	// new state is final); false when it was not in from.
	SetState(ctx context.Context, id int64, from []State, to State, reason string) (bool, error)
	// Advance moves a running operation to position and step (StepSince restarts); false
	// when it is no longer running (paused, cancelled).
	Advance(ctx context.Context, id int64, position int, step Step) (bool, error)
	// Mappings are the fence mappings: the MAAS machine that powers each member.
	Mappings(ctx context.Context) (map[string]fencing.Mapping, error)
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

// Service starts, pauses, resumes and cancels rolling reboots (the API side).
type Service struct {
	Incus Incus
	Store Store
	// Wake tells a driver in this process to look now; nil is fine (it polls).
	Wake func()
}

// Start records a rolling reboot of members, in the order given, after checking each
// against the cluster as it is now. The worker's leader takes it from there.
func (s *Service) Start(ctx context.Context, members []string) (*Operation, error) {
	if len(members) == 0 {
		return nil, apperr.Invalid("members", "name at least one member to reboot")
	}
	seen := map[string]bool{}
	for _, m := range members {
		if err := machines.ValidateName(m); err != nil {
			return nil, err
		}
		if seen[m] {
			return nil, apperr.Invalid("members", "%s is named twice: name each member once, in the order to reboot them", apperr.Quote(m))
		}
		seen[m] = true
	}
	if s.Incus == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	op := &Operation{Members: slices.Clone(members), Step: StepEvacuate, State: StateRunning}
	err := s.Store.Audited(ctx, "", func(ctx context.Context) error {
		rec := plan.From(ctx)
		var found []error
		refuse := func(e error) error {
			if rec == nil {
				return e
			}
			found = append(found, e)
			return nil
		}
		active, err := s.Store.Active(ctx)
		if err != nil {
			return err
		}
		if active != nil {
			if err := refuse(apperr.New(apperr.FailedPrecondition, "rolling reboot %d (%s, at %s) is still %s: one rolling reboot per cluster at a time; wait for it, or cancel it (cancelRollingReboot)",
				active.ID, strings.Join(active.Members, ", "), describeCurrent(active), strings.ToLower(string(active.State)))); err != nil {
				return err
			}
		}
		all, err := s.Incus.Members(ctx)
		if err != nil {
			return err
		}
		mappings, err := s.Store.Mappings(ctx)
		if err != nil {
			return err
		}
		for _, m := range members {
			if err := Check(all, m); err != nil {
				if err := refuse(err); err != nil {
					return err
				}
				continue
			}
			mp, ok := mappings[m]
			if !ok {
				if err := refuse(apperr.New(apperr.FailedPrecondition, "%s has no fence mapping, so Apelora does not know which MAAS machine powers it: set one (setFenceMapping) first", apperr.Quote(m))); err != nil {
					return err
				}
				continue
			}
			// The MAAS machine each member is powered through is what is approved.
			if err := plan.Read(ctx, "fence mapping of "+m, fmt.Sprintf("MAAS system id %s, hardware UUID %s", mp.SystemID, mp.HardwareUUID)); err != nil {
				return err
			}
		}
		if rec != nil {
			for _, m := range members {
				rec.Project(quorum.Project(quorum.FromMembership(all), m))
				break // the first member's projection; each later one is checked before it
			}
			for _, e := range found {
				rec.Refuse(e)
			}
			if len(found) > 0 {
				return found[0]
			}
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("members", members)
			op.StartedBy, op.RequestID = a.Actor, a.RequestID
		}
		id, err := s.Store.Insert(ctx, *op)
		if err != nil {
			return err
		}
		if id == 0 { // planned: it would start now
			op.StartedAt = time.Now()
			op.StepSince = op.StartedAt
		} else if saved, err := s.Store.Operation(ctx, id); err != nil {
			return err
		} else if saved != nil {
			*op = *saved
		}
		if a := audit.ActionFrom(ctx); a != nil && id != 0 {
			a.Detail("rollingReboot", op.ID)
		}
		return nil
	})
	if err != nil {
		return op, err
	}
	if s.Wake != nil && !plan.Active(ctx) {
		s.Wake()
	}
	return op, nil
}

// Pause stops the operation before its next step; the step in progress finishes.
func (s *Service) Pause(ctx context.Context, id string) (*Operation, error) {
	return s.move(ctx, id, []State{StateRunning}, StatePaused, "pause", "")
}

// Resume lets a paused operation go on from its step.
func (s *Service) Resume(ctx context.Context, id string) (*Operation, error) {
	return s.move(ctx, id, []State{StatePaused}, StateRunning, "resume", "")
}

// Cancel ends the operation: no further step is taken. The member in progress is left as
// it is (an evacuated member stays evacuated: restore it with restoreMember).
func (s *Service) Cancel(ctx context.Context, id string) (*Operation, error) {
	return s.move(ctx, id, []State{StateRunning, StatePaused}, StateCancelled, "cancel", "cancelled")
}

func (s *Service) move(ctx context.Context, idText string, from []State, to State, verb, reason string) (*Operation, error) {
	id, err := ParseID("id", idText)
	if err != nil {
		return nil, err
	}
	var op *Operation
	err = s.Store.Audited(ctx, "", func(ctx context.Context) error {
		if op, err = s.Store.Operation(ctx, id); err != nil {
			return err
		}
		if op == nil {
			return apperr.New(apperr.NotFound, "there is no rolling reboot %d: rollingReboot shows the latest", id)
		}
		if err := plan.Read(ctx, fmt.Sprintf("rolling reboot %d", id), fmt.Sprintf("%s, members %s", op.State, strings.Join(op.Members, ", "))); err != nil {
			return err
		}
		if !slices.Contains(from, op.State) {
			return apperr.New(apperr.FailedPrecondition, "rolling reboot %d is %s: it cannot be %s; %s", id, strings.ToLower(string(op.State)), pastTense(verb), nextFor(op))
		}
		why := reason
		if to == StateCancelled {
			why = fmt.Sprintf("cancelled at %s", describeCurrent(op))
			if a := audit.ActionFrom(ctx); a != nil {
				why += " by " + a.Actor
			}
			if cur := op.Current(); cur != "" && op.Step != StepEvacuate {
				why += fmt.Sprintf("; %s is left as it is (restore it with restoreMember when it is up)", cur)
			}
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("rollingReboot", id)
			a.Detail("member", op.Current())
			a.Detail("step", string(op.Step))
		}
		ok, err := s.Store.SetState(ctx, id, from, to, why)
		if err != nil {
			return err
		}
		if !ok && !plan.Active(ctx) {
			return apperr.New(apperr.Busy, "rolling reboot %d changed while it was being %s: read it again (rollingReboot) and retry", id, pastTense(verb))
		}
		if plan.Active(ctx) {
			return nil
		}
		// The answer is the operation as recorded now (its end time too, for a cancel),
		// read in the same transaction.
		saved, err := s.Store.Operation(ctx, id)
		if err != nil {
			return err
		}
		if saved != nil {
			op = saved
		}
		return nil
	})
	if err != nil {
		return op, err
	}
	if s.Wake != nil && !plan.Active(ctx) {
		s.Wake()
	}
	return op, nil
}

// Status is the operation with id, or the latest when id is "".
func (s *Service) Status(ctx context.Context, id string) (*Operation, error) {
	if id == "" {
		return s.Store.Latest(ctx)
	}
	n, err := ParseID("id", id)
	if err != nil {
		return nil, err
	}
	return s.Store.Operation(ctx, n)
}

// ParseID reads an operation id given by a client.
func ParseID(field, v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, apperr.Invalid(field, "%s is not a rolling reboot id (a whole number, as RollingReboot.id gives it)", apperr.Quote(v))
	}
	return n, nil
}

func describeCurrent(op *Operation) string {
	if cur := op.Current(); cur != "" {
		return fmt.Sprintf("%s, step %s", cur, op.Step)
	}
	return "its end"
}

func nextFor(op *Operation) string {
	switch op.State {
	case StateRunning:
		return "pause or cancel it"
	case StatePaused:
		return "resume or cancel it"
	}
	return "it has finished; start a new one (startRollingReboot)"
}

func pastTense(verb string) string {
	switch verb {
	case "pause":
		return "paused"
	case "resume":
		return "resumed"
	}
	return "cancelled"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
