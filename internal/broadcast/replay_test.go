package broadcast

import (
	"context"
	"sync"
	"testing"
	"time"
)

// rows is a stored, published sequence of ids, as a table with a NOTIFY trigger is.
type rows struct {
	mu     sync.Mutex
	stored []int64
	b      Broadcaster[int64]
	buffer int
}

func (r *rows) add(id int64) {
	r.mu.Lock()
	r.stored = append(r.stored, id)
	r.mu.Unlock()
	r.b.Publish(id)
}

func (r *rows) replayed(keep func(int64) bool) Replayed[int64] {
	return Replayed[int64]{
		Subscribe: func() *Subscription[int64] { return r.b.Subscribe(r.buffer) },
		After: func(_ context.Context, after int64, limit int) ([]int64, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			var out []int64
			for _, id := range r.stored {
				if id > after && len(out) < limit {
					out = append(out, id)
				}
			}
			return out, nil
		},
		ID: func(v int64) int64 { return v }, Keep: keep, Batch: 2,
	}
}

func collect(t *testing.T, c <-chan int64, n int) []int64 {
	t.Helper()
	var out []int64
	for len(out) < n {
		select {
		case v, ok := <-c:
			if !ok {
				t.Fatalf("stream ended after %v", out)
			}
			out = append(out, v)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v", out)
		}
	}
	return out
}

func TestReplayThenLiveWithoutGapsOrRepeats(t *testing.T) {
	r := &rows{buffer: 64}
	for id := int64(1); id <= 5; id++ {
		r.add(id)
	}
	from := int64(2)
	c := Replay(t.Context(), r.replayed(func(v int64) bool { return v != 4 }), &from)
	r.add(6)
	got := collect(t, c, 3)
	if len(got) != 3 || got[0] != 3 || got[1] != 5 || got[2] != 6 {
		t.Fatalf("got %v, want [3 5 6] (4 filtered out)", got)
	}
	// Live only: nothing stored is replayed.
	live := Replay(t.Context(), r.replayed(nil), nil)
	r.add(7)
	if got := collect(t, live, 1); got[0] != 7 {
		t.Fatalf("live got %v", got)
	}
}

func TestReplayCatchesUpASubscriberThatFellBehind(t *testing.T) {
	r := &rows{buffer: 1}
	from := int64(0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := Replay(ctx, r.replayed(nil), &from)
	for id := int64(1); id <= 20; id++ {
		r.add(id) // the stream reads slower than this: its subscription is dropped
	}
	got := collect(t, c, 20)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("got %v", got)
		}
	}
	cancel()
	for range c {
	}
}
