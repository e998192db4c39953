package fencing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/internal/leader"
)

// Cluster reads the members' status from Incus.
type Cluster interface {
	Observe(ctx context.Context) ([]Observation, error)
}

// MachineFacts is what fencing reads of a MAAS machine. It has no credential field.
type MachineFacts struct {
	SystemID     string
	Hostname     string
	HardwareUUID string // "" while MAAS reports none
	PowerType    string
}

// MAAS is the power side, as the worker (the only holder of power rights) sees it. Errors
// are classified with ErrMachineNotFound, ErrPowerNotQueryable and ErrMAASRefused; any
// other error means MAAS could not be asked, or the answer is not known.
type MAAS interface {
	Machine(ctx context.Context, systemID string) (MachineFacts, error)
	// QueryPowerState asks the power controller now (MAAS's op=query_power_state); the
	// machine's cached power_state is never used to confirm.
	QueryPowerState(ctx context.Context, systemID string) (string, error)
	// PowerOff asks MAAS to power the machine off (hard). sent is false when MAAS says it
	// cannot (no power driver).
	PowerOff(ctx context.Context, systemID string) (sent bool, err error)
}

// MachineReader is the read-only part of MAAS, which the API uses to check mappings.
type MachineReader interface {
	Machine(ctx context.Context, systemID string) (MachineFacts, error)
}

// Error classes MAAS adapters wrap their errors in.
var (
	ErrMachineNotFound   = errors.New("MAAS has no machine with this system id")
	ErrPowerNotQueryable = errors.New("MAAS cannot query this machine's power state (manual power?)")
	ErrMAASRefused       = errors.New("MAAS refused the request")
)

// Leadership hands out the right to act: one worker at a time.
type Leadership interface {
	// TryLead returns the fence lease when this worker now leads, or nil when another does.
	TryLead(ctx context.Context) (Lease, error)
}

// Lease is the fence lease as the leading worker holds it: the lease itself (leader.Lease)
// and what the worker reads and writes under it. Every write that matters goes through it
// and checks the lease's epoch in its own transaction, so a worker that has lost its lease
// cannot record a request, and a request that was not recorded is never sent.
//
// Everything about members is read and written per cluster (cluster ids, domain/clusters):
// a member name is unique within its cluster only, so the maps below are keyed by the
// names of one cluster's members, and SaveTracking's gone forgets that cluster's only.
type Lease interface {
	leader.Lease
	// Now is the database's clock: every worker measures with the same one.
	Now(ctx context.Context) (time.Time, error)
	Tracking(ctx context.Context, cluster int64) (map[string]Tracking, error)
	// SaveTracking stores the cluster's tracking records, forgets its gone members (of that
	// cluster only), and appends events, in one transaction. It returns the events with
	// their ids.
	SaveTracking(ctx context.Context, cluster int64, next []Tracking, gone []string, events []Event) ([]Event, error)
	Mappings(ctx context.Context, cluster int64) (map[string]Mapping, error)
	Requests(ctx context.Context, cluster int64) (map[string]Request, error)
	// LatestEvents returns the latest event of every tracked member of the cluster.
	LatestEvents(ctx context.Context, cluster int64) (map[string]Event, error)
	// Append records an event about e.Cluster (0 only for KindLeading).
	Append(ctx context.Context, e Event) (Event, error)
	Heartbeat(ctx context.Context, s WorkerStatus) error
	// ClusterState is the state the leading worker last saved for the cluster (the zero
	// state for none): a new leader goes on with what its predecessor saw instead of
	// recording a loss or an outage again.
	ClusterState(ctx context.Context, cluster int64) (ClusterState, error)
	SaveClusterState(ctx context.Context, s ClusterState) error
}

// DrillStore is what the readiness drill reads and writes; it needs no lock (the drill
// changes nothing anywhere), so it may use other connections than the fence lease's.
type DrillStore interface {
	Now(ctx context.Context) (time.Time, error)
	// Mappings returns every cluster's mappings.
	Mappings(ctx context.Context) ([]Mapping, error)
	Drills(ctx context.Context) (map[clusters.MemberKey]Drill, error)
	SaveDrill(ctx context.Context, d Drill) error
}

// Watched is one adopted cluster as the worker watches it.
type Watched struct {
	ID   int64
	Name string
	// Members reads its member list; Config its server configuration (nil: its
	// cluster.offline_threshold is not checked).
	Members Cluster
	Config  ClusterConfig
}

