package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// refusalRecorder keeps what a refusalLog writes, on a clock the test moves.
type refusalRecorder struct {
	mu     sync.Mutex
	events []refusalEvent
}

func (r *refusalRecorder) write(e refusalEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *refusalRecorder) take() []refusalEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// endWindow moves the clock to the end of l's window and ends it, as its timer would.
func endWindow(l *refusalLog, now *time.Time) {
	l.mu.Lock()
	*now = l.end
	l.mu.Unlock()
	l.tick()
}

// testRefusalLog is a log whose window ends only when the test says (endWindow), on its
// clock.
func testRefusalLog(t *testing.T) (*refusalLog, *refusalRecorder, *time.Time) {
	t.Helper()
	rec := &refusalRecorder{}
	now := time.Unix(1_000_000, 0)
	l := newRefusalLog(nil, time.Minute, rec.write)
	l.now = func() time.Time { return now }
	t.Cleanup(func() {
		l.mu.Lock()
		l.closed = true
		if l.timer != nil {
			l.timer.Stop()
		}
		l.mu.Unlock()
	})
	return l, rec, &now
}

func count(e refusalEvent) int { return e.details[e.kind.count].(int) }

// Issue 25: the 429 event said 1 refusal for 290. Now the first refusal is written at
// once (counting 1) and the other 289 in one event at the window's end; every refusal is
// in exactly one event.
func TestRefusalCountsAreTrue(t *testing.T) {
	l, rec, now := testRefusalLog(t)
	ctx := context.Background()
	for i := range 290 {
		l.note(ctx, rateLimitedRefusals, "192.0.2.7", "anonymous", fmt.Sprintf("refusal %d", i), nil)
		*now = now.Add(100 * time.Millisecond)
	}
	first := rec.take()
	if len(first) != 1 || count(first[0]) != 1 || first[0].message != "refusal 0" || first[0].details["address"] != "192.0.2.7" {
		t.Fatalf("at the first refusal: %+v", first)
	}
	endWindow(l, now)
	end := rec.take()
	if len(end) != 1 || count(end[0]) != 289 || end[0].message != "refusal 1" || end[0].details["window"] != "1m0s" {
		t.Fatalf("at the window's end: %+v", end)
	}
	// A steady attacker is one event per window, not a new "first" each time.
	for range 30 {
		l.note(ctx, rateLimitedRefusals, "192.0.2.7", "anonymous", "again", nil)
		*now = now.Add(time.Second)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a continuing attacker got events before the window ended: %+v", got)
	}
	endWindow(l, now)
	if got := rec.take(); len(got) != 1 || count(got[0]) != 30 {
		t.Fatalf("the next window: %+v", got)
	}
	// Quiet for a window: the next refusal starts a new episode, written at once.
	*now = now.Add(2 * time.Minute)
	l.note(ctx, rateLimitedRefusals, "192.0.2.7", "anonymous", "back", nil)
	if got := rec.take(); len(got) != 1 || count(got[0]) != 1 || got[0].message != "back" {
		t.Fatalf("after a quiet window: %+v", got)
	}
}

// Issue 25: a flood from 2,000 addresses wrote 2,000 events. Now RefusalRowsPerWindow
// addresses get events of their own at once, and the window's end writes one summary for
// all of them, with the true total and the addresses with the most.
func TestRefusalEventsAreBoundedPerWindow(t *testing.T) {
	l, rec, now := testRefusalLog(t)
	ctx := context.Background()
	total := 0
	for i := range 2000 {
		n := 1 + i%3
		if i == 1234 {
			n = 50
		}
		for range n {
			l.note(ctx, failedSignIns, fmt.Sprintf("10.0.%d.%d", i/256, i%256), "anonymous", "wrong token", nil)
			total++
		}
		*now = now.Add(time.Millisecond)
	}
	first := rec.take()
	if len(first) != RefusalRowsPerWindow {
		t.Fatalf("%d events while the flood came, want %d", len(first), RefusalRowsPerWindow)
	}
	endWindow(l, now)
	end := rec.take()
	if len(end) != 1 {
		t.Fatalf("%d events at the window's end, want one summary", len(end))
	}
	s := end[0]
	written := len(first) + count(s)
	most := s.details["most"].([]map[string]any)
	// The addresses whose one failure had its event at once are not in the summary.
	if addrs := s.details["addresses"].(int); addrs < 2000-RefusalRowsPerWindow || written != total || len(most) != refusalSummaryKeys ||
		most[0]["address"] != "10.0.4.210" || most[0]["failed"] != 50 || s.actor != "anonymous" {
		t.Fatalf("summary %q %+v: %d of %d failures written", s.message, s.details, written, total)
	}
}

// An identity's refusals are keyed by the identity and its limit, the identity their
// actor; several limits of one identity are counted apart.
func TestIdentityRefusalsAreTheirActors(t *testing.T) {
	l, rec, now := testRefusalLog(t)
	ctx := context.Background()
	for range 5 {
		l.note(ctx, identityLimitRefusals, "viewer/subscriptions", "viewer", "too many subscriptions", map[string]any{"limit": "subscriptions", "max": 512})
	}
	l.note(ctx, identityLimitRefusals, "viewer/websockets", "viewer", "too many websockets", map[string]any{"limit": "websockets", "max": 32})
	endWindow(l, now)
	got := map[string]int{}
	for _, e := range rec.take() {
		if e.actor != "viewer" || e.kind.action != IdentityLimited || e.details["address"] != nil {
			t.Fatalf("event %+v", e)
		}
		got[e.details["limit"].(string)] += count(e)
	}
	if got["subscriptions"] != 5 || got["websockets"] != 1 {
		t.Fatalf("counted %v", got)
	}
}

// Stopping writes what was counted: no refusal is lost at shutdown.
func TestRefusalLogWritesItsCountsWhenStopped(t *testing.T) {
	rec := &refusalRecorder{}
	stop, cancel := context.WithCancel(context.Background())
	l := newRefusalLog(stop, time.Hour, rec.write)
	for range 7 {
		l.note(context.Background(), rateLimitedRefusals, "192.0.2.9", "anonymous", "x", nil)
	}
	cancel()
	written := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, e := range rec.events {
			n += count(e)
		}
		return n
	}
	// The stop's writing runs on its own goroutine (context.AfterFunc): wait for it.
	for deadline := time.Now().Add(10 * time.Second); written() < 7 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := written(); n != 7 {
		t.Fatalf("%d of 7 refusals written at the stop", n)
	}
}
