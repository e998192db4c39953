// Package leader is the one leader/standby loop. The fence worker and the drift watcher
// each act in one process at a time: every candidate tries for a lease (in practice a row
// in PostgreSQL with an epoch that grows at every take-over), the one that gets it leads
// while it renews it, and the others stand by and try again once it has expired.
//
// A lease, not a session lock: a leader whose connection died server-side (or that was
// paused) cannot tell by itself that it no longer leads, and with a session lock another
// process would already lead beside it. A lease ends at a time both sides know: the
// leader stops acting when it could not renew in time, and every write it makes checks its
// epoch in the same transaction, so a leader that missed the end is refused anyway.
package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// ErrLost says a lease is gone for good: another process took it over (a higher epoch),
// or it expired before it could be renewed. A Lease's Renew and Check wrap it; any other
// error is a renewal that failed this time and may work the next.
var ErrLost = errors.New("this process no longer holds the leader lease")

// Lease is a leader's lease as the process that holds it sees it: a row in PostgreSQL
// (leader_leases) with an epoch, and what the leader may do under it.
type Lease interface {
	// Check returns nil while the lease is still this process's (an error wrapping
	// ErrLost when it is not).
	Check(ctx context.Context) error
	// Renew extends the lease by its full length from now.
	Renew(ctx context.Context) error
	// Epoch is the lease's epoch: higher for every later take-over.
	Epoch() int64
	// Close gives the lease up (when it is still this process's), so that a standby
	// takes over at once instead of when it expires.
	Close()
}

// Options are a loop's retry period and words.
type Options struct {
	// Retry is how long a standby waits between attempts, and a failed attempt before the
	// next.
	Retry time.Duration
	// Sleep waits between attempts (nil: a timer); tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger
	// Unreachable is logged (warn, with the error) when the lock could not be asked for;
	// Standby (info) once each time another process is found leading. Attrs go with both.
	Unreachable, Standby string
	Attrs                []any
	// Lease is the lease's length: the leader renews it every third of it and stops
	// acting (its lead context ends) when it is lost; a leader that lost it stands aside
	// for a lease length and a retry before it tries again: by then the lease it lost has
	// expired and a standby (which tries every Retry) has had its chance to lead first.
	// Zero: never renewed (leases that cannot expire, in tests).
	Lease time.Duration
	// Leading is told of the epoch this process leads with, and of every renewal; epoch 0
	// when it stops leading (metrics). Nil: nobody.
	Leading func(epoch int64, renewed time.Time)
}

// Run leads when it can and stands by while another process leads, until ctx ends.
// tryLead returns the lease when this process now leads, or a nil one (L's zero value)
// when another does. lead acts while the lease is this process's, with a context that
// ends when the lease is lost (Options.Lease), and returns when ctx ends or it finds the
// lease lost (its Check says so); Run then closes the lease and, after standing aside,
// tries again.
func Run[L interface {
	comparable
	Lease
}](ctx context.Context, tryLead func(context.Context) (L, error), lead func(context.Context, L), o Options) {
	sleep := o.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	var none L
	standby := false
	for ctx.Err() == nil {
		l, err := tryLead(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				o.Log.Warn(o.Unreachable, append([]any{"error", err}, o.Attrs...)...)
			}
			standby = false
		case l == none:
			if !standby {
				o.Log.Info(o.Standby, o.Attrs...)
				standby = true
			}
		default:
			standby = false
			func() {
				defer l.Close()
				lctx, stop := context.WithCancel(ctx)
				renewed := make(chan struct{})
				go func() { defer close(renewed); keep(lctx, stop, l, o) }()
				defer func() { stop(); <-renewed }()
				lead(lctx, l)
			}()
			if o.Leading != nil {
				o.Leading(0, time.Time{})
			}
			if ctx.Err() == nil && o.Lease > 0 {
				// It lost the lease while ctx still runs: its database link (or the process
				// itself) faltered. The lease expires at most one length after its last
				// renewal, which was before now; a standby tries within Retry of that.
				if sleep(ctx, o.Lease+o.Retry) != nil {
					return
				}
			}
			continue
		}
		if sleep(ctx, o.Retry) != nil {
			return
		}
	}
}

// keep renews l every third of the lease's length until ctx ends, and ends the lead (stop)
// as soon as a renewal says the lease is lost. A renewal that fails otherwise is tried
// again sooner; the lease itself says it is lost once its end passed unrenewed.
func keep(ctx context.Context, stop context.CancelFunc, l Lease, o Options) {
	if o.Leading != nil {
		o.Leading(l.Epoch(), time.Now())
	}
	if o.Lease <= 0 {
		return
	}
	every := o.Lease / 3
	next := every
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := l.Renew(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrLost):
			o.Log.Warn("lost the leader lease: stopped acting", append([]any{"epoch", l.Epoch(), "error", err}, o.Attrs...)...)
			stop()
			return
		case err != nil:
			o.Log.Warn("could not renew the leader lease; trying again", append([]any{"epoch", l.Epoch(), "error", err}, o.Attrs...)...)
			next = max(every/4, time.Millisecond)
		default:
			next = every
			if o.Leading != nil {
				o.Leading(l.Epoch(), time.Now())
			}
		}
	}
}

// Sleep waits d, or returns ctx's error when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
