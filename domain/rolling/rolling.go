// Package rolling reboots members one at a time through MAAS: each member in turn is
// evacuated (package maintenance), power cycled through MAAS with the fence worker's
// hardware UUID check (package fencing), waited for until it answers again, checked (the
// admission checks restore runs) and restored; then the next. The task is a row in
// PostgreSQL and apelora-worker's leader (the one process holding the power credential)
// drives it from that row, so it carries on after a restart or when leadership moves. It
// stops at the first failure, leaving that member evacuated with the reason.
//
// The rules are pure functions over a snapshot (decide.go): Decide says what the running
// task does next and why, Check whether a member may go down, StartRefusals what refuses
// a start, Transition what a pause, resume or cancel does. The API side (Service) starts,
// pauses, resumes and cancels tasks; the worker side (Driver) reads the snapshot, carries
// out each decision and records it.
package rolling

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// State is where the task as a whole stands.
type State string

const (
	StateRunning   State = "RUNNING"
	StatePaused    State = "PAUSED"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateCancelled State = "CANCELLED"
)

// Stage is what the task is doing to its current member, in order.
type Stage string

const (
	StageEvacuate Stage = "EVACUATE"
	// StagePowerOff: UUID check, then MAAS is asked to power the machine off.
	StagePowerOff Stage = "POWER_OFF"
	// StageConfirmOff: a later live power read says off, and the member no longer answers
	// (so its answering again later is the member back, not Incus not noticing).
	StageConfirmOff Stage = "CONFIRM_OFF"
	StagePowerOn    Stage = "POWER_ON"
	// StageWaitOnline: until the member answers again, itself and through the cluster, for
	// the settle period, within the online timeout.
	StageWaitOnline Stage = "WAIT_ONLINE"
	// StageRestore: the admission checks run again, then Incus restores the member.
	StageRestore Stage = "RESTORE"
	// StageDone: every member was rebooted.
	StageDone Stage = "DONE"
)

// Stages lists the stages in order.
var Stages = []Stage{StageEvacuate, StagePowerOff, StageConfirmOff, StagePowerOn, StageWaitOnline, StageRestore, StageDone}

// Task is a rolling reboot as PostgreSQL keeps it (rolling_operations).
type Task struct {
	ID int64
	// Cluster is the id of the Incus cluster its members are in (domain/clusters): each
	// cluster runs one task at a time (a unique index), clusters independently.
	Cluster  int64
	Members  []string
	Position int // index of the member in progress; len(Members) once done
	Stage    Stage
	// StageSince is when the current member entered its stage (the database's clock).
	StageSince time.Time
	// StageFor is how long it has been in the stage, by the database's clock when read.
	StageFor  time.Duration
	State     State
	Reason    string
	StartedBy string
	RequestID string
	StartedAt time.Time
	// FinishedAt is zero while it is running or paused.
	FinishedAt time.Time
}

// Active reports whether the task is running or paused.
func (t *Task) Active() bool { return t.State == StateRunning || t.State == StatePaused }

// Current is the member in progress, "" once done.
func (t *Task) Current() string {
	if t.Position < 0 || t.Position >= len(t.Members) {
		return ""
	}
	return t.Members[t.Position]
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
	// Active is the cluster's running or paused task, nil for none.
	Active(ctx context.Context, cluster int64) (*Task, error)
	// Unfinished lists every running or paused task, one per cluster at most, by id.
	Unfinished(ctx context.Context) ([]Task, error)
	// Task reads one by id; nil when there is none.
	Task(ctx context.Context, id int64) (*Task, error)
	// Latest is the newest task of the cluster (0: of any cluster), nil for none.
	Latest(ctx context.Context, cluster int64) (*Task, error)
	// Insert records a new RUNNING task in the change in progress. A second active one in
	// its cluster is refused by the database.
	Insert(ctx context.Context, t Task) (int64, error)
	// SetState moves an active task from one state to another (finishing it when the new
	// state is final); false when it was not in from.
	SetState(ctx context.Context, id int64, from []State, to State, reason string) (bool, error)
	// Advance moves an unfinished task to position and stage (StageSince restarts); false
	// when it has finished (cancelled).
	Advance(ctx context.Context, id int64, position int, stage Stage) (bool, error)
	// Mappings are the cluster's fence mappings: the MAAS machine that powers each member.
	Mappings(ctx context.Context, cluster int64) (map[string]fencing.Mapping, error)
	// Record reads the machine record of the name, nil for none (its cluster names the
	// members' cluster).
	Record(ctx context.Context, name string) (*machines.Record, error)
}

