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
type Lease interface {
	leader.Lease
	// Now is the database's clock: every worker measures with the same one.
	Now(ctx context.Context) (time.Time, error)
	Tracking(ctx context.Context) (map[string]Tracking, error)
	// SaveTracking stores the tracking records, forgets gone members, and appends events,
	// in one transaction. It returns the events with their ids.
	SaveTracking(ctx context.Context, next []Tracking, gone []string, events []Event) ([]Event, error)
	Mappings(ctx context.Context) (map[string]Mapping, error)
	Requests(ctx context.Context) (map[string]Request, error)
	// LatestEvents returns the latest event of every member.
	LatestEvents(ctx context.Context) (map[string]Event, error)
	Append(ctx context.Context, e Event) (Event, error)
	Heartbeat(ctx context.Context, s WorkerStatus) error
	// NoQuorumSince is the last report's NoQuorumSince (nil for none): a new leader goes on
	// with the state its predecessor saw instead of recording the loss again.
	NoQuorumSince(ctx context.Context) (*time.Time, error)
}

// DrillStore is what the readiness drill reads and writes; it needs no lock (the drill
// changes nothing anywhere), so it may use other connections than the fence lease's.
type DrillStore interface {
	Now(ctx context.Context) (time.Time, error)
	Mappings(ctx context.Context) (map[string]Mapping, error)
	Drills(ctx context.Context) (map[string]Drill, error)
	SaveDrill(ctx context.Context, d Drill) error
}

// Worker is apelora-worker's loop: lead when no one else does, watch, decide, act, record.
type Worker struct {
	ID            string // names this worker in events and logs
	Limits        Limits
	Poll          time.Duration
	DrillInterval time.Duration // zero: no drill
	// Lease is the leader lease's length (leader.Options.Lease); zero: never renewed.
	Lease      time.Duration
	Cluster    Cluster
	MAAS       MAAS
	Leadership Leadership
	Drills     DrillStore
	Log        *slog.Logger
	// Observer is told of leadership, events and rounds (metrics); nil: nobody.
	Observer Observer
	// Sleep waits between rounds; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	lastIncus string // last Incus problem logged, to log each once
	// unread is true from a failed read of the members to the next answer, which sets
	// answeringSince: Incus's Offline counts again only Limits.Settle after it.
	unread         bool
	answeringSince time.Time
	// noQuorumSince is when Incus was first seen without quorum (nil: it has it), loaded
	// from the last report when this worker starts leading (quorumLoaded).
	noQuorumSince *time.Time
	quorumLoaded  bool
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
	w.quorumLoaded = false
	w.mu.Unlock()

	dctx, stopDrill := context.WithCancel(ctx)
	var drills sync.WaitGroup
	if w.DrillInterval > 0 && w.Drills != nil {
		drills.Add(1)
		go func() { defer drills.Done(); w.drillLoop(dctx) }()
	}
	defer func() { stopDrill(); drills.Wait() }()

	for ctx.Err() == nil {
		if err := lease.Check(ctx); err != nil {
			if ctx.Err() == nil {
				w.Log.Warn("lost the fence lease: stopped acting; will try to lead again", "worker", w.ID, "epoch", lease.Epoch(), "error", err)
			}
			return
		}
		err := w.Round(ctx, lease, since)
		if err != nil && ctx.Err() == nil {
			w.Log.Warn("fence round failed", "error", err)
		}
		if ctx.Err() == nil {
			obs.RoundDone(err)
		}
		if w.sleep(ctx, w.Poll) != nil {
			return
		}
	}
}

