package broadcast

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type event struct {
	key string
	n   int
}

// key wants one key's values.
func key(k string) Want[string, *event] { return Want[string, *event]{Key: k} }

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

func TestHubDeliversOnlyTheKeysValuesInOrderConvertedOnce(t *testing.T) {
	tp := NewHub[string, *event](nil, 0)
	calls := 0
	view := countingView(&calls)
	ctx := t.Context()
	a1, a2 := Subscribe(ctx, tp, key("m1"), view, 8), Subscribe(ctx, tp, key("m1"), view, 8)
	b := Subscribe(ctx, tp, key("m2"), view, 8)

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

func TestHubRemovesSubscribersWhenTheirContextEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	tp := NewHub[string, *event](nil, 0)
	calls := 0
	view := countingView(&calls)
	ctx, cancel := context.WithCancel(t.Context())
	const n = 100
	chans := make([]<-chan *mapped, n)
	for i := range chans {
		chans[i] = Subscribe(ctx, tp, key("m1"), view, 4)
	}
	stay := Subscribe(t.Context(), tp, key("m1"), view, 4)
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after subscribing, %d before: subscribers must not hold goroutines", got, before)
	}
	cancel()
	for _, ch := range chans {
		closed(t, ch)
	}
	if got := tp.Len("m1", false); got != 1 {
		t.Fatalf("%d subscribers left after their contexts ended, want 1", got)
	}
	tp.Publish("m1", &event{"m1", 1})
	if m := receive(t, stay); m.label != "m1/1" {
		t.Fatalf("remaining subscriber got %q", m.label)
	}

	done, stop := context.WithCancel(t.Context())
	stop()
	closed(t, Subscribe(done, tp, key("m1"), view, 4)) // an ended context ends it at once
	if got := tp.Len("m1", false); got != 1 {
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

func TestHubDropsASubscriberThatFallsBehindAStreamNotStoredWithoutHoldingOthers(t *testing.T) {
	tp := NewHub[string, *event](nil, 0)
	calls := 0
	view := countingView(&calls)
	slow := Subscribe(t.Context(), tp, key("m1"), view, 2)
	fast := Subscribe(t.Context(), tp, key("m1"), view, 8)
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
	if got := tp.Len("m1", false); got != 1 {
		t.Fatalf("%d subscribers after the drop, want 1", got)
	}
	// Ending a dropped subscriber's context later is harmless.
	ctx, cancel := context.WithCancel(t.Context())
	s := Subscribe(ctx, tp, key("m2"), view, 1)
	tp.Publish("m2", &event{"m2", 1})
	tp.Publish("m2", &event{"m2", 2})
	cancel()
	if m := receive(t, s); m.label != "m2/1" {
		t.Fatalf("got %q", m.label)
	}
	closed(t, s)
	if got := tp.Len("m2", false); got != 0 {
		t.Fatalf("%d m2 subscribers, want 0", got)
	}
}

func BenchmarkHubPublishToManySubscribers(b *testing.B) {
	tp := NewHub[string, *event](nil, 0)
	calls := 0
	view := countingView(&calls)
	chans := make([]<-chan *mapped, 1000)
	for i := range chans {
		chans[i] = Subscribe(b.Context(), tp, key("m1"), view, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		tp.Publish("m1", &event{"m1", 1})
		for _, ch := range chans {
			<-ch
		}
	}
}

// plainView converts without counting: a replaying subscriber converts in its own
// goroutine, so views must be safe for concurrent use.
var plainView = NewView(func(e *event) *mapped { return &mapped{label: e.key + "/" + strconv.Itoa(e.n)} })

// table is a stored stream: rows in position order, as audit_events and fence_events are.
type table struct {
	mu    sync.Mutex
	rows  []*event // event.n is the position
	reads int
	// during, when set, runs inside the next read, after it has taken its rows: writes
	// that commit while the read is under way.
	during func()
}

func (tb *table) add(h *Hub[string, *event], key string) *event {
	tb.mu.Lock()
	e := &event{key, len(tb.rows) + 1}
	tb.rows = append(tb.rows, e)
	tb.mu.Unlock()
	if h != nil {
		h.Publish(key, e)
	}
	return e
}

func (tb *table) replay(want func(*event) bool) func(context.Context, int64, int) ([]*event, error) {
	return func(_ context.Context, after int64, limit int) ([]*event, error) {
		tb.mu.Lock()
		tb.reads++
		during := tb.during
		tb.during = nil
		var out []*event
		for _, e := range tb.rows {
			if int64(e.n) > after && want(e) && len(out) < limit {
				out = append(out, e)
			}
		}
		tb.mu.Unlock()
		if during != nil {
			during() // committed after the read's snapshot: not in out
		}
		return out, nil
	}
}

func storedHub() *Hub[string, *event] {
	return NewHub[string, *event](func(e *event) int64 { return int64(e.n) }, 8)
}

// positions reads n values and returns their positions.
func positions(t *testing.T, ch <-chan *mapped, n int) []int {
	t.Helper()
	out := make([]int, 0, n)
	for range n {
		m := receive(t, ch)
		_, after, _ := strings.Cut(m.label, "/")
		p, _ := strconv.Atoi(after)
		out = append(out, p)
	}
	return out
}

func consecutive(t *testing.T, got []int, from int) {
	t.Helper()
	for i, p := range got {
		if p != from+i {
			t.Fatalf("value %d is at position %d, want %d (a gap or a repeat): %v", i, p, from+i, got)
		}
	}
}

func TestHubReplaysAStoredStreamThenGoesLiveWithoutGapsOrRepeats(t *testing.T) {
	h := storedHub()
	tb := &table{}
	for _, k := range []string{"m1", "m2", "m1"} {
		tb.add(nil, k)
	}
	h.Start(3)
	view := plainView
	after := int64(1)
	every := Subscribe(t.Context(), h, Want[string, *event]{All: true, After: &after, Replay: tb.replay(func(*event) bool { return true })}, view, 16)
	m1 := Subscribe(t.Context(), h, Want[string, *event]{Key: "m1", After: &after, Replay: tb.replay(func(e *event) bool { return e.key == "m1" })}, view, 16)
	if got := positions(t, every, 2); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("replayed %v, want 2 3", got)
	}
	if got := positions(t, m1, 1); !slices.Equal(got, []int{3}) {
		t.Fatalf("replayed for m1 %v, want 3", got)
	}
	waitLive(t, h, "m1", 1)
	tb.add(h, "m1")
	tb.add(h, "m2")
	h.Publish("m1", tb.rows[2]) // a row read twice is not pushed twice
	tb.add(h, "m1")
	if got := positions(t, every, 3); !slices.Equal(got, []int{4, 5, 6}) {
		t.Fatalf("live %v, want 4 5 6", got)
	}
	if got := positions(t, m1, 2); !slices.Equal(got, []int{4, 6}) {
		t.Fatalf("live for m1 %v, want 4 6", got)
	}
	empty(t, every)
	empty(t, m1)
}

// waitLive waits until key has n live subscribers (all: of every key).
func waitLive(t *testing.T, h *Hub[string, *event], k string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.Len(k, k == "") != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d live subscribers of %q, want %d", h.Len(k, k == ""), k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Values recorded while a subscriber reads the table are neither lost nor repeated when it
// switches to the live values, whether the recent values still hold them or not.
func TestHubSwitchesFromTheTableToLiveValuesWithoutAGap(t *testing.T) {
	for _, written := range []int{3, 40} { // fewer, then more, than the hub keeps
		h := storedHub()
		tb := &table{}
		tb.add(nil, "m1")
		h.Start(1)
		tb.during = func() {
			for range written {
				tb.add(h, "m1")
			}
		}
		after := int64(0)
		ch := Subscribe(t.Context(), h, Want[string, *event]{All: true, After: &after, Replay: tb.replay(func(*event) bool { return true })}, plainView, 64)
		consecutive(t, positions(t, ch, 1+written), 1)
		waitLive(t, h, "", 1)
		tb.add(h, "m2")
		consecutive(t, positions(t, ch, 1), 2+written)
		empty(t, ch)
	}
}

// A subscriber of a stored stream that falls behind is not dropped and does not hold the
// others: it catches up from the recent values or the table, then is live again with no
// goroutine of its own.
func TestHubSubscriberThatFallsBehindAStoredStreamCatchesUpFromTheTable(t *testing.T) {
	h := storedHub()
	tb := &table{}
	h.Start(0)
	view := plainView
	all := func(*event) bool { return true }
	before := runtime.NumGoroutine()
	slow := Subscribe(t.Context(), h, Want[string, *event]{All: true, Replay: tb.replay(all)}, view, 2)
	fast := Subscribe(t.Context(), h, Want[string, *event]{All: true, Replay: tb.replay(all)}, view, 1000)
	for range 600 { // far past slow's buffer and the recent values
		tb.add(h, "m1")
	}
	consecutive(t, positions(t, fast, 600), 1)
	consecutive(t, positions(t, slow, 600), 1)
	if tb.reads == 0 {
		t.Fatal("the slow subscriber did not read the table")
	}
	waitLive(t, h, "", 2)
	tb.add(h, "m1")
	consecutive(t, positions(t, slow, 1), 601)
	consecutive(t, positions(t, fast, 1), 601)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines once caught up, %d before: a live subscriber holds none", got, before)
	}
}

func TestHubReplayWaitsForStartAndEndsWithItsContext(t *testing.T) {
	h := storedHub()
	tb := &table{}
	tb.add(nil, "m1")
	after := int64(0)
	ch := Subscribe(t.Context(), h, Want[string, *event]{All: true, After: &after, Replay: tb.replay(func(*event) bool { return true })}, plainView, 4)
	time.Sleep(20 * time.Millisecond)
	empty(t, ch) // the hub has not started: the feed has not read the table's end yet
	h.Start(1)
	consecutive(t, positions(t, ch, 1), 1)

	ctx, cancel := context.WithCancel(t.Context())
	stuck := Subscribe(ctx, h, Want[string, *event]{All: true, After: &after, Replay: tb.replay(func(*event) bool { return true })}, plainView, 0)
	cancel() // while it waits to hand over its first value
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-stuck:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("a replaying subscriber whose context ended was not closed")
		}
	}
}

