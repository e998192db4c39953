// Package broadcast is the one way a stream reaches its subscribers (admission checks,
// audit events, fence progress): a Hub hands each published value to the channels of the
// subscribers that want it, with no goroutine per subscriber, converting it once for all
// of them; a slow subscriber never holds the others back.
//
// A stream stored in a table in order (audit events, fence events: each value has a
// position, its row id, and rows become visible in id order) can be replayed: a
// subscriber may ask for the values after a position first, then the live ones, without
// gaps or repeats, and a subscriber that falls behind catches up from the table on its
// own, missing nothing. Only while it replays does a subscriber have a goroutine. A
// stream that is not stored (admission checks) has nothing to replay: a subscriber that
// falls behind is dropped, its channel closed, and the client subscribes again.
package broadcast

import (
	"context"
	"math"
	"sync"
)

// Hub delivers the values published on it to their subscribers. Values are published
// under a key (a machine, a member); a subscriber wants one key's values or every key's.
type Hub[K comparable, V any] struct {
	pos    func(V) int64 // a value's position; nil: the hub numbers values itself
	size   int           // how many recent values are kept for subscribers catching up
	starts chan struct{} // closed by Start

	mu     sync.Mutex
	head   int64 // the last position published
	floor  int64 // recent holds every value published after floor
	recent []entry[K, V]
	byKey  map[K]map[*subscriber[K, V]]struct{}
	every  map[*subscriber[K, V]]struct{}
}

type entry[K comparable, V any] struct {
	key K
	v   V
	pos int64
}

// NewHub returns a hub. For a stream stored in a table, pos gives a value's position (its
// row id) and recent how many of the last values to keep in memory, so that a subscriber
// switching from the table to the live values rarely has to read the table twice; call
// Start with the table's last position before publishing. For a stream that is not
// stored, pass nil and 0: the hub numbers the values and starts at once.
func NewHub[K comparable, V any](pos func(V) int64, recent int) *Hub[K, V] {
	h := &Hub[K, V]{pos: pos, size: recent, starts: make(chan struct{}), floor: math.MaxInt64}
	if pos == nil {
		h.Start(0)
	}
	return h
}

// Start sets the position the hub starts from (the table's last row when its feed
// begins): the values up to it are in the table. Subscribers that replay wait for it.
// Later calls do nothing.
func (h *Hub[K, V]) Start(head int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.starts:
		return
	default:
	}
	h.head, h.floor = head, head
	close(h.starts)
}

// Started is closed once the hub has started. A live subscriber receives what is
// published after it subscribed: wait for this before serving subscribers.
func (h *Hub[K, V]) Started() <-chan struct{} { return h.starts }

// Head returns the last position published (or started from).
func (h *Hub[K, V]) Head() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head
}

// Want says what one subscriber receives.
type Want[K comparable, V any] struct {
	// Key is the key whose values are wanted, unless All.
	Key K
	All bool
	// Match keeps only the values it accepts (nil: every value of the key).
	Match func(V) bool
	// After, when set, asks first for the values after this position (the last one the
	// client has), then the live ones. It needs Replay.
	After *int64
	// Replay reads the stored values after a position, oldest first, at most limit, the
	// same ones Key, All and Match keep. With it, a subscriber that falls behind catches
	// up from the table; without it (a stream that is not stored), it is dropped.
	Replay func(ctx context.Context, after int64, limit int) ([]V, error)
}

// ReplayPage is how many stored values a replay reads at a time.
const ReplayPage = 500

// View converts published values for subscribers. Declare one per kind of subscriber and
// share it: each value is converted once per View for all its subscribers, which share
// the result and must only read it.
type View[V, T any] struct {
	convert func(V) T
}

// NewView returns a view that converts with convert, which must be safe to call from
// several goroutines (a replaying subscriber converts in its own).
func NewView[V, T any](convert func(V) T) *View[V, T] { return &View[V, T]{convert: convert} }

// converted is the conversion of the value being published, by the view that made it.
type converted struct {
	view, value any
}

type state int

const (
	live       state = iota // in the hub's sets: Publish delivers to it
	catchingUp              // its own goroutine replays; Publish skips it
	gone
)

type subscriber[K comparable, V any] struct {
	want  Want[K, V]
	ctx   context.Context
	state state
	// pos: every wanted value up to here has been delivered (or was not wanted).
	pos int64
	// offer sends v converted without blocking; false when the channel is full.
	offer func(v V, c *converted) bool
	// send sends v converted, waiting for room until ctx ends.
	send  func(v V) bool
	close func()
	stop  func() bool // stops the context.AfterFunc that unsubscribes
}

// Subscribe returns the channel of what want asks for, converted by view, with room for
// buffer values not yet read. The channel is closed when ctx ends, when the subscriber
// falls behind a stream that cannot be replayed, or when a replay fails (the client
// subscribes again with the last position it has).
func Subscribe[K comparable, V, T any](ctx context.Context, h *Hub[K, V], want Want[K, V], view *View[V, T], buffer int) <-chan T {
	ch := make(chan T, buffer)
	s := &subscriber[K, V]{
		want: want,
		ctx:  ctx,
		offer: func(v V, c *converted) bool {
			var out T
			if c.view == any(view) {
				out = c.value.(T)
			} else {
				out = view.convert(v)
				*c = converted{view: view, value: out}
			}
			select {
			case ch <- out:
				return true
			default:
				return false
			}
		},
		send: func(v V) bool {
			select {
			case ch <- view.convert(v):
				return true
			case <-ctx.Done():
				return false
			}
		},
		close: func() { close(ch) },
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		close(ch)
		return ch
	}
	s.stop = context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.state == live { // a subscriber catching up is ended by its own goroutine
			h.removeLocked(s)
			s.state = gone
			s.close()
		}
	})
	if want.After != nil && want.Replay != nil {
		s.state, s.pos = catchingUp, *want.After
		go h.catchUp(s)
		return ch
	}
	s.pos = h.head
	h.addLocked(s)
	return ch
}

