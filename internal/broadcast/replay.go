package broadcast

import "context"

// Replayed describes a stream of rows with increasing ids that are both stored and
// published as they are recorded (a table whose trigger NOTIFYs, fed by a row feed).
type Replayed[T any] struct {
	// Subscribe starts receiving published rows.
	Subscribe func() *Subscription[T]
	// After reads up to limit stored rows with an id above after, oldest first.
	After func(ctx context.Context, after int64, limit int) ([]T, error)
	ID    func(T) int64
	// Keep selects the rows this stream carries (nil: all).
	Keep func(T) bool
	// Batch is how many rows After reads at a time (default 500).
	Batch int
}

// Replay streams the rows after the id after (when given) from storage, then the live
// ones, without gaps or repeats, until ctx ends. It subscribes before reading, so a row
// recorded meanwhile comes once, from either side. A subscriber that falls behind is
// caught up from storage; one that asked for no replay cannot be, and its stream ends (the
// client reconnects with the last id it saw). The channel closes when the stream ends.
func Replay[T any](ctx context.Context, r Replayed[T], after *int64) <-chan T {
	batch := r.Batch
	if batch <= 0 {
		batch = 500
	}
	sub := r.Subscribe()
	last := int64(-1) // -1: no replay asked; live rows only
	if after != nil {
		last = *after
	}
	out := make(chan T, 16)
	send := func(v T) bool {
		if r.Keep != nil && !r.Keep(v) {
			return true
		}
		select {
		case out <- v:
			return true
		case <-ctx.Done():
			return false
		}
	}
	catchUp := func() bool {
		if last < 0 {
			return true
		}
		for ctx.Err() == nil {
			rows, err := r.After(ctx, last, batch)
			if err != nil {
				return false
			}
			for _, v := range rows {
				if !send(v) {
					return false
				}
				last = r.ID(v)
			}
			if len(rows) < batch {
				return true
			}
		}
		return false
	}
	go func() {
		defer close(out)
		defer func() { sub.Close() }()
		if !catchUp() {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case v, ok := <-sub.C:
				if !ok {
					if last < 0 {
						return
					}
					sub = r.Subscribe()
					if !catchUp() {
						return
					}
					continue
				}
				if id := r.ID(v); last >= 0 && id <= last {
					continue // already sent by the replay
				}
				if !send(v) {
					return
				}
				last = max(last, r.ID(v))
			}
		}
	}()
	return out
}
