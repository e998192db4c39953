package server

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apelora/fabric/internal/apperr"
)

// However many steps arrive at once, no more than the bound run; the rest wait, and all
// of them run in the end.
func TestStepSlotsBoundTheStepsRunningAtOnce(t *testing.T) {
	s := newStepSlots(3)
	var running, most, ran atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.take(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-gate
			running.Add(-1)
			ran.Add(1)
		}()
	}
	for most.Load() < 3 {
		runtime.Gosched() // until the bound is reached
	}
	close(gate)
	wg.Wait()
	if most.Load() != 3 || ran.Load() != 20 {
		t.Fatalf("at most %d ran at once and %d ran, want 3 and 20", most.Load(), ran.Load())
	}
	if newStepSlots(0).slots == nil || cap(newStepSlots(0).slots) != DefaultStepConcurrency {
		t.Fatal("a zero bound is not the default")
	}
}

// A request that ends while waiting is told that nothing of its step ran.
func TestAStepWaitingForASlotEndsWithItsRequest(t *testing.T) {
	s := newStepSlots(1)
	release, err := s.take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.take(ctx); apperr.CodeOf(err) != apperr.Unavailable {
		t.Fatalf("take after the request ended: %v, want UNAVAILABLE", err)
	}
	release()
	if release, err = s.take(t.Context()); err != nil {
		t.Fatalf("a released slot is not free again: %v", err)
	}
	release()
}
