package fencing

import (
	"fmt"
	"sort"
	"time"

	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
)

// Member is a cluster member as the policy sees it.
type Member struct {
	Name    string
	Offline bool
	// OfflineSince is when the worker first saw it offline in the current outage; zero when
	// it is not offline.
	OfflineSince time.Time
	// LastSeenOnline is when Incus last listed it as anything but Offline; zero if never.
	// A member confirmed off since then stays fenced.
	LastSeenOnline time.Time
	// Maintenance: Incus listed it Evacuated when it last answered (Tracking.Maintenance).
	Maintenance bool
	// Roles, FailureDomain and Groups are Incus's, for the quorum projection.
	Roles         []string
	FailureDomain string
	Groups        []string
}

// Snapshot is everything the policy decides on, read at one moment.
type Snapshot struct {
	Now    time.Time
	Limits Limits
	// Members are the cluster's members; MembersKnown is false when Incus could not be
	// asked, or its answers are not trusted yet (Trust), in which case only pending
	// requests are acted on.
	Members      []Member
	MembersKnown bool
	Mappings     map[string]Mapping
	// Requests holds the latest power-off request of each member that ever had one.
	Requests map[string]Request
}

// Action is what the policy decides for one member.
type Action string

const (
	// ActNone: the member is not offline; nothing to do.
	ActNone Action = "NONE"
	// ActWait: offline, but not for OfflineAfter yet.
	ActWait Action = "WAIT"
	// ActFenced: already confirmed off in this outage; nothing more to do.
	ActFenced Action = "FENCED"
	// ActConfirm: a request waits for its confirming read.
	ActConfirm Action = "CONFIRM"
	// ActRefuse: a limit forbids powering it off (Reason).
	ActRefuse Action = "REFUSE"
	// ActFence: every limit allows powering it off.
	ActFence Action = "FENCE"
)

// Decision is the policy's verdict on one member.
type Decision struct {
	Member string
	Action Action
	Reason Reason
	// Message says why, in the administrator's words.
	Message string
	// Offline is how many members count as offline (offline, or fence requested and not
	// yet confirmed), out of Members.
	Offline, Members int
	// OfflineFor is how long the member has been seen offline.
	OfflineFor time.Duration
	Mapping    *Mapping
	Request    *Request
	// Quorum is what powering the member off does to Incus's database (package quorum);
	// nil when the decision did not get that far.
	Quorum *quorum.Projection
}

// Details are the decision's facts for its event.
func (d Decision) Details() map[string]any {
	m := map[string]any{"offlineMembers": d.Offline, "members": d.Members}
	if d.OfflineFor > 0 {
		m["offlineForSeconds"] = int64(d.OfflineFor / time.Second)
	}
	if d.Mapping != nil {
		m["maasSystemId"] = d.Mapping.SystemID
		m["hardwareUuid"] = d.Mapping.HardwareUUID
	}
	if d.Quorum != nil {
		q := d.Quorum.Detail()
		if len(d.Quorum.Warnings) > 0 {
			q["warnings"] = d.Quorum.Warnings
		}
		m["quorum"] = q
	}
	return m
}

// CountOffline returns how many members count as offline for the half-the-cluster limit
// (offline, or with a fence requested and not yet confirmed) and how many members there
// are (including requested members Incus no longer lists).
func CountOffline(s *Snapshot) (offline, total int) {
	counted := map[string]bool{}
	for _, m := range s.Members {
		counted[m.Name] = m.Offline
	}
	for name, r := range s.Requests {
		if r.Pending() {
			counted[name] = true
		}
	}
	for _, off := range counted {
		if off {
			offline++
		}
	}
	return offline, len(counted)
}

