package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/apelora/fabric/internal/broadcast"
)

// The fleet stream: one watcher per replica reads the fleet for every subscriber, so the
// upstream calls per refresh are those of one fleet read whether 1 or 1,000 dashboards
// follow it. It runs only while someone subscribes. It reads on an interval and, sooner,
// when a trigger says something changed: an Apelora mutation (its audit event, which
// reaches every replica through PostgreSQL NOTIFY), drift, fence events, or Incus's own
// lifecycle events. MAAS offers API clients no push, so MAAS changes arrive by the
// interval (or with the next trigger).

// Trigger follows one source of changes until ctx ends, calling changed when the fleet
// may have changed. It must cope with its source being away (retrying on its own).
type Trigger func(ctx context.Context, changed func())

// Reader reads the whole fleet (Service.View).
type Reader interface {
	View(ctx context.Context) (*View, error)
}

// Watcher defaults.
const (
	DefaultRefreshInterval = 10 * time.Second
	// DefaultSettle is how long the watcher waits after a trigger for others to follow
	// (a mutation's audit event, then Incus's event of the same change) before it reads.
	DefaultSettle = 200 * time.Millisecond
)

// Watcher keeps the fleet for subscribers. Make it with NewWatcher.
type Watcher struct {
	read     Reader
	interval time.Duration
	settle   time.Duration
	triggers []Trigger
	log      *slog.Logger
	base     context.Context // the process's: a run ends with it
	hub      *broadcast.Hub[struct{}, *Update]

	mu       sync.Mutex
	subs     int
	gen      int64 // the run in progress (bumped at each start)
	stop     context.CancelFunc
	rev      int64 // the last revision given out (never reused while the process lives)
	current  *View // the fleet at rev; nil until the run's first read
	readErr  error // why the run's first read failed
	ready    chan struct{}
	snapshot *Update // current as a snapshot, made once per revision
	refresh  int64   // refreshes done (tests and the bench count them)
}

// WatcherOptions configures a watcher; zero values take the defaults.
type WatcherOptions struct {
	Interval time.Duration
	Settle   time.Duration
	Triggers []Trigger
	Log      *slog.Logger
}

// NewWatcher returns a watcher reading the fleet from read; its runs end with ctx.
func NewWatcher(ctx context.Context, read Reader, o WatcherOptions) *Watcher {
	if o.Interval <= 0 {
		o.Interval = DefaultRefreshInterval
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	hub := broadcast.NewHub[struct{}, *Update](func(u *Update) int64 { return u.Revision }, recentUpdates)
	hub.Start(0)
	return &Watcher{read: read, interval: o.Interval, settle: o.Settle, triggers: o.Triggers, log: o.Log, base: ctx, hub: hub}
}

// recentUpdates is how many changes the hub keeps for a subscriber that falls briefly
// behind; one further behind gets a fresh snapshot.
const recentUpdates = 64

// Feed is the hub the updates are published on; subscribe with broadcast.Subscribe and
// the Want that Follow returns.
func (w *Watcher) Feed() *broadcast.Hub[struct{}, *Update] { return w.hub }

// noRevision is before every revision: a subscriber starting there is sent a snapshot.
var noRevision int64 = -1

// Follow counts a subscriber until ctx ends (starting the watcher for the first) and
// returns what it receives: a snapshot of the fleet at the current revision, then each
// change. A subscriber that falls behind is sent a fresh snapshot and continues.
func (w *Watcher) Follow(ctx context.Context) broadcast.Want[struct{}, *Update] {
	w.mu.Lock()
	w.subs++
	if w.subs == 1 {
		w.startLocked()
	}
	w.mu.Unlock()
	context.AfterFunc(ctx, w.leave)
	return broadcast.Want[struct{}, *Update]{All: true, After: &noRevision,
		Replay: func(ctx context.Context, _ int64, _ int) ([]*Update, error) {
			u, err := w.Snapshot(ctx)
			if err != nil {
				return nil, err
			}
			return []*Update{u}, nil
		}}
}

func (w *Watcher) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs--
	if w.subs == 0 {
		w.stop()
		w.stop, w.current, w.snapshot = nil, nil, nil
	}
}

func (w *Watcher) startLocked() {
	ctx, cancel := context.WithCancel(w.base)
	w.gen++
	w.stop, w.current, w.snapshot, w.readErr = cancel, nil, nil, nil
	w.ready = make(chan struct{})
	go w.run(ctx, w.gen)
}

// Snapshot returns the whole fleet at the current revision, waiting for the first read
// of a run that has just started.
func (w *Watcher) Snapshot(ctx context.Context) (*Update, error) {
	w.mu.Lock()
	ready := w.ready
	w.mu.Unlock()
	if ready == nil {
		return nil, context.Canceled
	}
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current == nil {
		if w.readErr != nil {
			return nil, w.readErr
		}
		return nil, context.Canceled // the run stopped
	}
	if w.snapshot == nil || w.snapshot.Revision != w.rev {
		w.snapshot = snapshotOf(w.current, w.rev)
	}
	return w.snapshot, nil
}

// Refreshes returns how many fleet reads the watcher has made.
func (w *Watcher) Refreshes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refresh
}

func (w *Watcher) run(ctx context.Context, gen int64) {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default: // a read is already due; it will see this change too
		}
	}
	for _, t := range w.triggers {
		go t(ctx, changed)
	}
	late := w.update(ctx, gen)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-late:
			// MAAS answered the last read after it stopped waiting: its side fills in
			// now, not at the next read.
			late = nil
			w.publish(ctx, gen, v)
			continue
		case <-tick.C:
		case <-kick:
			// Let a burst settle: one read serves every trigger within it.
			t := time.NewTimer(w.settle)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			select {
			case <-kick:
			default:
			}
		}
		late = w.update(ctx, gen)
		tick.Reset(w.interval)
	}
}

// update reads the fleet and publishes what changed since the last read. When a source
// (MAAS) had not answered within the read's patience, it returns where the same view will
// arrive completed with that source's answer; nil otherwise.
func (w *Watcher) update(ctx context.Context, gen int64) <-chan *View {
	v, err := w.read.View(ctx)
	if err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.refresh++
		if gen != w.gen || ctx.Err() != nil {
			return nil // this run was stopped
		}
		w.log.Warn("fleet stream: the fleet could not be read; subscribers keep the last fleet until the next read", "error", err)
		if w.current == nil {
			w.readErr = err
			closeOnce(w.ready)
		}
		return nil
	}
	w.mu.Lock()
	w.refresh++
	w.mu.Unlock()
	w.publish(ctx, gen, v)
	if v.late == nil {
		return nil
	}
	done := make(chan *View, 1)
	go func() {
		if lv, ok := v.late(ctx); ok {
			done <- lv
		}
	}()
	return done
}

// publish makes v the current fleet and publishes what changed from the last one.
func (w *Watcher) publish(ctx context.Context, gen int64, v *View) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || ctx.Err() != nil {
		return // this run was stopped
	}
	if w.current == nil {
		// A run's first read is the snapshot every subscriber starts from.
		w.rev++
		w.current, w.readErr = v, nil
		closeOnce(w.ready)
		return
	}
	u := Diff(w.current, v, w.rev+1)
	w.current = v
	if u.Empty() {
		return
	}
	w.rev++
	w.hub.Publish(struct{}{}, u)
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
