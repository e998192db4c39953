package postgres

import (
	"context"

	"github.com/apelora/fabric/domain/fencing"
)

// FenceChannel is the NOTIFY channel the fence_events trigger writes to.
const FenceChannel = "fence_events"

// FenceFeed publishes fence events as they are recorded, on every replica, keyed by
// member.
type FenceFeed = rowFeed[fencing.Event]

// NewFenceFeed returns a feed; call Run with the listener.
func (s *Store) NewFenceFeed() *FenceFeed {
	f := newRowFeed(s, FenceChannel, "fence event",
		func(e fencing.Event) int64 { return e.ID },
		func(e fencing.Event) string { return e.Member })
	f.last = func(ctx context.Context) (int64, error) { return s.lastID(ctx, "fence_events") }
	f.after = func(ctx context.Context, after int64, limit int) ([]fencing.Event, error) {
		return s.Fences().EventsAfter(ctx, 0, "", after, limit)
	}
	return f
}