// Clusters lists the clusters the leader watches, read again every poll: a cluster
// registered while the worker runs gets its loop, a removed one loses it.
type Clusters interface {
	Watched(ctx context.Context) ([]Watched, error)
}

// One is a list of one cluster to watch (tests, tools).
func One(id int64, name string, c Cluster) Clusters {
	return oneCluster{{ID: id, Name: name, Members: c}}
}

type oneCluster []Watched

func (o oneCluster) Watched(context.Context) ([]Watched, error) { return o, nil }

// Worker is apelora-worker's loop: lead when no one else does, watch, decide, act, record.
// The leader runs one loop per cluster under its one lease: a cluster that does not
// answer delays and pauses only its own.
type Worker struct {
	ID            string // names this worker in events and logs
	Limits        Limits
	Poll          time.Duration
	DrillInterval time.Duration // zero: no drill
	// Lease is the leader lease's length (leader.Options.Lease); zero: never renewed.
	Lease    time.Duration
	Clusters Clusters
	// Cluster, when Clusters is nil, is the one cluster watched (id 1, "default": the
	// package's tests).
	Cluster    Cluster
	MAAS       MAAS
	Leadership Leadership
	Drills     DrillStore
	Log        *slog.Logger
	// Observer is told of leadership, events and rounds (metrics); nil: nobody.
	Observer Observer
	// Sleep waits between rounds; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	state map[int64]*clusterState
}

// clusterState is what the leading worker keeps of one cluster between its rounds.
type clusterState struct {
	name      string
	loaded    bool   // read from the lease's ClusterState since this worker leads
	lastIncus string // last Incus problem logged, to log each once
	// unreadableSince is when the cluster could first not be read in this outage (nil: it
	// answers); an outage is recorded once (UNREADABLE) and its end once (READABLE).
	unreadableSince *time.Time
	// unread is true from a failed read of the members to the next answer, which sets
	// answeringSince: Incus's Offline counts again only Limits.Settle after it.
	unread         bool
	answeringSince time.Time
	// noQuorumSince is when Incus was first seen without quorum (nil: it has it).
	noQuorumSince *time.Time
	lastReadAt    *time.Time
	// short is why the cluster's cluster.offline_threshold forbids fencing there (D8: it
	// pauses that cluster only); checked once at its first answer.
	thresholdChecked bool
	short            string
}

func (w *Worker) sleep(ctx context.Context, d time.Duration) error {
	if w.Sleep != nil {
		return w.Sleep(ctx, d)
	}
	return leader.Sleep(ctx, d)
}

// Run leads when it can and stands by when another worker leads, until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Limits.Validate(); err != nil {
		return err
	}
	if w.Poll <= 0 {
		return errors.New("the poll interval must be positive")
	}
	leader.Run(ctx, w.Leadership.TryLead, w.lead, leader.Options{
		Retry: w.Poll, Sleep: w.sleep, Log: w.Log, Attrs: []any{"worker", w.ID},
		Unreachable: "cannot reach the database to take the fence lease; retrying",
		Standby:     "another apelora-worker holds the fence lease: standing by",
		Lease:       w.Lease, Leading: w.observer().Lease,
	})
	return nil
}

// watched lists the clusters to watch now.
func (w *Worker) watched(ctx context.Context) ([]Watched, error) {
	if w.Clusters == nil {
		return []Watched{{ID: 1, Name: "default", Members: w.Cluster}}, nil
	}
	return w.Clusters.Watched(ctx)
}

