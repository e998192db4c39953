package postgres

import (
	"context"
	"strconv"

	"github.com/apelora/fabric/fencing"
	"github.com/apelora/fabric/internal/broadcast"
)

// FenceChannel is the NOTIFY channel the fence_events trigger writes to.
const FenceChannel = "fence_events"

// FenceFeed turns fence-event notifications into events, reading each once per process
// however many subscribers there are.
type FenceFeed struct {
	s *Store
	b broadcast.Broadcaster[fencing.Event]
}

var _ fencing.Feed = (*FenceFeed)(nil)

// NewFenceFeed returns a feed; call Run with the listener.
func (s *Store) NewFenceFeed() *FenceFeed { return &FenceFeed{s: s} }

// Subscribe streams events recorded from now on.
func (f *FenceFeed) Subscribe(buffer int) *broadcast.Subscription[fencing.Event] {
	return f.b.Subscribe(buffer)
}

// Run forwards events until ctx ends. After a lost connection it reads what was recorded
// meanwhile, so subscribers miss nothing.
func (f *FenceFeed) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(FenceChannel, 1024)
	defer func() { sub.Close() }()
	var last int64
	publish := func(e fencing.Event) {
		if e.ID > last {
			f.b.Publish(e)
			last = e.ID
		}
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
			sub = l.Subscribe(FenceChannel, 1024)
			n = Notification{Resync: true}
		}
		if n.Resync {
			if last == 0 {
				continue
			}
			for {
				events, err := f.s.Fences().EventsAfter(ctx, "", last, 1000)
				if err != nil {
					f.s.log.Warn("catch up fence events after reconnect", "error", err)
					break
				}
				for _, e := range events {
					publish(e)
				}
				if len(events) < 1000 {
					break
				}
			}
			continue
		}
		id, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil || id <= last {
			continue
		}
		e, err := f.s.FenceEvent(ctx, id)
		if err != nil || e == nil {
			if err != nil {
				f.s.log.Warn("read notified fence event", "id", id, "error", err)
			}
			continue
		}
		publish(*e)
	}
}