// Decide applies the fencing limits to a snapshot. It returns one decision per member that
// is offline or has a pending request, ordered by member name. It is pure: the same
// snapshot always gives the same decisions.
func Decide(s Snapshot) []Decision {
	offline, total := CountOffline(&s)
	var out []Decision
	seen := map[string]bool{}
	for name, r := range s.Requests {
		if r.Pending() {
			r := r
			d := Decision{Member: name, Action: ActConfirm, Offline: offline, Members: total, Request: &r,
				Message: fmt.Sprintf("power-off of %s was requested at %s; waiting for a power-state read that says off", name, r.At.UTC().Format(time.RFC3339))}
			if m, ok := s.Mappings[name]; ok {
				d.Mapping = &m
			}
			out = append(out, d)
			seen[name] = true
		}
	}
	if s.MembersKnown {
		for _, m := range s.Members {
			if seen[m.Name] || !m.Offline {
				continue
			}
			out = append(out, decideOffline(&s, m, offline, total))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	return out
}

func decideOffline(s *Snapshot, m Member, offline, total int) Decision {
	d := Decision{Member: m.Name, Offline: offline, Members: total, OfflineFor: s.Now.Sub(m.OfflineSince)}
	if mp, ok := s.Mappings[m.Name]; ok {
		d.Mapping = &mp
	}
	if r, ok := s.Requests[m.Name]; ok {
		d.Request = &r
	}
	switch {
	case d.Request != nil && d.Request.Outcome == KindConfirmed && !m.LastSeenOnline.After(d.Request.At):
		// Confirmed off and not seen since: it stays fenced whatever the clocks say (an
		// outage clock restarted by a gap, a cooldown that ran out) until Incus lists it
		// again.
		d.Action = ActFenced
		d.Message = fmt.Sprintf("%s was confirmed off at %s and Incus has not listed it online since", m.Name, d.Request.OutcomeAt.UTC().Format(time.RFC3339))
	case m.Maintenance:
		// Evacuated (by Apelora or by `incus cluster evacuate`): an administrator took it
		// out on purpose, typically to reboot or repair it, so its outage is expected.
		d.Action, d.Reason = ActRefuse, ReasonMaintenance
		d.Message = fmt.Sprintf("%s has been offline for %s but is in maintenance (Incus listed it Evacuated when it last answered): it is never powered off; restore it (restoreMember) once it is back", m.Name, round(d.OfflineFor))
	case d.OfflineFor < s.Limits.OfflineAfter:
		d.Action = ActWait
		d.Message = fmt.Sprintf("%s has been offline for %s; it is powered off only after %s", m.Name, round(d.OfflineFor), s.Limits.OfflineAfter)
	case d.Mapping == nil:
		d.Action, d.Reason = ActRefuse, ReasonNotMapped
		d.Message = fmt.Sprintf("%s has been offline for %s but has no fence mapping: set one (setFenceMapping) so it can be powered off", m.Name, round(d.OfflineFor))
	case offline*2 >= total:
		d.Action, d.Reason = ActRefuse, ReasonTooManyOffline
		d.Message = fmt.Sprintf("%d of %d members count as offline (offline, or a fence not yet confirmed): fencing needs fewer than half offline, so nothing is powered off; a partition of this side is more likely than that many dead hosts", offline, total)
	case d.projectQuorum(s).Refused():
		d.Action, d.Reason = ActRefuse, ReasonQuorum
		d.Message = fmt.Sprintf("powering %s off is refused: %s", m.Name, d.Quorum.Refusals[0])
	case d.Request != nil && s.Now.Sub(d.Request.At) < s.Limits.Cooldown:
		d.Action, d.Reason = ActRefuse, ReasonCooldown
		d.Message = fmt.Sprintf("%s was last asked to power off at %s, within the cooldown of %s", m.Name, d.Request.At.UTC().Format(time.RFC3339), s.Limits.Cooldown)
	default:
		d.Action = ActFence
		d.Message = fmt.Sprintf("%s has been offline for %s and %d of %d members count as offline: eligible for power-off", m.Name, round(d.OfflineFor), offline, total)
	}
	return d
}

// projectQuorum applies the rule every plan that takes a member away applies (package
// quorum) to powering d's member off: members offline, or with a power-off not yet
// confirmed, are already away.
func (d *Decision) projectQuorum(s *Snapshot) quorum.Projection {
	ms := make([]quorum.Member, len(s.Members))
	for i, m := range s.Members {
		r, asked := s.Requests[m.Name]
		ms[i] = quorum.Member{Name: m.Name, Online: !m.Offline && !(asked && r.Pending()),
			Roles: m.Roles, FailureDomain: m.FailureDomain, Groups: m.Groups}
	}
	p := quorum.Project(ms, d.Member)
	d.Quorum = &p
	return p
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// Tracking is what the worker has observed of one member, kept in PostgreSQL so that a
// restart neither forgets nor invents an outage.
type Tracking struct {
	Member string
	// FirstSeenOffline is when the current outage was first seen; zero when not offline.
	FirstSeenOffline time.Time
	LastSeenOnline   time.Time // zero if never
	LastObserved     time.Time
	// Maintenance: the member's last status other than Offline was Evacuated. Should Incus
	// list an evacuated member that stops answering as Offline (6.0.4 keeps it Evacuated),
	// the evacuation is known from before the outage; it is kept across the outage until
	// Incus lists the member again.
	Maintenance bool
}

// Observation is a member's status as Incus reports it now.
type Observation struct {
	Name    string
	Status  membership.Status
	Message string // Incus's words on the status
	// Roles, FailureDomain and Groups are as Incus lists them (the raft roles among them).
	Roles         []string
	FailureDomain string
	Groups        []string
}

// Offline reports whether Incus says the member has missed its heartbeats.
func (o Observation) Offline() bool { return o.Status == membership.StatusOffline }

// Evacuated reports whether Incus says the member is evacuated (in maintenance).
func (o Observation) Evacuated() bool { return o.Status == membership.StatusEvacuated }

// Trust says whether Incus's Offline can be believed now. When Incus regains its quorum it
// lists every member Offline for some seconds, live ones included, until the heartbeats
// catch up; so after Incus could not be read (no answer, or no quorum: its member list
// needs the database), no Offline counts until it has answered for Settle.
type Trust struct {
	// AnsweringSince is the first answer after Incus last could not be read; zero when
	// the worker has not seen it fail.
	AnsweringSince time.Time
	Settle         time.Duration
}

// Settled reports whether an Offline read at now counts.
func (t Trust) Settled(now time.Time) bool {
	return t.AnsweringSince.IsZero() || now.Sub(t.AnsweringSince) >= t.Settle
}

// Track folds one observation of every member into the tracking records. It returns the
// new record of every observed member, the names of tracked members Incus no longer lists,
// and the events for outages that start or end. An outage starts when a member is first
// seen offline in a read that counts (trust), or starts again when it is seen offline
// after a gap in observation longer than maxGap (nobody looked, so nobody can say it
// stayed offline) or after Incus could not be read (its clock starts from the first
// read that counts). A member seen anything but Offline is online, settled or not.
func Track(prev map[string]Tracking, obs []Observation, now time.Time, maxGap time.Duration, trust Trust) (next []Tracking, gone []string, events []Event) {
	listed := map[string]bool{}
	settled := trust.Settled(now)
	for _, o := range obs {
		listed[o.Name] = true
		p, known := prev[o.Name]
		t := Tracking{Member: o.Name, FirstSeenOffline: p.FirstSeenOffline, LastSeenOnline: p.LastSeenOnline, LastObserved: now, Maintenance: p.Maintenance}
		gap := known && now.Sub(p.LastObserved) > maxGap
		if o.Offline() {
			switch {
			case !settled:
				// Not believed yet: no outage starts, and one seen before a gap is dropped
				// (it starts again at the first read that counts).
				if gap {
					t.FirstSeenOffline = time.Time{}
				}
			case p.FirstSeenOffline.IsZero():
				t.FirstSeenOffline = now
				events = append(events, Event{At: now, Member: o.Name, Kind: KindOffline,
					Message: fmt.Sprintf("%s is offline (Incus: %s); its outage starts now", o.Name, o.Status),
					Details: map[string]any{"status": o.Status}})
			case gap:
				t.FirstSeenOffline = now
				events = append(events, Event{At: now, Member: o.Name, Kind: KindOffline,
					Message: fmt.Sprintf("%s is offline; it was last observed %s ago, so its outage clock starts again now", o.Name, round(now.Sub(p.LastObserved))),
					Details: map[string]any{"status": o.Status, "restartedAfterGapSeconds": int64(now.Sub(p.LastObserved) / time.Second)}})
			case p.FirstSeenOffline.Before(trust.AnsweringSince):
				t.FirstSeenOffline = now
				events = append(events, Event{At: now, Member: o.Name, Kind: KindOffline,
					Message: fmt.Sprintf("%s is offline; Incus could not be read (or had no quorum) until %s, so its outage clock starts again now, %s after Incus answered again", o.Name, trust.AnsweringSince.UTC().Format(time.RFC3339), round(now.Sub(trust.AnsweringSince))),
					Details: map[string]any{"status": o.Status, "incusAnsweringSince": trust.AnsweringSince.UTC().Format(time.RFC3339Nano)}})
			}
		} else {
			if !p.FirstSeenOffline.IsZero() {
				events = append(events, Event{At: now, Member: o.Name, Kind: KindBackOnline,
					Message: fmt.Sprintf("%s is %s again after %s offline", o.Name, o.Status, round(now.Sub(p.FirstSeenOffline))),
					Details: map[string]any{"status": o.Status, "offlineForSeconds": int64(now.Sub(p.FirstSeenOffline) / time.Second)}})
			}
			t.FirstSeenOffline = time.Time{}
			t.LastSeenOnline = now
			t.Maintenance = o.Evacuated()
			if t.Maintenance && !p.Maintenance {
				// Incus keeps listing an evacuated member Evacuated even once it stops
				// answering (6.0.4: a hung one stayed Evacuated), so no outage is ever
				// seen: the worker says once per maintenance that it will not act.
				events = append(events, Event{At: now, Member: o.Name, Kind: KindRefused, Reason: ReasonMaintenance,
					Message: fmt.Sprintf("%s is in maintenance (Incus lists it %s: %s): it is never powered off while it is; restore it (restoreMember) when its maintenance is done", o.Name, o.Status, o.Message),
					Details: map[string]any{"status": o.Status}})
			}
		}
		next = append(next, t)
	}
	for name := range prev {
		if !listed[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	sort.Slice(next, func(i, j int) bool { return next[i].Member < next[j].Member })
	return next, gone, events
}

// Members turns tracking records into the policy's view of the members, with the roles,
// failure domain and groups of their observation (obs may be nil: Incus unread).
func Members(ts []Tracking, obs []Observation) []Member {
	seen := map[string]Observation{}
	for _, o := range obs {
		seen[o.Name] = o
	}
	out := make([]Member, len(ts))
	for i, t := range ts {
		o := seen[t.Member]
		out[i] = Member{Name: t.Member, Offline: !t.FirstSeenOffline.IsZero(), OfflineSince: t.FirstSeenOffline, LastSeenOnline: t.LastSeenOnline,
			Maintenance: t.Maintenance, Roles: o.Roles, FailureDomain: o.FailureDomain, Groups: o.Groups}
	}
	return out
}
