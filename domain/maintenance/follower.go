package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

// FollowStore is what the follower records.
type FollowStore interface {
	// Running lists every task not seen to end, oldest first.
	Running(ctx context.Context) ([]Task, error)
	// Progress appends a PROGRESS event unless the task's latest event says the same.
	Progress(ctx context.Context, t Task, message string) error
	// Finish ends a running task with its outcome, appending lines (each instance's
	// outcome) and the final event; it does nothing to one already finished.
	Finish(ctx context.Context, t Task, outcome Kind, message string, lines []string) error
}

// Follower reports the progress of every running task from its Incus operation, in every
// API replica: the tasks are read from the database, so a restarted server (or another
// replica) finds those in progress again. Writes are idempotent (the store appends a line
// once and ends a task once), so replicas following the same one record it once. Each task
// is read from its own cluster (Task.Cluster); the clusters are followed at the same time,
// so one that does not answer delays only its own tasks.
type Follower struct {
	Ports clusters.Ports[Incus]
	Store FollowStore
	Log   *slog.Logger
	// Poll is how often Incus's operations are read while a task runs (and the database
	// looked at for new tasks otherwise, besides Wake).
	Poll time.Duration
	wake chan struct{}
}

// NewFollower returns a follower; call Run.
func NewFollower(ports clusters.Ports[Incus], store FollowStore, log *slog.Logger, poll time.Duration) *Follower {
	return &Follower{Ports: ports, Store: store, Log: log, Poll: poll, wake: make(chan struct{}, 1)}
}

// Wake has the follower look for new tasks now.
func (f *Follower) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// idle is how often the database is looked at while nothing runs here: another replica
// may have started a task.
const idle = 5 * time.Second

// Run follows tasks until ctx ends.
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

// Round looks at every running task once; it returns how many still run.
func (f *Follower) Round(ctx context.Context) int {
	tasks, err := f.Store.Running(ctx)
	if err != nil {
		f.Log.Warn("read the running maintenance tasks", "error", apperr.PublicMessage(err))
		return 0
	}
	byCluster := map[int64][]Task{}
	for _, t := range tasks {
		byCluster[t.Cluster] = append(byCluster[t.Cluster], t)
	}
	var running atomic.Int64
	var wg sync.WaitGroup
	for cluster, ts := range byCluster {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, err := f.Ports.For(ctx, cluster)
			if err != nil {
				f.Log.Warn("cannot follow the maintenance tasks of a cluster", "cluster", cluster, "tasks", len(ts), "error", apperr.PublicMessage(err))
				running.Add(int64(len(ts)))
				return
			}
			for _, t := range ts {
				if !f.follow(ctx, in, t) {
					running.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(running.Load())
}

// follow reads one task's Incus operation and records what is new (Follow, Outcome); true
// when the task ended.
func (f *Follower) follow(ctx context.Context, in Incus, t Task) bool {
	iop, found, err := in.MemberOperation(ctx, t.IncusOperation)
	if err != nil {
		f.Log.Warn("read a member operation from Incus", "machine", t.Machine, "incus_operation", t.IncusOperation, "error", apperr.PublicMessage(err))
		return false
	}
	progress, ended := Follow(iop, found)
	if progress != "" {
		if err := f.Store.Progress(ctx, t, progress); err != nil {
			f.Log.Warn("record a maintenance task's progress", "machine", t.Machine, "error", apperr.PublicMessage(err))
		}
	}
	if !ended {
		return false
	}
	status := membership.StatusUnknown
	if members, err := in.Members(ctx); err == nil {
		status = StatusOf(members, t.Machine)
	}
	outcome, message := Outcome(t, iop, found, status)
	var lines []string
	if all, err := in.AllInstances(ctx); err == nil {
		lines = Outcomes(t, all)
	}
	if err := f.Store.Finish(ctx, t, outcome, message, lines); err != nil {
		f.Log.Warn("record the end of a maintenance task", "machine", t.Machine, "error", apperr.PublicMessage(err))
		return false
	}
	return true
}