// Round is one look at the cluster: observe, decide, act, record.
func (w *Worker) Round(ctx context.Context, lease Lease, leaderSince time.Time) error {
	prev, err := lease.Tracking(ctx)
	if err != nil {
		return err
	}
	obs, incusErr := w.Cluster.Observe(ctx)
	// The round's time is taken once Incus's answer is in: a read may take up to a request
	// timeout (Incus regaining quorum answers slowly), and the settle period and the outage
	// clocks start when Incus answered, not when the round asked.
	now, err := lease.Now(ctx)
	if err != nil {
		return err
	}
	snap := Snapshot{Now: now, Limits: w.Limits}
	trust := w.trust(now, incusErr)
	noQuorumSince, err := w.quorum(ctx, lease, now, incusErr)
	if err != nil {
		return err
	}
	if incusErr != nil {
		w.noteIncus(incusErr)
		// Members unknown: nothing new is fenced, but pending requests are still confirmed.
		ts := make([]Tracking, 0, len(prev))
		for _, t := range prev {
			ts = append(ts, t)
		}
		snap.Members = Members(ts, nil)
	} else {
		w.noteIncus(nil)
		next, gone, events := Track(prev, obs, now, w.Limits.MaxObservationGap, trust)
		for i := range events {
			events[i].Worker = w.ID
		}
		if _, err := lease.SaveTracking(ctx, next, gone, events); err != nil {
			return err
		}
		// Until Incus's Offline can be believed again, nothing new is fenced either.
		snap.Members, snap.MembersKnown = Members(next, obs), trust.Settled(now)
	}
	if snap.Mappings, err = lease.Mappings(ctx); err != nil {
		return err
	}
	if snap.Requests, err = lease.Requests(ctx); err != nil {
		return err
	}
	latest, err := lease.LatestEvents(ctx)
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
			err = w.confirm(ctx, lease, now, d)
		case ActRefuse:
			if !repeats(last, KindRefused, d.Reason, since[d.Member]) {
				_, err = lease.Append(ctx, w.event(now, d, KindRefused, d.Reason, d.Message, d.Details()))
			}
		case ActFence:
			err = w.fence(ctx, lease, now, d, last, since[d.Member])
		}
		if err != nil {
			return err
		}
	}
	return lease.Heartbeat(ctx, WorkerStatus{Worker: w.ID, LeaderSince: leaderSince, LastRoundAt: now, PollInterval: w.Poll, Limits: w.Limits, NoQuorumSince: noQuorumSince})
}

// quorum follows Incus's quorum from this round's read: the loss is recorded once (a
// QUORUM_LOST event, the time kept in the worker's report), its end once (QUORUM_BACK). A
// read that failed otherwise (Incus unreachable) changes nothing: whether the database has
// its quorum is then unknown. It returns since when Incus has had no quorum (nil: it has).
func (w *Worker) quorum(ctx context.Context, lease Lease, now time.Time, incusErr error) (*time.Time, error) {
	w.mu.Lock()
	loaded, since := w.quorumLoaded, w.noQuorumSince
	w.mu.Unlock()
	if !loaded {
		var err error
		if since, err = lease.NoQuorumSince(ctx); err != nil {
			return nil, err
		}
	}
	switch {
	case errors.Is(incusErr, ErrNoQuorum) && since == nil:
		at := now
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindQuorumLost, Worker: w.ID, Message: NoQuorumMessage(at),
			Details: map[string]any{"since": at.UTC().Format(time.RFC3339Nano), "error": incusErr.Error()}}); err != nil {
			return nil, err
		}
		w.Log.Warn(NoQuorumMessage(at), "error", incusErr)
		since = &at
	case incusErr == nil && since != nil:
		lost := now.Sub(*since)
		if _, err := lease.Append(ctx, Event{At: now, Kind: KindQuorumBack, Worker: w.ID,
			Message: fmt.Sprintf("Incus has its quorum again after %s without (since %s): members it lists Offline count once it has answered for the settle period (%s)",
				round(lost), since.UTC().Format(time.RFC3339), w.Limits.Settle),
			Details: map[string]any{"lostSince": since.UTC().Format(time.RFC3339Nano), "lostForSeconds": int64(lost / time.Second), "settleSeconds": w.Limits.Settle.Seconds()}}); err != nil {
			return nil, err
		}
		w.Log.Info("Incus has its quorum again", "lost_for", round(lost).String())
		since = nil
	}
	w.mu.Lock()
	w.quorumLoaded, w.noQuorumSince = true, since
	w.mu.Unlock()
	var at time.Time
	if since != nil {
		at = *since
	}
	w.observer().NoQuorum(at)
	return since, nil
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

