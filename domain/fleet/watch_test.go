package fleet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/broadcast"
)

func view(rows ...Machine) *View {
	return &View{Machines: rows, Incus: Source{Configured: true, Available: true, Message: "ok"}}
}

func names(ms []Machine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestDiffNamesAddedChangedAndRemovedRows(t *testing.T) {
	prev := view(
		Machine{Name: "a", Phase: lifecycle.Registered, Record: &machines.Record{Name: "a"}},
		Machine{Name: "b", Phase: lifecycle.Registered},
		Machine{Name: "c", Phase: lifecycle.Registered},
	)
	next := view(
		// a: the same facts, read afresh (another pointer): unchanged.
		Machine{Name: "a", Phase: lifecycle.Registered, Record: &machines.Record{Name: "a"}},
		Machine{Name: "c", Phase: lifecycle.Registered, Member: &membership.Member{Name: "c", Status: "Online"}},
		Machine{Name: "d", Phase: lifecycle.Registered},
	)
	u := Diff(prev, next, 7)
	if u.Revision != 7 || u.Snapshot {
		t.Fatalf("revision %d snapshot %v, want 7 and a change", u.Revision, u.Snapshot)
	}
	if got := names(u.Added); !slices.Equal(got, []string{"d"}) {
		t.Errorf("added %v, want [d]", got)
	}
	if got := names(u.Changed); !slices.Equal(got, []string{"c"}) {
		t.Errorf("changed %v, want [c]", got)
	}
	if !slices.Equal(u.Removed, []string{"b"}) {
		t.Errorf("removed %v, want [b]", u.Removed)
	}
	if u.Sources != nil {
		t.Errorf("sources %+v sent though neither changed", u.Sources)
	}
	if !Diff(next, next, 8).Empty() {
		t.Error("a fleet compared with itself is not empty")
	}
	down := view(next.Machines...)
	down.MAAS = Source{Configured: true, Message: "MAAS could not be asked"}
	u = Diff(next, down, 9)
	if u.Sources == nil || u.Sources.MAAS.Available || u.Sources.MAAS.Message != "MAAS could not be asked" || len(u.Changed) != 0 {
		t.Errorf("a source going away: %+v", u)
	}
}

// changingFleet is a fleet that changes when the test says, counting the reads.
type changingFleet struct {
	mu    sync.Mutex
	v     *View
	err   error
	count int
	kick  func() // the watcher's trigger, once it runs
	armed chan struct{}
}

func (r *changingFleet) View(context.Context) (*View, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if r.err != nil {
		return nil, r.err
	}
	v := *r.v
	v.Machines = slices.Clone(r.v.Machines)
	return &v, nil
}

func (r *changingFleet) set(v *View) {
	r.mu.Lock()
	r.v = v
	kick := r.kick
	r.mu.Unlock()
	kick()
}

func (r *changingFleet) reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *changingFleet) trigger(ctx context.Context, changed func()) {
	r.mu.Lock()
	r.kick = changed
	select {
	case <-r.armed: // a later run of the watcher
	default:
		close(r.armed)
	}
	r.mu.Unlock()
	<-ctx.Done()
}

var updatesView = broadcast.NewView(func(u *Update) *Update { return u })