// lead acts while this worker holds the fence lease (leader.Run closes it after).
func (w *Worker) lead(ctx context.Context, lease Lease) {
	obs := w.observer()
	lease = observedLease{lease, obs}
	now, err := lease.Now(ctx)
	if err != nil {
		w.Log.Warn("lost the database right after taking the fence lease", "error", err)
		return
	}
	if _, err := lease.Append(ctx, Event{At: now, Kind: KindLeading, Worker: w.ID,
		Message: fmt.Sprintf("apelora-worker %s holds the fence lease (epoch %d) and acts from now on", w.ID, lease.Epoch()),
		Details: map[string]any{"epoch": lease.Epoch(), "leaseSeconds": w.Lease.Seconds(), "offlineAfterSeconds": w.Limits.OfflineAfter.Seconds(), "cooldownSeconds": w.Limits.Cooldown.Seconds(),
			"confirmTimeoutSeconds": w.Limits.ConfirmTimeout.Seconds(), "pollSeconds": w.Poll.Seconds(), "settleSeconds": w.Limits.Settle.Seconds()}}); err != nil {
		w.Log.Warn("lost the database right after taking the fence lease", "error", err)
		return
	}
	w.Log.Info("leading: this apelora-worker now watches the members and fences", "worker", w.ID, "epoch", lease.Epoch())
	obs.Leading(true)
	defer obs.Leading(false)
	since := now
	w.mu.Lock()
	w.state = map[int64]*clusterState{}
	w.mu.Unlock()

	lctx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	defer func() { stop(); loops.Wait() }()
	if w.DrillInterval > 0 && w.Drills != nil {
		loops.Add(1)
		go func() { defer loops.Done(); w.drillLoop(lctx) }()
	}
	// One loop per cluster, started when the cluster is first listed and stopped when it
	// is no longer: each round of each reads that cluster only.
	running := map[int64]context.CancelFunc{}
	for ctx.Err() == nil {
		if err := lease.Check(ctx); err != nil {
			if ctx.Err() == nil {
				w.Log.Warn("lost the fence lease: stopped acting; will try to lead again", "worker", w.ID, "epoch", lease.Epoch(), "error", err)
			}
			return
		}
		cs, err := w.watched(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.Log.Warn("cannot list the Incus clusters to watch; the loops of those already watched go on", "error", err)
			}
		} else {
			listed := map[int64]bool{}
			for _, c := range cs {
				listed[c.ID] = true
				if _, ok := running[c.ID]; ok {
					continue
				}
				cctx, cancel := context.WithCancel(lctx)
				running[c.ID] = cancel
				loops.Add(1)
				go func(c Watched) { defer loops.Done(); w.clusterLoop(cctx, lease, c) }(c)
			}
			for id, cancel := range running {
				if !listed[id] {
					cancel() // its loop forgets it once its last round is over
					delete(running, id)
				}
			}
		}
		if ctx.Err() == nil {
			hb, err := lease.Now(ctx)
			if err == nil {
				err = lease.Heartbeat(ctx, WorkerStatus{Worker: w.ID, LeaderSince: since, LastRoundAt: hb, PollInterval: w.Poll, Limits: w.Limits})
			}
			if err != nil && ctx.Err() == nil {
				w.Log.Warn("fence worker report failed", "error", err)
			}
		}
		if w.sleep(ctx, w.Poll) != nil {
			return
		}
	}
}

// clusterLoop runs one cluster's rounds until ctx ends (the lease lost, or the cluster
// removed).
func (w *Worker) clusterLoop(ctx context.Context, lease Lease, c Watched) {
	obs := w.observer()
	defer w.forget(c.ID)
	for ctx.Err() == nil {
		if lease.Check(ctx) != nil {
			return
		}
		err := w.RoundCluster(ctx, lease, c)
		if err != nil && ctx.Err() == nil {
			w.Log.Warn("fence round failed", "cluster", c.Name, "error", err)
		}
		if ctx.Err() == nil {
			obs.RoundDone(err)
		}
		if w.sleep(ctx, w.Poll) != nil {
			return
		}
	}
}

// forget drops a cluster's state when its loop ends (the cluster removed, or the lease
// lost): a cluster registered again, or the next lead, starts from the saved state.
func (w *Worker) forget(id int64) {
	w.mu.Lock()
	st := w.state[id]
	delete(w.state, id)
	w.mu.Unlock()
	if st != nil {
		w.observer().Paused(st.name, "")
		w.observer().NoQuorum(st.name, time.Time{})
	}
}

