package drift

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/leader"
)

// Admissions reads who is admitted now: the machines with an open admission record, with
// what it recorded.
type Admissions interface {
	Admitted(ctx context.Context) ([]Admission, error)
}

// Records reads the machine records (the checks read a machine's provisioner and profile).
type Records interface {
	Records(ctx context.Context) ([]machines.Record, error)
}

// Leadership hands out the right to watch: one process at a time.
type Leadership interface {
	// TryLead returns the drift lease when this process now leads, or nil when another does.
	TryLead(ctx context.Context) (Lease, error)
}

// Lease is the drift lease as the leading process holds it: the lease itself
// (leader.Lease) and what drift reads and writes under it. Drift's writes go through it
// and check the lease's epoch, so a process that lost the lead cannot record anything.
type Lease interface {
	leader.Lease
	// Now is the database's clock: every replica measures thresholds with the same one.
	Now(ctx context.Context) (time.Time, error)
	// States returns every machine the watcher tracks (looked at, or with states), with its
	// states (none for a machine that only was looked at).
	States(ctx context.Context) (map[string][]State, error)
	// Save replaces machine's states with states, appends events, and records when the
	// machine was checked (a zero checked forgets the machine), in one transaction. It
	// returns the events with their ids.
	// quiet is why checks were suspended at this check ("" when none was: Quiet).
	Save(ctx context.Context, machine string, checked time.Time, quiet string, states []State, events []Event) ([]Event, error)
	Heartbeat(ctx context.Context, w Watcher) error
}

// Changes says when Incus reports a change, so the runner looks at once instead of at
// its next interval.
type Changes interface {
	// Watch calls changed with the member concerned, or "" for anything that may concern
	// every member (a storage pool or network changed, or events may have been missed),
	// until ctx ends.
	Watch(ctx context.Context, changed func(member string))
}

// Watcher is the leading runner's status, for administrators.
type Watcher struct {
	Replica      string
	LeaderSince  time.Time
	LastRoundAt  time.Time
	Interval     time.Duration
	OfflineAfter time.Duration
	// Machines is how many admitted machines the last round looked at.
	Machines int
	// Problem says why the last round could not look at every machine ("" when it could).
	Problem string
}

// Runner re-runs the admission checks on admitted members while it leads.
type Runner struct {
	// Checker is the admission checks as admission runs them; the runner uses a copy that
	// publishes nothing (a re-check is no admission run) and shares each round's cluster-wide
	// reads among the machines.
	Checker    *admission.Checker
	Admissions Admissions
	Records    Records
	Leadership Leadership
	Changes    Changes // nil: the interval only
	Interval   time.Duration
	Limits     Limits
	Replica    string // names this process in the watcher status and logs
	Log        *slog.Logger
	// Settle is how long the runner waits after a change before it looks, so a burst of
	// events costs one look (default 250 ms).
	Settle time.Duration
	// Retry is how often a standby tries to lead, and the leader makes sure it still does
	// (default min(Interval, 10 s)).
	Retry time.Duration
	// Lease is the leader lease's length (leader.Options.Lease); zero: never renewed.
	// Leading is told of the epoch this replica leads with and of every renewal (metrics).
	Lease   time.Duration
	Leading func(epoch int64, renewed time.Time)

	mu      sync.Mutex
	pending map[string]bool // members to look at now; "" means all
	wake    chan struct{}
}

// Run leads when it can and stands by while another process leads, until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	if r.Interval <= 0 {
		return errors.New("drift: the interval must be positive")
	}
	leader.Run(ctx, r.Leadership.TryLead, r.lead, leader.Options{
		Retry: r.retry(), Log: r.Log, Attrs: []any{"replica", r.Replica},
		Unreachable: "drift: cannot reach the database to take the drift lease; retrying",
		Standby:     "drift: another replica watches the admitted members: standing by",
		Lease:       r.Lease, Leading: r.Leading,
	})
	return nil
}

// retry is how often a standby tries to lead, and a leader makes sure it still does.
func (r *Runner) retry() time.Duration {
	if r.Retry > 0 {
		return r.Retry
	}
	return min(r.Interval, 10*time.Second)
}

// changed notes a change Incus reported; the leading loop looks at it soon.
func (r *Runner) changed(member string) {
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]bool{}
	}
	r.pending[member] = true
	wake := r.wake
	r.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// take returns the members to look at (nil: all) and forgets them.