// trust notes whether Incus answered this round and says how far its Offline counts.
func (w *Worker) trust(now time.Time, err error) Trust {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.unread = true
		return Trust{}
	}
	if w.unread {
		w.unread, w.answeringSince = false, now
		w.Log.Info("Incus answers again: members it lists Offline count only after the settle period (Incus lists live members Offline for a while after regaining quorum)",
			"settle", w.Limits.Settle.String())
	}
	return Trust{AnsweringSince: w.answeringSince, Settle: w.Limits.Settle}
}

func (w *Worker) noteIncus(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == w.lastIncus {
		return
	}
	w.lastIncus = msg
	if err != nil {
		w.Log.Warn("cannot read the Incus members: no new fence until they can be read (pending ones are still confirmed)", "error", err)
	} else {
		w.Log.Info("reading the Incus members")
	}
}

func (w *Worker) event(now time.Time, d Decision, kind Kind, reason Reason, msg string, details map[string]any) Event {
	return Event{At: now, Member: d.Member, Kind: kind, Reason: reason, Message: msg, Worker: w.ID, Details: details}
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
func (w *Worker) fence(ctx context.Context, lease Lease, now time.Time, d Decision, last *Event, since time.Time) error {
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
		if _, err := lease.Append(ctx, w.event(now, d, KindEligible, "", d.Message, details)); err != nil {
			return err
		}
		_, err := lease.Append(ctx, w.event(now, d, KindRefused, reason, msg, details))
		return err
	}
	if _, err := lease.Append(ctx, w.event(now, d, KindEligible, "", d.Message, details)); err != nil {
		return err
	}
	// Recorded before it is sent: a request that cannot be recorded is not sent, and one
	// that was sent is always known to the next worker.
	req, err := lease.Append(ctx, w.event(now, d, KindRequested, "",
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
		_, aerr := lease.Append(ctx, w.event(now, d, KindNotConfirmed, ReasonPowerOffRefused,
			fmt.Sprintf("MAAS refused to power off machine %s: %v; %s is not fenced", mp.SystemID, err, d.Member), withRequest(details, req)))
		return aerr
	case err != nil:
		// MAAS may or may not have acted: the confirming reads decide.
		w.Log.Warn("power-off request got no clear answer; confirming by reading the power state", "member", d.Member, "error", err)
	case !sent:
		_, aerr := lease.Append(ctx, w.event(now, d, KindNotConfirmed, ReasonPowerOffNotSent,
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
func (w *Worker) confirm(ctx context.Context, lease Lease, now time.Time, d Decision) error {
	r := d.Request
	expired := now.Sub(r.At) >= w.Limits.ConfirmTimeout
	details := map[string]any{"maasSystemId": r.SystemID, "hardwareUuid": r.HardwareUUID, "requestEventId": r.EventID,
		"requestedAt": r.At.UTC().Format(time.RFC3339Nano), "offlineMembers": d.Offline, "members": d.Members}
	notConfirmed := func(reason Reason, msg string) error {
		_, err := lease.Append(ctx, w.event(now, d, KindNotConfirmed, reason, msg+"; "+d.Member+" is not fenced", details))
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
		_, err := lease.Append(ctx, w.event(now, d, KindConfirmed, "",
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
	names := make([]string, 0, len(maps))
	for n := range maps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mp := maps[n]
		if d, ok := done[n]; ok && d.SystemID == mp.SystemID && d.HardwareUUID == mp.HardwareUUID && now.Sub(d.At) < w.DrillInterval {
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
			w.Log.Warn("fence readiness drill: this member could not be fenced", "member", d.Member, "problem", d.Problem)
		}
	}
	return nil
}

// Drill does the read-only part of a fence for one mapping: UUID check, live power read.
func (w *Worker) Drill(ctx context.Context, mp Mapping) Drill {
	d := Drill{Member: mp.Member, SystemID: mp.SystemID, HardwareUUID: mp.HardwareUUID, Worker: w.ID}
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