// Round is one look at every cluster, one after the other, then the worker's report (the
// leader's loops run RoundCluster per cluster on their own schedules).
func (w *Worker) Round(ctx context.Context, lease Lease, leaderSince time.Time) error {
	cs, err := w.watched(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		if err := w.RoundCluster(ctx, lease, c); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	now, err := lease.Now(ctx)
	if err != nil {
		return err
	}
	return lease.Heartbeat(ctx, WorkerStatus{Worker: w.ID, LeaderSince: leaderSince, LastRoundAt: now, PollInterval: w.Poll, Limits: w.Limits})
}

// clusterState returns the cluster's state, loaded from the lease's when this worker has
// not looked at the cluster since it leads.
func (w *Worker) clusterState(ctx context.Context, lease Lease, c Watched) (*clusterState, error) {
	w.mu.Lock()
	if w.state == nil {
		w.state = map[int64]*clusterState{}
	}
	st := w.state[c.ID]
	w.mu.Unlock()
	if st != nil {
		return st, nil
	}
	saved, err := lease.ClusterState(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	st = &clusterState{name: c.Name, loaded: true, unreadableSince: saved.UnreadableSince, noQuorumSince: saved.NoQuorumSince, lastReadAt: saved.LastReadAt}
	if saved.UnreadableSince != nil || saved.NoQuorumSince != nil {
		st.unread = true // its next answer starts the settle period
	} else if saved.AnsweringSince != nil {
		st.answeringSince = *saved.AnsweringSince
	}
	w.mu.Lock()
	w.state[c.ID] = st
	w.mu.Unlock()
	return st, nil
}

// RoundCluster is one look at one cluster: observe it, track its members, decide and act
// within its own limits, record. Nothing here reads or writes another cluster's members.
func (w *Worker) RoundCluster(ctx context.Context, lease Lease, c Watched) error {
	st, err := w.clusterState(ctx, lease, c)
	if err != nil {
		return err
	}
	prev, err := lease.Tracking(ctx, c.ID)
	if err != nil {
		return err
	}
	obs, incusErr := c.Members.Observe(ctx)
	// The round's time is taken once Incus's answer is in: a read may take up to a request
	// timeout (Incus regaining quorum answers slowly), and the settle period and the outage
	// clocks start when Incus answered, not when the round asked.
	now, err := lease.Now(ctx)
	if err != nil {
		return err
	}
	snap := Snapshot{Now: now, Limits: w.Limits}
	trust := w.trust(st, now, incusErr)
	if err := w.quorum(ctx, lease, c, st, now, incusErr); err != nil {
		return err
	}
	if err := w.readable(ctx, lease, c, st, now, incusErr); err != nil {
		return err
	}
	if incusErr == nil {
		w.checkThreshold(ctx, c, st)
	}
	if incusErr != nil {
		w.noteIncus(c, st, incusErr)
		// Members unknown: nothing new is fenced, but pending requests are still confirmed.
		ts := make([]Tracking, 0, len(prev))
		for _, t := range prev {
			ts = append(ts, t)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Member < ts[j].Member })
		snap.Members = Members(ts, nil)
	} else {
		w.noteIncus(c, st, nil)
		next, gone, events := Track(prev, obs, now, w.Limits.MaxObservationGap, trust)
		for i := range events {
			events[i].Worker, events[i].Cluster = w.ID, c.ID
		}
		if _, err := lease.SaveTracking(ctx, c.ID, next, gone, events); err != nil {
			return err
		}
		// Until Incus's Offline can be believed again, nothing new is fenced either; nor
		// while the cluster's offline threshold is longer than the limits allow.
		snap.Members, snap.MembersKnown = Members(next, obs), trust.Settled(now) && st.short == ""
		at := now
		st.lastReadAt = &at
	}
	if snap.Mappings, err = lease.Mappings(ctx, c.ID); err != nil {
		return err
	}
	if snap.Requests, err = lease.Requests(ctx, c.ID); err != nil {
		return err
	}
	latest, err := lease.LatestEvents(ctx, c.ID)
	if err != nil {
		return err
	}
	since := map[string]time.Time{}
	for _, m := range snap.Members {
		since[m.Name] = m.OfflineSince
	}
	for _, d := range Decide(snap) {
		var err error
		last := latestOf(latest, d.Member)
		switch d.Action {
		case ActConfirm:
			err = w.confirm(ctx, lease, c.ID, now, d)
		case ActRefuse:
			if !repeats(last, KindRefused, d.Reason, since[d.Member]) {
				_, err = lease.Append(ctx, w.event(c.ID, now, d, KindRefused, d.Reason, d.Message, d.Details()))
			}
		case ActFence:
			err = w.fence(ctx, lease, c.ID, now, d, last, since[d.Member])
		}
		if err != nil {
			return err
		}
	}
	reason := st.pausedReason(incusErr)
	w.observer().Paused(c.Name, reason)
	cs := ClusterState{Cluster: c.ID, LastReadAt: st.lastReadAt, UnreadableSince: st.unreadableSince, NoQuorumSince: st.noQuorumSince, PausedReason: reason}
	if !st.answeringSince.IsZero() {
		a := st.answeringSince
		cs.AnsweringSince = &a
	}
	return lease.SaveClusterState(ctx, cs)
}

// pausedReason says why fencing is paused in the cluster after this round ("" when it
// acts): the code first (PausedIncusUnavailable, …), then its message.
func (st *clusterState) pausedReason(incusErr error) string {
	switch {
	case st.noQuorumSince != nil:
		return PausedNoQuorum + ": " + NoQuorumMessage(*st.noQuorumSince)
	case incusErr != nil:
		since := ""
		if st.unreadableSince != nil {
			since = " since " + st.unreadableSince.UTC().Format(time.RFC3339)
		}
		return clip(PausedIncusUnavailable + ": the members could not be read" + since + " (" + incusErr.Error() + "): nothing new is fenced in this cluster; pending power-offs are still confirmed")
	case st.short != "":
		return clip(PausedOfflineAfter + ": " + st.short)
	}
	return ""
}

func clip(s string) string {
	if len(s) <= 1000 {
		return s
	}
	return strings.ToValidUTF8(s[:1000], "") + "…"
}

// readable records a cluster's outage once (UNREADABLE, when a read of it fails for
// another reason than quorum) and its end once (READABLE).
func (w *Worker) readable(ctx context.Context, lease Lease, c Watched, st *clusterState, now time.Time, incusErr error) error {
	switch {
	case incusErr != nil && !errors.Is(incusErr, ErrNoQuorum) && st.unreadableSince == nil:
		at := now
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindUnreadable, Worker: w.ID, Cluster: c.ID,
			Message: fmt.Sprintf("cluster %s cannot be read (%v): fencing in it is paused (pending power-offs are still confirmed); the other clusters go on", c.Name, incusErr),
			Details: map[string]any{"cluster": c.Name, "since": at.UTC().Format(time.RFC3339Nano), "error": incusErr.Error()}}); err != nil {
			return err
		}
		st.unreadableSince = &at
	case incusErr == nil && st.unreadableSince != nil:
		lost := now.Sub(*st.unreadableSince)
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindReadable, Worker: w.ID, Cluster: c.ID,
			Message: fmt.Sprintf("cluster %s can be read again after %s (since %s): members it lists Offline count once it has answered for the settle period (%s)",
				c.Name, round(lost), st.unreadableSince.UTC().Format(time.RFC3339), w.Limits.Settle),
			Details: map[string]any{"cluster": c.Name, "unreadableSince": st.unreadableSince.UTC().Format(time.RFC3339Nano), "unreadableForSeconds": int64(lost / time.Second)}}); err != nil {
			return err
		}
		st.unreadableSince = nil
	}
	return nil
}

