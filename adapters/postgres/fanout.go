package postgres

import "sync"

// fanout hands the Listener's notifications to the few feeds of this process (one
// goroutine each), without letting a slow feed hold the others back: a feed whose buffer
// is full is dropped (its channel closed) and subscribes again, catching up from the
// database. Subscriptions of clients go through broadcast.Hub, not this.
type fanout[T any] struct {
	mu   sync.Mutex
	subs map[*fanoutTarget[T]]struct{}
}

type fanoutTarget[T any] struct {
	ch      chan T
	dropped bool
}

// fanoutSub is one fanoutTarget's stream.
type fanoutSub[T any] struct {
	C <-chan T
	b *fanout[T]
	s *fanoutTarget[T]
}

// Subscribe starts a stream with room for buffer values not yet read.
func (b *fanout[T]) Subscribe(buffer int) *fanoutSub[T] {
	s := &fanoutTarget[T]{ch: make(chan T, buffer)}
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[*fanoutTarget[T]]struct{}{}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return &fanoutSub[T]{C: s.ch, b: b, s: s}
}

// Close ends the stream. It is safe to call more than once.
func (s *fanoutSub[T]) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s.s]; ok {
		delete(s.b.subs, s.s)
		close(s.s.ch)
	}
}

// Dropped reports whether the stream was ended because the fanoutTarget fell behind.
func (s *fanoutSub[T]) Dropped() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.s.dropped
}

// Publish delivers v to every fanoutTarget that has room, and drops those that have none.
func (b *fanout[T]) Publish(v T) {
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
func (b *fanout[T]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
