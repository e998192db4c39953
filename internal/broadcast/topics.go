package broadcast

import (
	"context"
	"sync"
)

// Topics delivers each published value to the subscribers of its key only, with no
// goroutine per subscriber: Publish hands the value to each of the key's subscribers'
// channels itself. A subscriber whose channel is full is dropped (its channel closed), as
// with Broadcaster.
//
// Subscribers receive values through a View, which converts each published value once for
// all of its subscribers: they share the result and must only read it.
type Topics[K comparable, V any] struct {
	mu   sync.Mutex
	subs map[K]map[*topicSub[V]]struct{}
}

// View converts published values for subscribers; see Topics. Declare one per kind of
// subscriber and share it: conversions are shared per View.
type View[V, T any] struct {
	convert func(V) T
}

// NewView returns a view that converts with convert.
func NewView[V, T any](convert func(V) T) *View[V, T] { return &View[V, T]{convert: convert} }

type topicSub[V any] struct {
	// offer sends v converted without blocking; false when the channel is full.
	offer func(v V, c *converted) bool
	close func()
	stop  func() bool // stops the context.AfterFunc that unsubscribes
}

// converted is the conversion of the value being published, by the view that made it.
type converted struct {
	view, value any
}

// Subscribe streams the values published under key from now on, converted by view, with
// room for buffer values not yet read. The channel is closed when ctx ends or when a
// value finds it full (the subscriber fell behind); either way the subscription is gone.
func Subscribe[K comparable, V, T any](ctx context.Context, t *Topics[K, V], key K, view *View[V, T], buffer int) <-chan T {
	ch := make(chan T, buffer)
	s := &topicSub[V]{
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
		close: func() { close(ch) },
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx.Err() != nil {
		close(ch)
		return ch
	}
	if t.subs == nil {
		t.subs = map[K]map[*topicSub[V]]struct{}{}
	}
	if t.subs[key] == nil {
		t.subs[key] = map[*topicSub[V]]struct{}{}
	}
	t.subs[key][s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.removeLocked(key, s)
	})
	return ch
}

// removeLocked removes s and closes its channel, once.
func (t *Topics[K, V]) removeLocked(key K, s *topicSub[V]) {
	subs := t.subs[key]
	if _, ok := subs[s]; !ok {
		return
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(t.subs, key)
	}
	s.close()
}

// Publish delivers v to the subscribers of key that have room, and drops those that have
// none. Values for a key nobody subscribes to are not converted.
func (t *Topics[K, V]) Publish(key K, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c converted
	for s := range t.subs[key] {
		if !s.offer(v, &c) {
			s.stop()
			t.removeLocked(key, s)
		}
	}
}

// Len returns the number of subscribers of key.
func (t *Topics[K, V]) Len(key K) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs[key])
}
