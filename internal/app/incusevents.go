package app

import (
	"context"
	"sync"
	"time"

	"github.com/apelora/fabric/adapters/incus"
)

// incusEvents is this replica's one follower of Incus's lifecycle events. The fleet stream
// (while anyone subscribes) and the drift watcher (while this replica leads) both need
// them; each following on its own opened two event streams to the same member. Now the
// stream is open while at least one of them follows, and each gets every event, a
// Connected call after each (re)connection (and on joining an open stream: it may have
// missed events before) and a Lost call for each loss (and on joining a lost stream).
type incusEvents struct {
	base  context.Context // the replica's: a stream outlives the follower that opened it
	watch func(context.Context, incus.LifecycleWatch)

	mu        sync.Mutex
	followers map[*incus.LifecycleWatch]struct{}
	stream    *eventStream // nil while nobody follows
}

// eventStream is one run of watch; a stream stopped when its last follower left may still
// deliver a call or two before it ends, which only the current stream passes on.
type eventStream struct {
	cancel    context.CancelFunc
	connected bool
	lost      error // the last loss while not connected
	lostIn    time.Duration
}

// eventStreamMaxBackoff bounds the wait between reconnections to Incus's event stream.
const eventStreamMaxBackoff = 30 * time.Second

func newIncusEvents(base context.Context, c *incus.Client) *incusEvents {
	return &incusEvents{base: base, watch: c.WatchLifecycle, followers: map[*incus.LifecycleWatch]struct{}{}}
}

// follow calls w's functions (its backoffs are ignored: the stream has one) until ctx ends,
// like incus.Client.WatchLifecycle, on the replica's one stream.
func (e *incusEvents) follow(ctx context.Context, w incus.LifecycleWatch) {
	f := &w
	e.mu.Lock()
	e.followers[f] = struct{}{}
	if e.stream == nil {
		e.start()
	} else if s := e.stream; s.connected && w.Connected != nil {
		w.Connected()
	} else if s.lost != nil && w.Lost != nil {
		w.Lost(s.lost, s.lostIn)
	}
	e.mu.Unlock()

	<-ctx.Done()

	e.mu.Lock()
	delete(e.followers, f)
	if len(e.followers) == 0 && e.stream != nil {
		e.stream.cancel()
		e.stream = nil
	}
	e.mu.Unlock()
}

// start opens the stream; e.mu is held.
func (e *incusEvents) start() {
	ctx, cancel := context.WithCancel(e.base)
	s := &eventStream{cancel: cancel}
	e.stream = s
	go e.watch(ctx, incus.LifecycleWatch{
		Connected: func() {
			e.each(s, func(w *incus.LifecycleWatch) {
				if w.Connected != nil {
					w.Connected()
				}
			}, func() { s.connected, s.lost = true, nil })
		},
		Event: func(ev incus.LifecycleEvent) {
			e.each(s, func(w *incus.LifecycleWatch) {
				if w.Event != nil {
					w.Event(ev)
				}
			}, nil)
		},
		Lost: func(err error, retryIn time.Duration) {
			e.each(s, func(w *incus.LifecycleWatch) {
				if w.Lost != nil {
					w.Lost(err, retryIn)
				}
			}, func() { s.connected, s.lost, s.lostIn = false, err, retryIn })
		},
		MaxBackoff: eventStreamMaxBackoff,
	})
}

// each calls call for every follower if s is still the current stream, after note (under
// the lock) records the stream's state for followers that join later. The followers' own
// functions only note and signal (they never block), so they run under the lock: one that
// joins meanwhile gets its first call in order.
func (e *incusEvents) each(s *eventStream, call func(*incus.LifecycleWatch), note func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stream != s {
		return
	}
	if note != nil {
		note()
	}
	for w := range e.followers {
		call(w)
	}
}
