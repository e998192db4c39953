package postgres

import (
	"context"
	"time"

	"github.com/apelora/fabric/internal/broadcast"
)

// rowFeed publishes the rows of an append-only table (audit_events, fence_events) on a
// broadcast.Hub as they are recorded, read once per process however many subscribers
// there are. Its AFTER INSERT trigger NOTIFYs; on each notification, and after a lost
// connection, the feed reads every row after the last one it published, in id order.
// Ids become visible in id order (see insertAudit and insertFenceEvent), so reading
// "after the last one" misses nothing and repeats nothing; the hub's subscribers replay
// from the same table.
type rowFeed[T any] struct {
	s       *Store
	channel string
	what    string // for log lines: "audit event", "fence event"
	key     func(T) string
	last    func(ctx context.Context) (int64, error)
	after   func(ctx context.Context, after int64, limit int) ([]T, error)
	hub     *broadcast.Hub[string, T]
}

// recentRows is how many of the last rows a feed's hub keeps, for subscribers switching
// from the table to the live rows.
const recentRows = 256

func newRowFeed[T any](s *Store, channel, what string, id func(T) int64, key func(T) string) *rowFeed[T] {
	return &rowFeed[T]{s: s, channel: channel, what: what, key: key, hub: broadcast.NewHub[string, T](id, recentRows)}
}

// Hub is where the rows are published: subscribe with broadcast.Subscribe.
func (f *rowFeed[T]) Hub() *broadcast.Hub[string, T] { return f.hub }

// Run publishes rows until ctx ends. The hub starts at the table's last row once the
// feed listens, so that nothing recorded after it is missed.
func (f *rowFeed[T]) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(f.channel, 1024)
	defer func() { sub.Close() }()
	select {
	case <-l.Ready():
	case <-ctx.Done():
		return
	}
	for {
		last, err := f.last(ctx)
		if err == nil {
			f.hub.Start(last)
			break
		}
		f.s.log.Warn("read the last "+f.what+"; retrying", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.C:
			if !ok {
				// Dropped for falling behind: listen again; the read below catches up.
				sub = l.Subscribe(f.channel, 1024)
			}
		}
		f.catchUp(ctx)
	}
}

// catchUp publishes every row after the last one published.
func (f *rowFeed[T]) catchUp(ctx context.Context) {
	for {
		rows, err := f.after(ctx, f.hub.Head(), broadcast.ReplayPage)
		if err != nil {
			f.s.log.Warn("read the new "+f.what+"s", "error", err)
			return
		}
		for _, r := range rows {
			f.hub.Publish(f.key(r), r)
		}
		if len(rows) < broadcast.ReplayPage {
			return
		}
	}
}
