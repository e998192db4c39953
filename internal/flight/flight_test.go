package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// held returns an upstream whose calls are counted and held until release is closed.
func held(calls *atomic.Int32, release <-chan struct{}, val int, err error) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		calls.Add(1)
		select {
		case <-release:
			return val, err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// waitWaiting waits until n callers wait on the call in flight.
func waitWaiting[V any](t *testing.T, c *Call[V], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers waiting, want %d", c.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConcurrentCallersShareOneCall(t *testing.T) {
	var c Call[int]
	var calls atomic.Int32
	release := make(chan struct{})
	const n = 50
	results := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Do(context.Background(), held(&calls, release, 42, nil))
			if err != nil {
				t.Error(err)
			}
			results <- v
		}()
	}
	waitWaiting(t, &c, n)
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 42 {
			t.Fatalf("a caller got %d, want the shared 42", v)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d upstream calls for %d concurrent callers, want 1", got, n)
	}

	// A caller arriving after the call finished starts a new one: nothing is cached.
	again := make(chan struct{})
	close(again)
	if v, err := c.Do(context.Background(), held(&calls, again, 7, nil)); err != nil || v != 7 {
		t.Fatalf("later caller: %d, %v; want a fresh 7", v, err)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d upstream calls after a later caller, want 2", got)
	}
}

func TestCancelledCallerDoesNotCancelOthers(t *testing.T) {
	var c Call[int]
	var calls atomic.Int32
	release := make(chan struct{})
	first, cancelFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.Do(first, held(&calls, release, 1, nil))
		firstDone <- err
	}()
	waitWaiting(t, &c, 1)
	otherDone := make(chan int, 1)
	go func() {
		v, err := c.Do(context.Background(), held(&calls, release, 2, nil))
		if err != nil {
			t.Error(err)
		}
		otherDone <- v
	}()
	waitWaiting(t, &c, 2)

	cancelFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v, want context.Canceled", err)
	}
	waitWaiting(t, &c, 1)
	close(release)
	if v := <-otherDone; v != 1 {
		t.Fatalf("the other caller got %d, want the shared call's 1 (not cancelled with the first caller)", v)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d upstream calls, want 1", got)
	}
}

func TestCallCancelledWhenEveryCallerLeft(t *testing.T) {
	var c Call[int]
	upstreamCtx := make(chan context.Context, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Do(ctx, func(ctx context.Context) (int, error) {
			upstreamCtx <- ctx
			<-ctx.Done()
			return 0, ctx.Err()
		})
	}()
	uctx := <-upstreamCtx
	cancel()
	<-done
	select {
	case <-uctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream call goes on with nobody waiting for it")
	}
	// The next caller starts afresh instead of joining the cancelled call.
	if v, err := c.Do(context.Background(), func(context.Context) (int, error) { return 3, nil }); err != nil || v != 3 {
		t.Fatalf("next caller: %d, %v; want a fresh 3", v, err)
	}
}

func TestErrorsAreSharedNotRemembered(t *testing.T) {
	var c Call[int]
	var calls atomic.Int32
	release := make(chan struct{})
	boom := errors.New("upstream down")
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Do(context.Background(), held(&calls, release, 0, boom))
			errs <- err
		}()
	}
	waitWaiting(t, &c, n)
	close(release)
	for range n {
		if err := <-errs; !errors.Is(err, boom) {
			t.Fatalf("a caller got %v, want the shared error", err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d upstream calls, want 1", got)
	}
	// The failure is not remembered: the next caller asks again and gets the new answer.
	if v, err := c.Do(context.Background(), func(context.Context) (int, error) { calls.Add(1); return 9, nil }); err != nil || v != 9 {
		t.Fatalf("after an error: %d, %v; want a fresh 9", v, err)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d upstream calls, want 2", got)
	}
}

func TestSharedCallKeepsCallerValues(t *testing.T) {
	type key struct{}
	var c Call[string]
	ctx := context.WithValue(context.Background(), key{}, "request-1")
	v, err := c.Do(ctx, func(ctx context.Context) (string, error) {
		s, _ := ctx.Value(key{}).(string)
		return s, nil
	})
	if err != nil || v != "request-1" {
		t.Fatalf("got %q, %v; the shared call should see the first caller's values", v, err)
	}
}

func TestPanicReachesEveryCaller(t *testing.T) {
	var c Call[int]
	defer func() {
		if r := recover(); r != "bad" {
			t.Fatalf("recovered %v, want the upstream's panic", r)
		}
		// And the next call is not stuck behind it.
		if v, err := c.Do(context.Background(), func(context.Context) (int, error) { return 1, nil }); err != nil || v != 1 {
			t.Fatalf("after a panic: %d, %v", v, err)
		}
	}()
	c.Do(context.Background(), func(context.Context) (int, error) { panic("bad") })
	t.Fatal("Do returned after the shared call panicked")
}

func TestForgetStartsANewCallForLaterCallers(t *testing.T) {
	var c Call[int]
	var calls atomic.Int32
	release := make(chan struct{})
	before := make(chan int, 1)
	go func() {
		v, _ := c.Do(context.Background(), held(&calls, release, 1, nil))
		before <- v
	}()
	waitWaiting(t, &c, 1)
	c.Forget() // a write finished: later readers must not share the older call
	fresh := make(chan struct{})
	close(fresh)
	if v, err := c.Do(context.Background(), held(&calls, fresh, 2, nil)); err != nil || v != 2 {
		t.Fatalf("after Forget: %d, %v; want a new call's 2", v, err)
	}
	close(release)
	if v := <-before; v != 1 {
		t.Fatalf("the earlier caller got %d, want its own call's 1", v)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d upstream calls, want 2", got)
	}
}

// A group shares a call per key: callers of one key share, another key has its own call,
// and a key is dropped once its call has no caller left.
func TestGroupSharesPerKeyAndKeepsOnlyWhatIsInFlight(t *testing.T) {
	var g Group[int]
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 20 {
		key, val := "a", 1
		if i%2 == 1 {
			key, val = "b", 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := g.Do(context.Background(), key, held(&calls, release, val, nil)); err != nil || v != val {
				t.Errorf("key %s: %d %v, want %d", key, v, err, val)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.Keys() != 2 || waitingOn(&g, "a") != 10 || waitingOn(&g, "b") != 10 {
		if time.Now().After(deadline) {
			t.Fatal("the callers never all waited")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d calls for two keys, want 2", got)
	}
	if g.Keys() != 0 {
		t.Fatalf("%d keys kept after every call ended", g.Keys())
	}
	// Forget: a caller arriving after it does not share the call in flight.
	block := make(chan struct{})
	go g.Do(context.Background(), "a", held(&calls, block, 1, nil))
	for waitingOn(&g, "a") != 1 {
		time.Sleep(time.Millisecond)
	}
	g.Forget()
	done := make(chan struct{})
	close(done)
	if v, _ := g.Do(context.Background(), "a", held(&calls, done, 5, nil)); v != 5 {
		t.Fatalf("after Forget a caller got %d, want its own call's 5", v)
	}
	close(block)
}

func waitingOn(g *Group[int], key string) int {
	g.mu.Lock()
	c := g.calls[key]
	g.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.Waiting()
}
