package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

// FollowStore is what the follower records.
type FollowStore interface {
	// Running lists every operation not seen to end, oldest first.
	Running(ctx context.Context) ([]Operation, error)
	// Progress appends a PROGRESS event unless the operation's latest event says the same.
	Progress(ctx context.Context, op Operation, message string) error
	// Finish ends a running operation with its outcome, appending lines (each instance's
	// outcome) and the final event; it does nothing to one already finished.
	Finish(ctx context.Context, op Operation, outcome Kind, message string, lines []string) error
}

// Follower reports the progress of every running operation from Incus, in every API
// replica: the operations are read from the database, so a restarted server (or another
// replica) finds those in progress again. Writes are idempotent (the store appends a line
// once and ends an operation once), so replicas following the same one record it once.
type Follower struct {
	Incus Incus
	Store FollowStore
	Log   *slog.Logger
	// Poll is how often Incus's operations are read while one runs (and the database
	// looked at for new ones otherwise, besides Wake).
	Poll time.Duration
	wake chan struct{}
}

// NewFollower returns a follower; call Run.
func NewFollower(incus Incus, store FollowStore, log *slog.Logger, poll time.Duration) *Follower {
	return &Follower{Incus: incus, Store: store, Log: log, Poll: poll, wake: make(chan struct{}, 1)}
}

// Wake has the follower look for new operations now.
func (f *Follower) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// idle is how often the database is looked at while nothing runs here: another replica
// may have started an operation.
const idle = 5 * time.Second

// Run follows operations until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	for {
		wait := idle
		if n := f.Round(ctx); n > 0 {
			wait = f.Poll
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-time.After(wait):
		}
	}
}

// Round looks at every running operation once; it returns how many still run.
func (f *Follower) Round(ctx context.Context) int {
	ops, err := f.Store.Running(ctx)
	if err != nil {
		f.Log.Warn("read the running member operations", "error", apperr.PublicMessage(err))
		return 0
	}
	running := 0
	for _, op := range ops {
		if !f.follow(ctx, op) {
			running++
		}
	}
	return running
}

// follow reads one operation from Incus and records what is new; true when it ended.
func (f *Follower) follow(ctx context.Context, op Operation) bool {
	iop, found, err := f.Incus.MemberOperation(ctx, op.IncusOperation)
	if err != nil {
		f.Log.Warn("read a member operation from Incus", "machine", op.Machine, "incus_operation", op.IncusOperation, "error", apperr.PublicMessage(err))
		return false
	}
	if found && iop.Progress != "" {
		if err := f.Store.Progress(ctx, op, iop.Progress); err != nil {
			f.Log.Warn("record a member operation's progress", "machine", op.Machine, "error", apperr.PublicMessage(err))
		}
	}
	if found && !iop.Done {
		return false
	}
	outcome, message := KindSucceeded, fmt.Sprintf("%s of %s finished", op.Action, op.Machine)
	members, merr := f.Incus.Members(ctx)
	status := membership.StatusUnknown
	if merr == nil {
		for _, m := range members {
			if m.Name == op.Machine {
				status = m.Status
			}
		}
	}
	switch {
	case found && iop.Failed:
		outcome, message = KindFailed, fmt.Sprintf("%s of %s failed: %s (Incus lists the member %s)", op.Action, op.Machine, iop.Err, status)
	case !found:
		// Incus keeps a finished operation a few seconds only: one that ended while no
		// server looked (a restart) is judged by the member's status.
		want := map[string]membership.Status{Evacuate: membership.StatusEvacuated, Restore: membership.StatusOnline}[op.Action]
		if status == want {
			message = fmt.Sprintf("%s of %s finished while Apelora was not looking (Incus no longer lists operation %s); the member is %s", op.Action, op.Machine, op.IncusOperation, status)
		} else {
			outcome, message = KindUnknown, fmt.Sprintf("Incus no longer lists operation %s and the member is %s, not %s: the %s may have failed; look at the member and run it again", op.IncusOperation, status, want, op.Action)
		}
	}
	var lines []string
	if all, err := f.Incus.AllInstances(ctx); err == nil {
		lines = Outcomes(op, all)
	}
	if err := f.Store.Finish(ctx, op, outcome, message, lines); err != nil {
		f.Log.Warn("record the end of a member operation", "machine", op.Machine, "error", apperr.PublicMessage(err))
		return false
	}
	return true
}

// Outcomes says where each of the operation's instances is now.
func Outcomes(op Operation, all []Instance) []string {
	now := map[string]Instance{}
	for _, in := range all {
		now[in.ID()] = in
	}
	var out []string
	for _, p := range op.Instances {
		in, ok := now[p.ID()]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no longer exists", p.ID()))
		case op.Action == Evacuate && in.Location != op.Machine:
			out = append(out, fmt.Sprintf("%s: moved to %s (%s)", p.ID(), in.Location, strings.ToLower(in.Status)))
		case op.Action == Evacuate:
			out = append(out, fmt.Sprintf("%s: stopped, stays on %s until it is restored (%s)", p.ID(), op.Machine, strings.ToLower(in.Status)))
		case in.Location == op.Machine:
			out = append(out, fmt.Sprintf("%s: back on %s (%s)", p.ID(), op.Machine, strings.ToLower(in.Status)))
		default:
			out = append(out, fmt.Sprintf("%s: still on %s (%s)", p.ID(), in.Location, strings.ToLower(in.Status)))
		}
	}
	return out
}
