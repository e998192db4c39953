package postgres

import (
	"context"

	"github.com/apelora/fabric/fencing"
)

// FenceChannel is the NOTIFY channel the fence_events trigger writes to.
const FenceChannel = "fence_events"

// FenceFeed streams fence events as they are recorded, on every replica.
type FenceFeed = rowFeed[fencing.Event]

var _ fencing.Feed = (*FenceFeed)(nil)

// NewFenceFeed returns a feed; call Run with the listener.
func (s *Store) NewFenceFeed() *FenceFeed {
	return &FenceFeed{s: s, channel: FenceChannel, what: "fence event",
		id:  func(e fencing.Event) int64 { return e.ID },
		one: s.FenceEvent,
		after: func(ctx context.Context, after int64, limit int) ([]fencing.Event, error) {
			return s.Fences().EventsAfter(ctx, "", after, limit)
		},
	}
}