// checkThreshold reads the cluster's cluster.offline_threshold at its first answer: an
// OfflineAfter it could outlast pauses fencing in that cluster (the others go on).
func (w *Worker) checkThreshold(ctx context.Context, c Watched, st *clusterState) {
	if st.thresholdChecked || c.Config == nil {
		return
	}
	cfg, err := c.Config.ServerConfig(ctx)
	if err != nil {
		return // asked again next round
	}
	st.thresholdChecked = true
	if err := w.Limits.CheckOfflineThreshold(OfflineThreshold(cfg)); err != nil {
		st.short = fmt.Sprintf("cluster %s: %v", c.Name, err)
		w.Log.Error("fencing paused in this cluster: its offline threshold is too long for APELORA_FENCE_OFFLINE_AFTER", "cluster", c.Name, "error", err)
	}
}

// quorum follows Incus's quorum from this round's read: the loss is recorded once (a
// QUORUM_LOST event about the cluster), its end once (QUORUM_BACK). A read that failed
// otherwise (Incus unreachable) changes nothing: whether the database has its quorum is
// then unknown.
func (w *Worker) quorum(ctx context.Context, lease Lease, c Watched, st *clusterState, now time.Time, incusErr error) error {
	since := st.noQuorumSince
	switch {
	case errors.Is(incusErr, ErrNoQuorum) && since == nil:
		at := now
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindQuorumLost, Worker: w.ID, Cluster: c.ID, Message: NoQuorumMessage(at),
			Details: map[string]any{"since": at.UTC().Format(time.RFC3339Nano), "error": incusErr.Error(), "cluster": c.Name}}); err != nil {
			return err
		}
		w.Log.Warn(NoQuorumMessage(at), "cluster", c.Name, "error", incusErr)
		since = &at
	case incusErr == nil && since != nil:
		lost := now.Sub(*since)
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindQuorumBack, Worker: w.ID, Cluster: c.ID,
			Message: fmt.Sprintf("Incus has its quorum again after %s without (since %s): members it lists Offline count once it has answered for the settle period (%s)",
				round(lost), since.UTC().Format(time.RFC3339), w.Limits.Settle),
			Details: map[string]any{"lostSince": since.UTC().Format(time.RFC3339Nano), "lostForSeconds": int64(lost / time.Second), "settleSeconds": w.Limits.Settle.Seconds(), "cluster": c.Name}}); err != nil {
			return err
		}
		w.Log.Info("Incus has its quorum again", "cluster", c.Name, "lost_for", round(lost).String())
		since = nil
	}
	st.noQuorumSince = since
	var at time.Time
	if since != nil {
		at = *since
	}
	w.observer().NoQuorum(c.Name, at)
	return nil
}

