// Package leader is the one leader/standby loop. The fence worker and the drift watcher
// each act in one process at a time: every candidate tries for a lock (in practice a
// PostgreSQL session-level advisory lock on a connection of its own), the one that gets it
// leads until it loses it, and the others stand by and try again.
package leader

import (
	"context"
	"log/slog"
	"time"
)

// Hold is a leader's hold on its lock.
type Hold interface {
	// Check returns nil while the hold still has the lock.
	Check(ctx context.Context) error
	// Close gives the lock up. Holds on PostgreSQL unlock before they close the
	// connection: PostgreSQL frees a closed connection's locks only once its backend has
	// exited, so a standby could otherwise find the lock still taken.
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
}

// Run leads when it can and stands by while another process leads, until ctx ends.
// tryLead returns a hold when this process now leads, or a nil one (H's zero value) when
// another does. lead acts while the hold has the lock
// and returns when ctx ends or the lock is lost (its Check says so); Run then closes the
// hold and tries again at once, so a leader whose connection broke leads again as soon as
// it can.
func Run[H interface {
	comparable
	Hold
}](ctx context.Context, tryLead func(context.Context) (H, error), lead func(context.Context, H), o Options) {
	sleep := o.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	var none H
	standby := false
	for ctx.Err() == nil {
		h, err := tryLead(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				o.Log.Warn(o.Unreachable, append([]any{"error", err}, o.Attrs...)...)
			}
			standby = false
		case h == none:
			if !standby {
				o.Log.Info(o.Standby, o.Attrs...)
				standby = true
			}
		default:
			standby = false
			func() {
				defer h.Close()
				lead(ctx, h)
			}()
			continue
		}
		if sleep(ctx, o.Retry) != nil {
			return
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