func (r *Runner) take() (only map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending
	r.pending = nil
	if p[""] {
		return nil
	}
	return p
}

// lead looks at every admitted machine at once, then on the interval and after changes,
// while this process holds the drift lease (leader.Run closes it after).
func (r *Runner) lead(ctx context.Context, lease Lease) {
	since, err := lease.Now(ctx)
	if err != nil {
		r.Log.Warn("drift: lost the database right after taking the drift lease", "error", err)
		return
	}
	r.Log.Info("drift: this replica now watches the admitted members", "replica", r.Replica,
		"interval", r.Interval.String(), "offline_after", r.Limits.OfflineAfter.String())
	settle := r.Settle
	if settle <= 0 {
		settle = 250 * time.Millisecond
	}
	r.mu.Lock()
	r.pending, r.wake = nil, make(chan struct{}, 1)
	r.mu.Unlock()
	wctx, stop := context.WithCancel(ctx)
	var watching sync.WaitGroup
	if r.Changes != nil {
		watching.Add(1)
		go func() { defer watching.Done(); r.Changes.Watch(wctx, r.changed) }()
	}
	defer func() { stop(); watching.Wait() }()

	var only map[string]bool // nil: every machine
	for ctx.Err() == nil {
		if err := lease.Check(ctx); err != nil {
			if ctx.Err() == nil {
				r.Log.Warn("drift: lost the drift lease; will try to lead again", "replica", r.Replica, "epoch", lease.Epoch(), "error", err)
			}
			return
		}
		looked, problem := r.Round(ctx, lease, only)
		if ctx.Err() != nil {
			return
		}
		if only == nil {
			w := Watcher{Replica: r.Replica, LeaderSince: since, Interval: r.Interval, OfflineAfter: r.Limits.OfflineAfter, Machines: looked}
			if problem != nil {
				w.Problem = clean(apperr.Text(problem))
				r.Log.Warn("drift: round could not look at every admitted machine", "error", problem)
			}
			if w.LastRoundAt, err = lease.Now(ctx); err == nil {
				err = lease.Heartbeat(ctx, w)
			}
			if err != nil && ctx.Err() == nil {
				r.Log.Warn("drift: cannot record the round", "error", err)
			}
		} else if problem != nil {
			r.Log.Warn("drift: could not look at the changed members", "error", problem)
		}
		// Wait for the interval (a round of every machine) or a change (the machines it
		// concerns), whichever comes first; meanwhile make sure the lead is still held.
		if only, err = r.wait(ctx, lease, settle); err != nil {
			if ctx.Err() == nil {
				r.Log.Warn("drift: lost the drift lease; will try to lead again", "replica", r.Replica, "epoch", lease.Epoch(), "error", err)
			}
			return
		}
	}
}

// wait returns the machines to look at next (nil: all) once the interval has passed or
// Incus reported a change, or an error when ctx ends or the lead is lost.
func (r *Runner) wait(ctx context.Context, lease Lease, settle time.Duration) (map[string]bool, error) {
	interval := time.NewTimer(r.Interval)
	defer interval.Stop()
	check := time.NewTicker(r.retry())
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-interval.C:
			r.take()
			return nil, nil
		case <-r.wake:
			if err := leader.Sleep(ctx, settle); err != nil {
				return nil, err
			}
			return r.take(), nil
		case <-check.C:
			if err := lease.Check(ctx); err != nil {
				return nil, err
			}
		}
	}
}