func latestOf(m map[string]Event, member string) *Event {
	if e, ok := m[member]; ok {
		return &e
	}
	return nil
}

// repeats reports whether the member's latest event already says this, in this outage: a
// decision that stays the same is recorded once.
func repeats(last *Event, kind Kind, reason Reason, since time.Time) bool {
	return last != nil && last.Kind == kind && last.Reason == reason && !last.At.Before(since)
}

// trust notes whether the cluster answered this round and says how far its Offline counts.
func (w *Worker) trust(st *clusterState, now time.Time, err error) Trust {
	if err != nil {
		st.unread = true
		return Trust{}
	}
	if st.unread {
		st.unread, st.answeringSince = false, now
		w.Log.Info("Incus answers again: members it lists Offline count only after the settle period (Incus lists live members Offline for a while after regaining quorum)",
			"cluster", st.name, "settle", w.Limits.Settle.String())
	}
	return Trust{AnsweringSince: st.answeringSince, Settle: w.Limits.Settle}
}

func (w *Worker) noteIncus(c Watched, st *clusterState, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == st.lastIncus {
		return
	}
	st.lastIncus = msg
	if err != nil {
		w.Log.Warn("cannot read the Incus members: no new fence in this cluster until they can be read (pending ones are still confirmed)", "cluster", c.Name, "error", err)
	} else {
		w.Log.Info("reading the Incus members", "cluster", c.Name)
	}
}

func (w *Worker) event(cluster int64, now time.Time, d Decision, kind Kind, reason Reason, msg string, details map[string]any) Event {
	return Event{At: now, Member: d.Member, Kind: kind, Reason: reason, Message: msg, Worker: w.ID, Details: details, Cluster: cluster}
}

// verify reads the machine and checks it reports the hardware UUID (Verify).
func (w *Worker) verify(ctx context.Context, systemID, uuid string) (MachineFacts, Reason, string) {
	return Verify(ctx, w.MAAS, systemID, uuid)
}

// Verify reads the machine and checks it reports the hardware UUID: the check before any
// read or power command, by the fence worker and by a rolling reboot alike. It returns the
// reason and message when the machine may not be touched.
func Verify(ctx context.Context, maas MachineReader, systemID, uuid string) (MachineFacts, Reason, string) {
	m, err := maas.Machine(ctx, systemID)
	switch {
	case errors.Is(err, ErrMachineNotFound):
		return m, ReasonMachineNotFound, fmt.Sprintf("MAAS has no machine %s: check the fence mapping", systemID)
	case err != nil:
		return m, ReasonMAASUnavailable, fmt.Sprintf("MAAS could not be asked about machine %s: %v", systemID, err)
	case m.HardwareUUID == "":
		return m, ReasonUUIDMismatch, fmt.Sprintf("MAAS reports no hardware UUID for machine %s, so it cannot be checked against the mapped %s: nothing is read or powered", systemID, uuid)
	case !SameUUID(m.HardwareUUID, uuid):
		return m, ReasonUUIDMismatch, fmt.Sprintf("MAAS machine %s reports hardware UUID %s, not the mapped %s: it may be another machine, so nothing is read or powered; fix the fence mapping", systemID, m.HardwareUUID, uuid)
	}
	return m, ReasonNone, ""
}