func newWatched(t *testing.T) (*Watcher, *changingFleet) {
	t.Helper()
	r := &changingFleet{v: view(Machine{Name: "a"}), armed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// An hour: only the trigger makes the watcher read again.
	w := NewWatcher(ctx, r, WatcherOptions{Interval: time.Hour, Settle: 10 * time.Millisecond, Triggers: []Trigger{r.trigger}})
	return w, r
}

func follow(ctx context.Context, w *Watcher) <-chan *Update {
	return broadcast.Subscribe(ctx, w.Feed(), w.Follow(ctx), updatesView, 16)
}

func next(t *testing.T, ch <-chan *Update) *Update {
	t.Helper()
	select {
	case u, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10 s")
	}
	return nil
}

func TestWatcherSendsASnapshotThenEachChangeWithTheNextRevision(t *testing.T) {
	w, r := newWatched(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := follow(ctx, w)
	first := next(t, ch)
	if !first.Snapshot || !slices.Equal(names(first.Added), []string{"a"}) || first.Sources == nil || !first.Sources.Incus.Available {
		t.Fatalf("first message %+v, want the whole fleet with its sources", first)
	}
	<-r.armed
	r.set(view(Machine{Name: "a"}, Machine{Name: "b"}))
	u := next(t, ch)
	if u.Snapshot || u.Revision != first.Revision+1 || !slices.Equal(names(u.Added), []string{"b"}) {
		t.Fatalf("change %+v, want b added at revision %d", u, first.Revision+1)
	}
	r.set(view(Machine{Name: "b"}))
	u = next(t, ch)
	if u.Revision != first.Revision+2 || !slices.Equal(u.Removed, []string{"a"}) {
		t.Fatalf("change %+v, want a removed at revision %d", u, first.Revision+2)
	}
}

func TestWatcherReadsOncePerChangeForEverySubscriber(t *testing.T) {
	w, r := newWatched(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 200
	chans := make([]<-chan *Update, n)
	for i := range chans {
		chans[i] = follow(ctx, w)
	}
	for _, ch := range chans {
		next(t, ch)
	}
	<-r.armed
	before := r.reads()
	r.set(view(Machine{Name: "a"}, Machine{Name: "z"}))
	for _, ch := range chans {
		if u := next(t, ch); !slices.Equal(names(u.Added), []string{"z"}) {
			t.Fatalf("got %+v, want z added", u)
		}
	}
	if got := r.reads() - before; got != 1 {
		t.Errorf("%d subscribers cost %d fleet reads for one change, want 1", n, got)
	}
	if before != 1 {
		t.Errorf("%d subscribers joining cost %d fleet reads, want 1", n, before)
	}
}

func TestWatcherStopsWithTheLastSubscriberAndAResubscriberGetsAFreshSnapshot(t *testing.T) {
	w, r := newWatched(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := follow(ctx, w)
	first := next(t, ch)
	<-r.armed
	cancel()
	for range ch { // closed once the subscriber has gone
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		stopped := w.subs == 0 && w.current == nil
		w.mu.Unlock()
		if stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher still runs with no subscriber")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The fleet changes while nobody watches; the next subscriber (a client reconnecting
	// with its last revision) starts from a fresh snapshot at a later revision.
	r.mu.Lock()
	r.v = view(Machine{Name: "a"}, Machine{Name: "c"})
	r.mu.Unlock()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch2 := follow(ctx2, w)
	again := next(t, ch2)
	if !again.Snapshot || again.Revision <= first.Revision || !slices.Equal(names(again.Added), []string{"a", "c"}) {
		t.Fatalf("after reconnecting: %+v, want a fresh snapshot after revision %d", again, first.Revision)
	}
}

func TestWatcherEndsTheStreamWhenTheFirstReadFails(t *testing.T) {
	w, r := newWatched(t)
	r.err = errors.New("database down")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := follow(ctx, w)
	select {
	case u, ok := <-ch:
		if ok {
			t.Fatalf("got %+v from a fleet that cannot be read", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream neither ended nor sent")
	}
}

// A drift round re-checks every admitted member each minute: a new check time alone is no
// change (it would re-send every row), while a drift raised or its evidence is one.
func TestDiffIgnoresDriftCheckTimesOnly(t *testing.T) {
	t0, t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)
	row := func(checked time.Time, evidence string) Machine {
		return Machine{Name: "a", Phase: lifecycle.Admitted, DriftChecked: checked,
			Drift: []drift.State{{Check: "scheduler", FailingSince: t0, Evidence: evidence, LastChecked: checked}}}
	}
	if u := Diff(view(row(t0, "scheduler.instance=manual")), view(row(t1, "scheduler.instance=manual")), 2); !u.Empty() {
		t.Errorf("a new check time alone was sent as a change: %+v", u)
	}
	if u := Diff(view(row(t0, "scheduler.instance=manual")), view(row(t1, "scheduler.instance=group")), 2); len(u.Changed) != 1 {
		t.Errorf("new evidence was not sent: %+v", u)
	}
}