// Round looks at the admitted machines (those in only; all when only is nil) and records
// what changed. It returns how many machines it looked at, and the first problem that
// kept it from looking at some (Incus or the database could not be asked).
func (r *Runner) Round(ctx context.Context, lease Lease, only map[string]bool) (int, error) {
	admitted, err := r.Admissions.Admitted(ctx)
	if err != nil {
		return 0, err
	}
	states, err := lease.States(ctx)
	if err != nil {
		return 0, err
	}
	byName := map[string]Admission{}
	for _, a := range admitted {
		byName[a.Machine] = a
	}
	recs, err := r.Records.Records(ctx)
	if err != nil {
		return 0, err
	}
	records := map[string]*machines.Record{}
	for i := range recs {
		records[recs[i].Name] = &recs[i]
	}
	// Machines no longer admitted (or no longer recorded): what was raised clears.
	for _, name := range sortedKeys(states) {
		if _, ok := byName[name]; ok && records[name] != nil {
			continue
		}
		if err := r.forget(ctx, lease, name, states[name]); err != nil {
			return 0, err
		}
	}
	var todo []Admission
	for _, a := range admitted {
		if records[a.Machine] != nil && (only == nil || only[a.Machine]) {
			todo = append(todo, a)
		}
	}
	if len(todo) == 0 {
		return 0, nil // nothing admitted: Incus is not asked
	}
	slices.SortFunc(todo, func(a, b Admission) int { return strings.Compare(a.Machine, b.Machine) })

	// A round per cluster, the clusters at the same time: each machine is checked in its
	// record's cluster (admission.Checker.Cluster), with that cluster's reads shared among
	// its machines. A cluster that cannot be read leaves its machines' states as they
	// were (nothing is saved for them: no drift raised, none cleared); the others go on.
	groups := map[int64][]Admission{}
	named := map[int64]clusters.Cluster{}
	ports := map[int64]admission.Incus{}
	var problem error
	for _, a := range todo {
		cl, in, err := r.Checker.Cluster(ctx, a.Machine, records[a.Machine])
		if err != nil {
			problem = firstErr(problem, fmt.Errorf("check %s: %w", a.Machine, err))
			continue
		}
		groups[cl.ID] = append(groups[cl.ID], a)
		named[cl.ID], ports[cl.ID] = cl, in
	}
	var mu sync.Mutex // the lease's calls, and looked and problem
	locked := &lockedLease{Lease: lease, mu: &mu}
	looked := 0
	var wg sync.WaitGroup
	for id, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.clusterRound(ctx, locked, named[id], ports[id], group, states, records)
			mu.Lock()
			defer mu.Unlock()
			looked += n
			if err != nil {
				problem = firstErr(problem, err)
			}
		}()
	}
	wg.Wait()
	return looked, problem
}

// clusterRound looks at the admitted machines of one cluster (todo), through in.
func (r *Runner) clusterRound(ctx context.Context, lease Lease, cl clusters.Cluster, in admission.Incus, todo []Admission,
	states map[string][]State, records map[string]*machines.Record) (int, error) {
	inc := &roundCache{Incus: in}
	members, err := inc.Members(ctx)
	if err != nil {
		return 0, fmt.Errorf("Incus cluster %s: %w", cl.Name, err)
	}
	checker := *r.Checker
	checker.Publish = nil
	looked := 0
	var problem error
	for _, a := range todo {
		if ctx.Err() != nil {
			return looked, ctx.Err()
		}
		member := findMember(members, a.Machine)
		var report *admission.Report
		if member != nil {
			if report, err = checker.RunIn(ctx, cl, inc, a.Machine, records[a.Machine], admission.TriggerReport); err != nil {
				problem = firstErr(problem, fmt.Errorf("check %s: %w", a.Machine, err))
				continue
			}
		}
		now, err := lease.Now(ctx)
		if err != nil {
			return looked, err
		}
		findings := Assess(report, member, a)
		next, events := Apply(a.Machine, states[a.Machine], findings, now, r.Limits)
		saved, err := lease.Save(ctx, a.Machine, now, Quiet(a.Machine, findings), next, events)
		if err != nil {
			return looked, err
		}
		r.logEvents(saved)
		looked++
	}
	return looked, problem
}

// lockedLease is a lease whose reads and writes one cluster's round at a time makes.
type lockedLease struct {
	Lease
	mu *sync.Mutex
}

func (l *lockedLease) Now(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Lease.Now(ctx)
}

func (l *lockedLease) Save(ctx context.Context, machine string, checked time.Time, quiet string, states []State, events []Event) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Lease.Save(ctx, machine, checked, quiet, states, events)
}

func (r *Runner) forget(ctx context.Context, lease Lease, name string, prev []State) error {
	now, err := lease.Now(ctx)
	if err != nil {
		return err
	}
	saved, err := lease.Save(ctx, name, time.Time{}, "", nil,
		Forget(prev, now, "no longer an admitted member: its latest membership step is not an admission (removed, enrolled again or unregistered)"))
	r.logEvents(saved)
	return err
}

func (r *Runner) logEvents(events []Event) {
	for _, e := range events {
		if e.Change == Raised {
			r.Log.Warn("drift raised", "machine", e.Machine, "check", e.Check, "since", e.Since, "evidence", e.Evidence)
		} else {
			r.Log.Info("drift cleared", "machine", e.Machine, "check", e.Check, "evidence", e.Evidence)
		}
	}
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func findMember(ms []membership.Member, name string) *membership.Member {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}