func (h *Hub[K, V]) addLocked(s *subscriber[K, V]) {
	s.state = live
	if s.want.All {
		if h.every == nil {
			h.every = map[*subscriber[K, V]]struct{}{}
		}
		h.every[s] = struct{}{}
		return
	}
	if h.byKey == nil {
		h.byKey = map[K]map[*subscriber[K, V]]struct{}{}
	}
	if h.byKey[s.want.Key] == nil {
		h.byKey[s.want.Key] = map[*subscriber[K, V]]struct{}{}
	}
	h.byKey[s.want.Key][s] = struct{}{}
}

func (h *Hub[K, V]) removeLocked(s *subscriber[K, V]) {
	if s.want.All {
		delete(h.every, s)
		return
	}
	subs := h.byKey[s.want.Key]
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.byKey, s.want.Key)
	}
}

// end closes a subscriber that is not live (its catching up ended).
func (h *Hub[K, V]) end(s *subscriber[K, V]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.state != gone {
		s.state = gone
		s.stop()
		s.close()
	}
}

// Publish delivers v to the subscribers that want it. A value at or before the last
// position published is ignored (a row read twice), so a stored stream is never
// repeated. A subscriber whose channel is full is not waited for: it catches up on its
// own from the table, or, for a stream that is not stored, it is dropped.
func (h *Hub[K, V]) Publish(key K, v V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.head + 1
	if h.pos != nil {
		p = h.pos(v)
	}
	if p <= h.head {
		return
	}
	prev := h.head
	h.head = p
	if h.size > 0 {
		h.recent = append(h.recent, entry[K, V]{key, v, p})
		if len(h.recent) > h.size {
			h.floor = h.recent[0].pos
			h.recent = h.recent[1:]
		}
	} else {
		h.floor = p
	}
	var c converted
	deliver := func(s *subscriber[K, V]) {
		if p <= s.pos || s.want.Match != nil && !s.want.Match(v) {
			return
		}
		if s.offer(v, &c) {
			s.pos = p
			return
		}
		// It fell behind: everything before this value reached it.
		h.removeLocked(s)
		if s.want.Replay == nil {
			s.state = gone
			s.stop()
			s.close()
			return
		}
		s.state, s.pos = catchingUp, max(s.pos, prev)
		go h.catchUp(s)
	}
	for s := range h.byKey[key] {
		deliver(s)
	}
	for s := range h.every {
		deliver(s)
	}
}

// catchUp sends a subscriber what it wants after s.pos, from the recent values while they
// reach back that far and from the table before that, waiting for room in its channel,
// then makes it live again. Only here does a subscriber have a goroutine of its own.
func (h *Hub[K, V]) catchUp(s *subscriber[K, V]) {
	select {
	case <-h.starts:
	case <-s.ctx.Done():
		h.end(s)
		return
	}
	for {
		h.mu.Lock()
		if s.ctx.Err() != nil {
			h.mu.Unlock()
			h.end(s)
			return
		}
		if s.pos >= h.floor {
			// The recent values hold everything after s.pos.
			batch, to := h.recentAfterLocked(s, ReplayPage)
			if len(batch) == 0 {
				s.pos = max(s.pos, to)
				h.addLocked(s)
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			for _, e := range batch {
				if !s.send(e.v) {
					h.end(s)
					return
				}
				s.pos = e.pos
			}
			s.pos = max(s.pos, to)
			continue
		}
		head := h.head
		h.mu.Unlock()
		if s.want.Replay == nil {
			h.end(s) // nothing to replay from
			return
		}
		rows, err := s.want.Replay(s.ctx, s.pos, ReplayPage)
		if err != nil {
			h.end(s)
			return
		}
		for _, v := range rows {
			if !s.send(v) {
				h.end(s)
				return
			}
			s.pos = h.pos(v)
		}
		if len(rows) < ReplayPage {
			// Everything published up to head had committed before the read, so the
			// read saw every wanted value up to there.
			s.pos = max(s.pos, head)
		}
	}
}

// recentAfterLocked returns up to n recent values after s.pos that s wants, and the
// position up to which it looked.
func (h *Hub[K, V]) recentAfterLocked(s *subscriber[K, V], n int) ([]entry[K, V], int64) {
	var out []entry[K, V]
	to := s.pos
	for _, e := range h.recent {
		if e.pos <= s.pos {
			continue
		}
		if len(out) == n {
			break
		}
		to = e.pos
		if (s.want.All || e.key == s.want.Key) && (s.want.Match == nil || s.want.Match(e.v)) {
			out = append(out, e)
		}
	}
	return out, to
}

// Len returns the number of live subscribers of key (with all, of every key).
func (h *Hub[K, V]) Len(key K, all bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if all {
		return len(h.every)
	}
	return len(h.byKey[key])
}
