// Package broadcast fans values out to many subscribers without letting a slow one hold
// the others back: a subscriber whose buffer is full is dropped (its channel closed), and
// its stream ends with an error the client can reconnect from.
package broadcast

import "sync"

// Broadcaster delivers each published value to every current subscriber.
type Broadcaster[T any] struct {
	mu   sync.Mutex
	subs map[*subscriber[T]]struct{}
}

type subscriber[T any] struct {
	ch      chan T
	dropped bool
}

// Subscription is one subscriber's stream.
type Subscription[T any] struct {
	C <-chan T
	b *Broadcaster[T]
	s *subscriber[T]
}

// Subscribe starts a stream with room for buffer values not yet read.
func (b *Broadcaster[T]) Subscribe(buffer int) *Subscription[T] {
	s := &subscriber[T]{ch: make(chan T, buffer)}
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[*subscriber[T]]struct{}{}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return &Subscription[T]{C: s.ch, b: b, s: s}
}

// Close ends the stream. It is safe to call more than once.
func (s *Subscription[T]) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s.s]; ok {
		delete(s.b.subs, s.s)
		close(s.s.ch)
	}
}

// Dropped reports whether the stream was ended because the subscriber fell behind.
func (s *Subscription[T]) Dropped() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.s.dropped
}

// Publish delivers v to every subscriber that has room, and drops those that have none.
func (b *Broadcaster[T]) Publish(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.ch <- v:
		default:
			s.dropped = true
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

// Len returns the number of subscribers.
func (b *Broadcaster[T]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