// Service starts, pauses, resumes and cancels rolling reboots (the API side), each in one
// cluster.
type Service struct {
	// Ports finds a cluster's Incus ports (the connection pool); Clusters lists the
	// registered clusters. Either nil: Incus is not configured.
	Ports    clusters.Ports[Incus]
	Clusters clusters.Lister
	Store    Store
	// Wake tells a driver in this process to look now; nil is fine (it polls).
	Wake func()
}

// Start records a rolling reboot of members, in the order given, in their cluster
// (Cluster: the one given, or their records'), after checking each against that cluster
// as it is now (StartRefusals). The worker's leader takes it from there.
func (s *Service) Start(ctx context.Context, cluster string, members []string) (*Task, error) {
	if err := ValidateMembers(members); err != nil {
		return nil, err
	}
	if s.Ports == nil || s.Clusters == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	t := &Task{Members: slices.Clone(members), Stage: StageEvacuate, State: StateRunning}
	err := s.Store.Audited(ctx, "", func(ctx context.Context) error {
		cl, err := s.Cluster(ctx, cluster, members)
		if err != nil {
			return err
		}
		t.Cluster = cl.ID
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("cluster", cl.Name)
		}
		if err := plan.Read(ctx, "cluster", cl.Name+"; "+cl.Fact()); err != nil {
			return err
		}
		in, err := s.Ports.For(ctx, cl.ID)
		if err != nil {
			return err
		}
		active, err := s.Store.Active(ctx, cl.ID)
		if err != nil {
			return err
		}
		all, err := in.Members(ctx)
		if err != nil {
			return err
		}
		mappings, err := s.Store.Mappings(ctx, cl.ID)
		if err != nil {
			return err
		}
		refusals := StartRefusals(active, all, members, mappings)
		rec := plan.From(ctx)
		if rec == nil && len(refusals) > 0 {
			return refusals[0]
		}
		// The MAAS machine each member is powered through is what is approved.
		for _, m := range members {
			if mp, ok := mappings[m]; ok && Check(all, m) == nil {
				if err := plan.Read(ctx, "fence mapping of "+m, fmt.Sprintf("MAAS system id %s, hardware UUID %s", mp.SystemID, mp.HardwareUUID)); err != nil {
					return err
				}
			}
		}
		if rec != nil {
			// The first member's projection; each later one is checked before it.
			rec.Project(quorum.Project(quorum.FromMembership(all), members[0]))
			for _, e := range refusals {
				rec.Refuse(e)
			}
			if len(refusals) > 0 {
				return refusals[0]
			}
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("members", members)
			t.StartedBy, t.RequestID = a.Actor, a.RequestID
		}
		id, err := s.Store.Insert(ctx, *t)
		if err != nil {
			return err
		}
		if id == 0 { // planned: it would start now
			t.Cluster = cl.ID
			t.StartedAt = time.Now()
			t.StageSince = t.StartedAt
		} else if saved, err := s.Store.Task(ctx, id); err != nil {
			return err
		} else if saved != nil {
			*t = *saved
		}
		if a := audit.ActionFrom(ctx); a != nil && id != 0 {
			a.Detail("rollingReboot", t.ID)
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if s.Wake != nil && !plan.Active(ctx) {
		s.Wake()
	}
	return t, nil
}

// Cluster is the one cluster the members named are in (the one rule, clusters.OfMember,
// for each: its record's cluster, or the one given): members of several clusters are
// INVALID_INPUT (a rolling reboot is one cluster's), a member whose record names another
// cluster than the one given FAILED_PRECONDITION.
func (s *Service) Cluster(ctx context.Context, given string, members []string) (clusters.Cluster, error) {
	all := s.Clusters.All()
	var first clusters.Cluster
	var firstMember string
	for i, m := range members {
		rec, err := s.Store.Record(ctx, m)
		if err != nil {
			return clusters.Cluster{}, err
		}
		cl, err := clusters.OfMember(all, m, rec, given)
		if err != nil {
			return clusters.Cluster{}, err
		}
		if i == 0 {
			first, firstMember = cl, m
			continue
		}
		if cl.ID != first.ID {
			return clusters.Cluster{}, apperr.Invalid("members", "%s is in cluster %s and %s in cluster %s: a rolling reboot is one cluster's members; start one per cluster (clusters run theirs independently)",
				apperr.Quote(firstMember), first.Name, apperr.Quote(m), cl.Name)
		}
	}
	return first, nil
}

// Pause stops the task before its next stage; the stage in progress finishes.
func (s *Service) Pause(ctx context.Context, id string) (*Task, error) {
	return s.move(ctx, id, Pause)
}

// Resume lets a paused task go on from its stage.
func (s *Service) Resume(ctx context.Context, id string) (*Task, error) {
	return s.move(ctx, id, Resume)
}

// Cancel ends the task: no further stage is taken. The member in progress is left as it
// is (an evacuated member stays evacuated: restore it with restoreMember).
func (s *Service) Cancel(ctx context.Context, id string) (*Task, error) {
	return s.move(ctx, id, Cancel)
}

func (s *Service) move(ctx context.Context, idText string, verb Verb) (*Task, error) {
	id, err := ParseID("id", idText)
	if err != nil {
		return nil, err
	}
	var t *Task
	err = s.Store.Audited(ctx, "", func(ctx context.Context) error {
		if t, err = s.Store.Task(ctx, id); err != nil {
			return err
		}
		if t == nil {
			return apperr.New(apperr.NotFound, "there is no rolling reboot %d: rollingReboot shows the latest", id)
		}
		if err := plan.Read(ctx, fmt.Sprintf("rolling reboot %d", id), fmt.Sprintf("%s, members %s", t.State, strings.Join(t.Members, ", "))); err != nil {
			return err
		}
		actor := ""
		if a := audit.ActionFrom(ctx); a != nil {
			actor = a.Actor
		}
		tr, err := Transition(*t, verb, actor)
		if err != nil {
			return err
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("rollingReboot", id)
			if s.Clusters != nil {
				// As its start's: two clusters' reboots may each be at their m1.
				if i := slices.IndexFunc(s.Clusters.All(), func(c clusters.Cluster) bool { return c.ID == t.Cluster }); i >= 0 {
					a.Detail("cluster", s.Clusters.All()[i].Name)
				}
			}
			a.Detail("member", t.Current())
			a.Detail("step", string(t.Stage))
		}
		ok, err := s.Store.SetState(ctx, id, tr.From, tr.To, tr.Reason)
		if err != nil {
			return err
		}
		if !ok && !plan.Active(ctx) {
			return apperr.New(apperr.Busy, "rolling reboot %d changed while it was being %s: read it again (rollingReboot) and retry", id, verb.past())
		}
		if plan.Active(ctx) {
			return nil
		}
		// The answer is the task as recorded now (its end time too, for a cancel), read in
		// the same transaction.
		saved, err := s.Store.Task(ctx, id)
		if err != nil {
			return err
		}
		if saved != nil {
			t = saved
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if s.Wake != nil && !plan.Active(ctx) {
		s.Wake()
	}
	return t, nil
}

// Status is the task with id, or the latest (of the cluster with id cluster; 0 for any)
// when id is "".
func (s *Service) Status(ctx context.Context, id string, cluster int64) (*Task, error) {
	if id == "" {
		return s.Store.Latest(ctx, cluster)
	}
	n, err := ParseID("id", id)
	if err != nil {
		return nil, err
	}
	return s.Store.Task(ctx, n)
}

// ParseID reads a rolling reboot's id given by a client.
func ParseID(field, v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, apperr.Invalid(field, "%s is not a rolling reboot id (a whole number, as RollingReboot.id gives it)", apperr.Quote(v))
	}
	return n, nil
}