// fence powers an eligible member off: UUID check, record the request, send it.
func (w *Worker) fence(ctx context.Context, lease Lease, cluster int64, now time.Time, d Decision, last *Event, since time.Time) error {
	mp := *d.Mapping
	facts, reason, msg := w.verify(ctx, mp.SystemID, mp.HardwareUUID)
	details := d.Details()
	if facts.PowerType != "" {
		details["powerType"] = facts.PowerType
	}
	if reason != ReasonNone {
		if repeats(last, KindRefused, reason, since) {
			return nil // same refusal as last time; it is tried again every round, recorded once
		}
		if _, err := lease.Append(ctx, w.event(cluster, now, d, KindEligible, "", d.Message, details)); err != nil {
			return err
		}
		_, err := lease.Append(ctx, w.event(cluster, now, d, KindRefused, reason, msg, details))
		return err
	}
	if _, err := lease.Append(ctx, w.event(cluster, now, d, KindEligible, "", d.Message, details)); err != nil {
		return err
	}
	// Recorded before it is sent: a request that cannot be recorded is not sent, and one
	// that was sent is always known to the next worker.
	req, err := lease.Append(ctx, w.event(cluster, now, d, KindRequested, "",
		fmt.Sprintf("asking MAAS to power off machine %s (hardware UUID %s checked)", mp.SystemID, mp.HardwareUUID), details))
	if err != nil {
		return err
	}
	// The request was recorded under this epoch; the lease must still be this worker's
	// now, right before the power-off: a worker paused since (SIGSTOP, a VM pause) whose
	// lease lapsed sends nothing, and the leader that took over confirms the request
	// instead of sending another.
	if err := lease.Check(ctx); err != nil {
		return fmt.Errorf("power-off of %s not sent: %w", d.Member, err)
	}
	w.Log.Info("asking MAAS to power a member off", "member", d.Member, "system_id", mp.SystemID, "request", req.ID, "epoch", lease.Epoch())
	sent, err := w.MAAS.PowerOff(ctx, mp.SystemID)
	switch {
	case errors.Is(err, ErrMAASRefused):
		_, aerr := lease.Append(ctx, w.event(cluster, now, d, KindNotConfirmed, ReasonPowerOffRefused,
			fmt.Sprintf("MAAS refused to power off machine %s: %v; %s is not fenced", mp.SystemID, err, d.Member), withRequest(details, req)))
		return aerr
	case err != nil:
		// MAAS may or may not have acted: the confirming reads decide.
		w.Log.Warn("power-off request got no clear answer; confirming by reading the power state", "member", d.Member, "error", err)
	case !sent:
		_, aerr := lease.Append(ctx, w.event(cluster, now, d, KindNotConfirmed, ReasonPowerOffNotSent,
			fmt.Sprintf("MAAS says it cannot power off machine %s (no power driver); %s is not fenced", mp.SystemID, d.Member), withRequest(details, req)))
		return aerr
	}
	return nil
}

func withRequest(details map[string]any, req Event) map[string]any {
	out := make(map[string]any, len(details)+1)
	for k, v := range details {
		out[k] = v
	}
	out["requestEventId"] = req.ID
	return out
}

// confirm reads the power state after a request: off counts; anything else, once the
// confirmation time has passed, is reported as not fenced.
func (w *Worker) confirm(ctx context.Context, lease Lease, cluster int64, now time.Time, d Decision) error {
	r := d.Request
	expired := now.Sub(r.At) >= w.Limits.ConfirmTimeout
	details := map[string]any{"maasSystemId": r.SystemID, "hardwareUuid": r.HardwareUUID, "requestEventId": r.EventID,
		"requestedAt": r.At.UTC().Format(time.RFC3339Nano), "offlineMembers": d.Offline, "members": d.Members}
	notConfirmed := func(reason Reason, msg string) error {
		_, err := lease.Append(ctx, w.event(cluster, now, d, KindNotConfirmed, reason, msg+"; "+d.Member+" is not fenced", details))
		return err
	}
	_, reason, msg := w.verify(ctx, r.SystemID, r.HardwareUUID)
	switch {
	case reason == ReasonMAASUnavailable && !expired:
		w.Log.Warn("cannot confirm a power-off yet", "member", d.Member, "problem", msg)
		return nil
	case reason != ReasonNone:
		return notConfirmed(reason, msg)
	}
	state, err := w.MAAS.QueryPowerState(ctx, r.SystemID)
	switch {
	case errors.Is(err, ErrPowerNotQueryable):
		return notConfirmed(ReasonPowerNotQueryable, fmt.Sprintf("MAAS cannot read the power state of machine %s (%v), so the power-off cannot be confirmed", r.SystemID, err))
	case err != nil && !expired:
		w.Log.Warn("cannot confirm a power-off yet", "member", d.Member, "error", err)
		return nil
	case err != nil:
		return notConfirmed(ReasonMAASUnavailable, fmt.Sprintf("no power-state read of machine %s succeeded within %s of the request: %v", r.SystemID, w.Limits.ConfirmTimeout, err))
	}
	details["powerState"] = state
	if state == "off" {
		details["confirmedAfterSeconds"] = now.Sub(r.At).Seconds()
		_, err := lease.Append(ctx, w.event(cluster, now, d, KindConfirmed, "",
			fmt.Sprintf("the power controller of machine %s says off: %s is fenced", r.SystemID, d.Member), details))
		if err == nil {
			w.Log.Info("fence confirmed: the member's machine is off", "member", d.Member, "system_id", r.SystemID)
		}
		return err
	}
	if !expired {
		return nil
	}
	return notConfirmed(ReasonPowerNotOff, fmt.Sprintf("MAAS accepted the power-off of machine %s, but %s after it the power controller still says %q", r.SystemID, round(now.Sub(r.At)), state))
}

