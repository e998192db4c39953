package leader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// leaseRow is one lease in memory that candidates take turns on, as the leader_leases row
// of a role is for the fence worker and drift; lose takes it from its holder, as a broken
// connection would.
type leaseRow struct {
	mu       sync.Mutex
	holder   *heldLease
	fail     int // the next attempts that fail (the database is unreachable)
	closed   int
	renewals int
	leaders  []string
}

type heldLease struct {
	l    *leaseRow
	name string
	lost bool
}

func (l *leaseRow) try(name string) func(context.Context) (*heldLease, error) {
	return func(context.Context) (*heldLease, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.fail > 0 {
			l.fail--
			return nil, errors.New("connection refused")
		}
		if l.holder != nil {
			return nil, nil
		}
		l.holder = &heldLease{l: l, name: name}
		l.leaders = append(l.leaders, name)
		return l.holder, nil
	}
}

func (h *heldLease) Check(context.Context) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.lost {
		return errors.New("the lease's connection is gone")
	}
	return nil
}

func (h *heldLease) Renew(context.Context) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.renewals++
	if h.lost {
		return fmt.Errorf("renew: %w", ErrLost)
	}
	return nil
}

func (h *heldLease) Epoch() int64 { return 7 }

func (h *heldLease) Close() {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.holder == h {
		h.l.holder = nil
	}
	h.l.closed++
}

func (l *leaseRow) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != nil {
		l.holder.lost = true
	}
}

func (l *leaseRow) snapshot() (leaders []string, closed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.leaders...), l.closed
}

// leadUntilLost is a leader's loop as the fence worker's and drift's are: act, and stop
// once Check says the lease is gone.
func leadUntilLost(ctx context.Context, h *heldLease) {
	for ctx.Err() == nil && h.Check(ctx) == nil {
		time.Sleep(time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Two candidates, one lease: one leads, the other stands by (and says so once); when the
// leader loses its lease it is closed and a candidate leads again; a failed attempt
// is logged and retried; Run returns when its context ends, closing the lease it had.
func TestOneLeadsTheOtherStandsByAndTakesOver(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	l := &leaseRow{fail: 1}
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		done.Add(1)
		go func() {
			defer done.Done()
			Run(ctx, l.try(name), leadUntilLost, Options{Retry: 5 * time.Millisecond, Log: log,
				Unreachable: "cannot reach the database", Standby: "standing by", Attrs: []any{"candidate", name}})
		}()
	}
	waitFor(t, "a leader and a standby", func() bool {
		leaders, _ := l.snapshot()
		return len(leaders) == 1 && strings.Contains(logs.String(), "standing by")
	})
	time.Sleep(50 * time.Millisecond) // many retries of the standby
	if n := strings.Count(logs.String(), "standing by"); n != 1 {
		t.Errorf("standing by logged %d times during one standby, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "cannot reach the database") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the failed attempt was not logged with its error:\n%s", logs.String())
	}

	l.lose()
	waitFor(t, "a second leadership", func() bool { leaders, _ := l.snapshot(); return len(leaders) == 2 })
	if _, closed := l.snapshot(); closed != 1 {
		t.Errorf("%d leases closed after one lost, want 1", closed)
	}
	cancel()
	done.Wait()
	if leaders, closed := l.snapshot(); closed != 2 || l.holder != nil {
		t.Errorf("after the end: %d of %d leases closed, lease held by %v", closed, len(leaders), l.holder)
	}
}

// With a lease, the leader renews it while it leads; once a renewal says it is lost, the
// lead's context ends (the leader stops acting without having to look), the metrics hear
// epoch 0, and the process that lost it stands aside so that the other candidate leads.
func TestALeaderThatLosesItsLeaseStopsAndTheOtherLeads(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := &leaseRow{}
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	var mu sync.Mutex
	epochs := map[string][]int64{}
	run := func(name string) {
		done.Add(1)
		go func() {
			defer done.Done()
			Run(ctx, l.try(name), func(ctx context.Context, _ *heldLease) { <-ctx.Done() }, Options{
				Retry: 5 * time.Millisecond, Lease: 30 * time.Millisecond, Log: log,
				Leading: func(epoch int64, _ time.Time) { mu.Lock(); epochs[name] = append(epochs[name], epoch); mu.Unlock() },
			})
		}()
	}
	run("a")
	waitFor(t, "a to lead and renew", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.renewals >= 2 })
	run("b")
	l.lose()
	waitFor(t, "b to lead", func() bool { leaders, _ := l.snapshot(); return len(leaders) == 2 })
	cancel()
	done.Wait()
	leaders, _ := l.snapshot()
	if leaders[0] != "a" || leaders[1] != "b" {
		t.Errorf("leaders %v, want a then b (a stands aside after losing its lease)", leaders)
	}
	mu.Lock()
	defer mu.Unlock()
	if a := epochs["a"]; len(a) < 3 || a[0] != 7 || a[len(a)-1] != 0 {
		t.Errorf("a reported epochs %v: want 7 when it took the lease, at each renewal, 0 when it stopped", a)
	}
}

// Sleep ends early with the context.
func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel: %v", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
}