// The replay tests of broadcast.Replay (the goroutine-per-subscriber loop the hub
// replaced), with their assertions.
func TestHubReplayFiltersThenGoesLive(t *testing.T) {
	h := storedHub()
	tb := &table{}
	for range 5 {
		tb.add(nil, "m1")
	}
	h.Start(5)
	from := int64(2)
	keep := func(e *event) bool { return e.n != 4 }
	c := Subscribe(t.Context(), h, Want[string, *event]{All: true, Match: keep, After: &from, Replay: tb.replay(keep)}, plainView, 16)
	tb.add(h, "m1")
	if got := positions(t, c, 3); !slices.Equal(got, []int{3, 5, 6}) {
		t.Fatalf("got %v, want [3 5 6] (4 filtered out)", got)
	}
	// Live only: nothing stored is replayed.
	live := Subscribe(t.Context(), h, Want[string, *event]{All: true}, plainView, 16)
	tb.add(h, "m1")
	if got := positions(t, live, 1); got[0] != 7 {
		t.Fatalf("live got %v", got)
	}
}

func TestHubReplayCatchesUpASubscriberThatFellBehind(t *testing.T) {
	h := storedHub()
	tb := &table{}
	h.Start(0)
	from := int64(0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := Subscribe(ctx, h, Want[string, *event]{All: true, After: &from, Replay: tb.replay(func(*event) bool { return true })}, plainView, 1)
	for range 20 {
		tb.add(h, "m1") // faster than the stream is read
	}
	consecutive(t, positions(t, c, 20), 1)
	cancel()
	for range c {
	}
}