// drillLoop runs the readiness drill while this worker leads: every mapped member is
// checked once per DrillInterval, and at once when its mapping is new or changed.
func (w *Worker) drillLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.DrillDue(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("fence readiness drill failed", "error", err)
		}
		if w.sleep(ctx, w.Poll) != nil {
			return
		}
	}
}

// DrillDue drills every mapping whose last drill is older than DrillInterval, or was for
// another system id or UUID.
func (w *Worker) DrillDue(ctx context.Context) error {
	now, err := w.Drills.Now(ctx)
	if err != nil {
		return err
	}
	maps, err := w.Drills.Mappings(ctx)
	if err != nil {
		return err
	}
	done, err := w.Drills.Drills(ctx)
	if err != nil {
		return err
	}
	sort.Slice(maps, func(i, j int) bool {
		if maps[i].Cluster != maps[j].Cluster {
			return maps[i].Cluster < maps[j].Cluster
		}
		return maps[i].Member < maps[j].Member
	})
	for _, mp := range maps {
		if d, ok := done[clusters.MemberKey{Cluster: mp.Cluster, Name: mp.Member}]; ok && d.SystemID == mp.SystemID && d.HardwareUUID == mp.HardwareUUID && now.Sub(d.At) < w.DrillInterval {
			continue
		}
		d := w.Drill(ctx, mp)
		if ctx.Err() != nil {
			return nil
		}
		if d.At, err = w.Drills.Now(ctx); err != nil {
			return err
		}
		if err := w.Drills.SaveDrill(ctx, d); err != nil {
			return err
		}
		if !d.OK {
			w.Log.Warn("fence readiness drill: this member could not be fenced", "cluster", d.Cluster, "member", d.Member, "problem", d.Problem)
		}
	}
	return nil
}

// Drill does the read-only part of a fence for one mapping: UUID check, live power read.
func (w *Worker) Drill(ctx context.Context, mp Mapping) Drill {
	d := Drill{Cluster: mp.Cluster, Member: mp.Member, SystemID: mp.SystemID, HardwareUUID: mp.HardwareUUID, Worker: w.ID}
	_, reason, msg := w.verify(ctx, mp.SystemID, mp.HardwareUUID)
	if reason != ReasonNone {
		d.Problem = msg
		return d
	}
	state, err := w.MAAS.QueryPowerState(ctx, mp.SystemID)
	switch {
	case errors.Is(err, ErrPowerNotQueryable):
		d.Problem = fmt.Sprintf("MAAS cannot read the power state of machine %s (manual power, or no controller): a power-off could never be confirmed, so %s can never count as fenced", mp.SystemID, mp.Member)
	case err != nil:
		d.Problem = fmt.Sprintf("the power state of machine %s could not be read: %v", mp.SystemID, err)
	default:
		d.PowerState = state
		if state == "on" || state == "off" {
			d.OK = true
		} else {
			d.Problem = fmt.Sprintf("the power controller of machine %s answers %q: check its BMC settings in MAAS", mp.SystemID, state)
		}
	}
	return d
}

// Describe returns the limits in words, for logs.
func (l Limits) Describe() string {
	return strings.Join([]string{
		"offline-after=" + l.OfflineAfter.String(), "cooldown=" + l.Cooldown.String(),
		"confirm-timeout=" + l.ConfirmTimeout.String(), "max-observation-gap=" + l.MaxObservationGap.String(),
		"settle=" + l.Settle.String(),
	}, " ")
}
