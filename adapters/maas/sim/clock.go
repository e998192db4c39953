package sim

import (
	"sort"
	"sync"
	"time"
)

// Clock drives the simulator's timed transitions (commissioning, testing,
// deploying, releasing, power-off delays). Tests use a FakeClock so nothing
// depends on wall time; the binary uses RealClock.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f after d, in its own goroutine for RealClock and
	// synchronously inside Advance for FakeClock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer cancels a scheduled function.
type Timer interface {
	Stop() bool
}

// RealClock is wall time.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// FakeClock only moves when Advance is called.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
}

// NewFakeClock starts a fake clock at start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

type fakeTimer struct {
	c   *FakeClock
	due time.Time
	seq uint64 // keeps timers with the same due time in creation order
	f   func()
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f; it runs during the Advance that reaches its due time.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, due: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves time forward by d, running every timer that falls due, in
// due order, with Now() equal to each timer's due time while it runs. Timers
// scheduled by those functions also run if they fall within d. Advance(0)
// runs timers that are already due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].due.Equal(c.timers[j].due) {
				return c.timers[i].due.Before(c.timers[j].due)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].due.After(target) {
			c.now = target
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		if t.due.After(c.now) {
			c.now = t.due
		}
		c.mu.Unlock()
		t.f() // without the lock: f may schedule more timers
	}
}

// Pending reports how many timers are waiting.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
