package fencing

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

type recordingObserver struct {
	mu      sync.Mutex
	leading []bool
	kinds   []Kind
	rounds  int
}

func (o *recordingObserver) Leading(l bool) {
	o.mu.Lock()
	o.leading = append(o.leading, l)
	o.mu.Unlock()
}
func (o *recordingObserver) Recorded(e Event) {
	o.mu.Lock()
	o.kinds = append(o.kinds, e.Kind)
	o.mu.Unlock()
}
func (o *recordingObserver) Lease(int64, time.Time)     {}
func (o *recordingObserver) RoundDone(error)            { o.mu.Lock(); o.rounds++; o.mu.Unlock() }
func (o *recordingObserver) NoQuorum(string, time.Time) {}
func (o *recordingObserver) Paused(string, string)      {}

// The observer hears that the worker leads, every event it appends (those of the tracking
// too) and every round, and that it stops leading when it stops.
func TestObserverHearsLeadershipEventsAndRounds(t *testing.T) {
	e := newEnv(t, "m1", "m2", "m3")
	e.cl.set("m1", "Offline")
	obs := &recordingObserver{}
	w := &Worker{ID: "w1", Limits: testLimits, Poll: time.Millisecond, Cluster: e.cl, MAAS: e.ma, Leadership: e.st, Log: discard, Observer: obs}
	w.Sleep = func(ctx context.Context, d time.Duration) error {
		e.clk.advance(time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	waitFor(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.rounds >= 3 && slices.Contains(obs.kinds, KindOffline)
	})
	cancel()
	<-done
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Equal(obs.leading, []bool{true, false}) || obs.kinds[0] != KindLeading {
		t.Fatalf("leading %v, kinds %v", obs.leading, obs.kinds)
	}
	// The observer heard exactly what the store holds.
	var stored []Kind
	e.st.mu.Lock()
	for _, ev := range e.st.events {
		stored = append(stored, ev.Kind)
	}
	e.st.mu.Unlock()
	if !slices.Equal(stored, obs.kinds) {
		t.Fatalf("stored %v, observed %v", stored, obs.kinds)
	}
}
