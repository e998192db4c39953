package postgres

import (
	"context"
	"strconv"

	"github.com/apelora/fabric/internal/broadcast"
)

// rowFeed turns notifications that carry a new row's id (written by an AFTER INSERT
// trigger) into that row, read once per process however many subscribers there are.
// After a lost connection it reads what was recorded meanwhile, so subscribers miss
// nothing that committed in order.
type rowFeed[T any] struct {
	s       *Store
	channel string
	what    string // for log lines: "audit event", "fence event"
	id      func(T) int64
	one     func(ctx context.Context, id int64) (*T, error)
	after   func(ctx context.Context, after int64, limit int) ([]T, error)
	b       broadcast.Broadcaster[T]
}

// recentIDs bounds the ids remembered to publish each row once (a row can be both caught
// up after a reconnect and notified).
const recentIDs = 4096

// Subscribe streams the rows recorded from now on.
func (f *rowFeed[T]) Subscribe(buffer int) *broadcast.Subscription[T] {
	return f.b.Subscribe(buffer)
}

// Run forwards rows until ctx ends.
func (f *rowFeed[T]) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(f.channel, 1024)
	defer func() { sub.Close() }()
	var last int64
	seen := map[int64]bool{}
	var order []int64
	publish := func(row T) {
		id := f.id(row)
		if seen[id] {
			return
		}
		seen[id] = true
		order = append(order, id)
		if len(order) > recentIDs {
			delete(seen, order[0])
			order = order[1:]
		}
		f.b.Publish(row)
		last = max(last, id)
	}
	for {
		var n Notification
		var ok bool
		select {
		case <-ctx.Done():
			return
		case n, ok = <-sub.C:
		}
		if !ok {
			// Dropped for falling behind: resubscribe and catch up from the database.
			sub = l.Subscribe(f.channel, 1024)
			n = Notification{Resync: true}
		}
		if n.Resync {
			f.catchUp(ctx, last, publish)
			continue
		}
		id, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil || seen[id] {
			continue
		}
		row, err := f.one(ctx, id)
		if err != nil {
			f.s.log.Warn("read notified "+f.what, "id", id, "error", err)
			continue
		}
		if row != nil {
			publish(*row)
		}
	}
}

func (f *rowFeed[T]) catchUp(ctx context.Context, last int64, publish func(T)) {
	if last == 0 {
		return
	}
	const page = 1000
	for {
		rows, err := f.after(ctx, last, page)
		if err != nil {
			f.s.log.Warn("catch up "+f.what+"s after reconnect", "error", err)
			return
		}
		for _, r := range rows {
			publish(r)
			last = max(last, f.id(r))
		}
		if len(rows) < page {
			return
		}
	}
}
