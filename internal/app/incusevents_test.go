package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
)

// seen records what a follower was told.
type seen struct {
	mu  sync.Mutex
	got []string
}

func (s *seen) add(what string) { s.mu.Lock(); s.got = append(s.got, what); s.mu.Unlock() }
func (s *seen) list() []string  { s.mu.Lock(); defer s.mu.Unlock(); return slices.Clone(s.got) }

func (s *seen) watch() incus.LifecycleWatch {
	return incus.LifecycleWatch{
		Connected: func() { s.add("connected") },
		Event:     func(e incus.LifecycleEvent) { s.add(e.Action) },
		Lost:      func(err error, _ time.Duration) { s.add("lost: " + err.Error()) },
	}
}

type streamRun struct {
	ctx context.Context
	w   incus.LifecycleWatch
}

// The fleet stream and drift share one lifecycle stream per replica: it opens for the
// first follower, every follower gets every call, one that joins late is told the state
// (connected: read again; lost: the loss), and the stream closes with its last follower;
// what a closed stream still says reaches nobody.
func TestOneIncusEventStreamFeedsEveryFollower(t *testing.T) {
	runs := make(chan streamRun, 4)
	e := &incusEvents{base: context.Background(), followers: map[*incus.LifecycleWatch]struct{}{},
		watch: func(ctx context.Context, w incus.LifecycleWatch) { runs <- streamRun{ctx, w}; <-ctx.Done() }}
	following := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			e.mu.Lock()
			k := len(e.followers)
			e.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d followers, want %d", k, n)
			}
		}
	}
	follow := func(s *seen) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.follow(ctx, s.watch()) }()
		return func() { cancel(); <-done }
	}

	var fleet, drift, late, later seen
	stopFleet := follow(&fleet)
	first := <-runs
	stopDrift := follow(&drift)
	following(2)
	first.w.Connected()
	first.w.Event(incus.LifecycleEvent{Action: incus.ActionMemberUpdated})
	stopLate := follow(&late)
	following(3)
	first.w.Lost(errors.New("connection reset"), time.Second)
	stopLater := follow(&later)
	following(4)

	both := []string{"connected", incus.ActionMemberUpdated, "lost: connection reset"}
	if !slices.Equal(fleet.list(), both) || !slices.Equal(drift.list(), both) {
		t.Errorf("fleet was told %q, drift %q; want %q each", fleet.list(), drift.list(), both)
	}
	if want := []string{"connected", "lost: connection reset"}; !slices.Equal(late.list(), want) {
		t.Errorf("a follower that joined an open stream was told %q, want %q", late.list(), want)
	}
	if want := []string{"lost: connection reset"}; !slices.Equal(later.list(), want) {
		t.Errorf("a follower that joined a lost stream was told %q, want %q", later.list(), want)
	}
	select {
	case r := <-runs:
		t.Fatalf("a second stream opened for %v", r.w)
	default:
	}

	stopFleet()
	stopLate()
	stopLater()
	if first.ctx.Err() != nil {
		t.Fatal("the stream closed while drift still follows it")
	}
	stopDrift()
	<-first.ctx.Done()

	var again seen
	stopAgain := follow(&again)
	defer stopAgain()
	second := <-runs
	first.w.Event(incus.LifecycleEvent{Action: incus.ActionMemberRemoved}) // the closed stream, late
	second.w.Connected()
	if want := []string{"connected"}; !slices.Equal(again.list(), want) {
		t.Errorf("a follower of the reopened stream was told %q, want %q", again.list(), want)
	}
}
