package broadcast

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

type event struct {
	key string
	n   int
}

// mapped is what subscribers receive: a pointer, shared by all of a view's subscribers.
type mapped struct{ label string }

func countingView(calls *int) *View[*event, *mapped] {
	return NewView(func(e *event) *mapped {
		*calls++
		return &mapped{label: e.key + "/" + strconv.Itoa(e.n)}
	})
}

func receive(t *testing.T, ch <-chan *mapped) *mapped {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("channel closed, want a value")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no value")
	}
	return nil
}

func closed(t *testing.T, ch <-chan *mapped) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("got %q, want the channel closed", m.label)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

func empty(t *testing.T, ch <-chan *mapped) {
	t.Helper()
	select {
	case m, ok := <-ch:
		t.Fatalf("got %v (open %v), want nothing", m, ok)
	default:
	}
}

func TestTopicsDeliverOnlyTheKeysValuesInOrderConvertedOnce(t *testing.T) {
	var tp Topics[string, *event]
	calls := 0
	view := countingView(&calls)
	ctx := t.Context()
	a1, a2 := Subscribe(ctx, &tp, "m1", view, 8), Subscribe(ctx, &tp, "m1", view, 8)
	b := Subscribe(ctx, &tp, "m2", view, 8)

	tp.Publish("m1", &event{"m1", 1})
	tp.Publish("m2", &event{"m2", 1})
	tp.Publish("m1", &event{"m1", 2})
	tp.Publish("m3", &event{"m3", 1}) // nobody: not even converted

	if calls != 3 {
		t.Fatalf("converted %d times, want once per value with subscribers (3)", calls)
	}
	for i, want := range []string{"m1/1", "m1/2"} {
		x, y := receive(t, a1), receive(t, a2)
		if x.label != want || x != y {
			t.Fatalf("value %d: %q and %q (same pointer %v), want %q shared", i, x.label, y.label, x == y, want)
		}
	}
	if m := receive(t, b); m.label != "m2/1" {
		t.Fatalf("m2 subscriber got %q", m.label)
	}
	empty(t, a1)
	empty(t, a2)
	empty(t, b) // other machines' values never reach it
}

func TestTopicsRemoveSubscribersWhenTheirContextEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	var tp Topics[string, *event]
	calls := 0
	view := countingView(&calls)
	ctx, cancel := context.WithCancel(t.Context())
	const n = 100
	chans := make([]<-chan *mapped, n)
	for i := range chans {
		chans[i] = Subscribe(ctx, &tp, "m1", view, 4)
	}
	stay := Subscribe(t.Context(), &tp, "m1", view, 4)
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after subscribing, %d before: subscribers must not hold goroutines", got, before)
	}
	cancel()
	for _, ch := range chans {
		closed(t, ch)
	}
	if got := tp.Len("m1"); got != 1 {
		t.Fatalf("%d subscribers left after their contexts ended, want 1", got)
	}
	tp.Publish("m1", &event{"m1", 1})
	if m := receive(t, stay); m.label != "m1/1" {
		t.Fatalf("remaining subscriber got %q", m.label)
	}

	done, stop := context.WithCancel(t.Context())
	stop()
	closed(t, Subscribe(done, &tp, "m1", view, 4)) // an ended context ends it at once
	if got := tp.Len("m1"); got != 1 {
		t.Fatalf("%d subscribers, want 1", got)
	}
	// The unsubscribing callbacks have run and returned.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after the subscribers ended, %d before", got, before)
	}
}

func TestTopicsDropASubscriberThatFallsBehindWithoutHoldingOthers(t *testing.T) {
	var tp Topics[string, *event]
	calls := 0
	view := countingView(&calls)
	slow := Subscribe(t.Context(), &tp, "m1", view, 2)
	fast := Subscribe(t.Context(), &tp, "m1", view, 8)
	for i := 1; i <= 4; i++ {
		tp.Publish("m1", &event{"m1", i}) // the third finds slow full: dropped
	}
	for _, want := range []string{"m1/1", "m1/2"} {
		if m := receive(t, slow); m.label != want {
			t.Fatalf("slow got %q, want %q (what it had room for, in order)", m.label, want)
		}
	}
	closed(t, slow)
	for i := 1; i <= 4; i++ {
		if m := receive(t, fast); m.label != "m1/"+strconv.Itoa(i) {
			t.Fatalf("fast got %q, want m1/%d", m.label, i)
		}
	}
	if got := tp.Len("m1"); got != 1 {
		t.Fatalf("%d subscribers after the drop, want 1", got)
	}
	// Ending a dropped subscriber's context later is harmless.
	ctx, cancel := context.WithCancel(t.Context())
	s := Subscribe(ctx, &tp, "m2", view, 1)
	tp.Publish("m2", &event{"m2", 1})
	tp.Publish("m2", &event{"m2", 2})
	cancel()
	if m := receive(t, s); m.label != "m2/1" {
		t.Fatalf("got %q", m.label)
	}
	closed(t, s)
	if got := tp.Len("m2"); got != 0 {
		t.Fatalf("%d m2 subscribers, want 0", got)
	}
}

func BenchmarkTopicsPublishToManySubscribers(b *testing.B) {
	var tp Topics[string, *event]
	calls := 0
	view := countingView(&calls)
	chans := make([]<-chan *mapped, 1000)
	for i := range chans {
		chans[i] = Subscribe(b.Context(), &tp, "m1", view, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		tp.Publish("m1", &event{"m1", 1})
		for _, ch := range chans {
			<-ch
		}
	}
}
