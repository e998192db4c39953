// Package fencing powers off dead Incus members through MAAS, and only when it is safe to.
//
// A fence mapping ties a member to a MAAS system id and the hardware UUID MAAS must report
// for it. apelora-worker watches the members; a member is powered off only when it has a
// mapping, has been offline at least Limits.OfflineAfter, fewer than half of the members are
// offline (counting members whose fence was requested but not confirmed), and it was not
// powered off within Limits.Cooldown. Before any read or power command the MAAS record must
// report the mapped hardware UUID. A power-off counts only when a later live power-state
// read says off. Every decision is an Event, kept in PostgreSQL and pushed to subscribers.
//
// The rules are pure code (Decide, Track) over a Snapshot; the worker loop (Worker) reaches
// Incus, MAAS and PostgreSQL through the small interfaces declared here; the API side
// (Service) sets and removes mappings and reads events.
package fencing

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Mapping ties an Incus member to the MAAS machine that powers it.
type Mapping struct {
	// Cluster is the id of the member's Incus cluster (domain/clusters): a member name is
	// unique within its cluster only.
	Cluster      int64
	Member       string
	SystemID     string // MAAS system id
	HardwareUUID string // lower case; MAAS must report it before any read or power command
	SetBy        string
	SetAt        time.Time
}

// fact is the mapping as a plan that replaces or removes it reads it ("none" for none).
func (m *Mapping) fact() string {
	if m == nil {
		return "none"
	}
	return fmt.Sprintf("MAAS system id %s, hardware UUID %s, set by %s at %s", m.SystemID, m.HardwareUUID, m.SetBy, m.SetAt.UTC().Format(time.RFC3339Nano))
}

var (
	uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ValidateMember checks a member name (an Incus member name is a machine name).
func ValidateMember(name string) error {
	return machines.ValidateMemberName("member", "member name", name)
}

// NormalizeUUID returns a hardware UUID in the lower-case form mappings keep, or an error
// naming the field.
func NormalizeUUID(s string) (string, error) {
	u := strings.ToLower(strings.TrimSpace(s))
	if !uuidPattern.MatchString(u) {
		return "", apperr.Invalid("hardwareUuid", "hardware UUID %s is not a UUID (8-4-4-4-12 hexadecimal digits, as MAAS shows it in the machine's hardware_uuid)", apperr.Quote(s))
	}
	return u, nil
}

// SameUUID compares hardware UUIDs as MAAS and mappings may spell them.
func SameUUID(a, b string) bool {
	return a != "" && strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// Kind is what a fence event records.
type Kind string

const (
	// KindLeading: a worker became the one that acts (member is empty).
	KindLeading Kind = "LEADING"
	// KindOffline: the member was first seen offline; its outage clock starts.
	KindOffline Kind = "OFFLINE"
	// KindBackOnline: a member seen offline is no longer offline; its outage ends.
	KindBackOnline Kind = "BACK_ONLINE"
	// KindEligible: every limit allows powering the member off.
	KindEligible Kind = "ELIGIBLE"
	// KindRefused: the member is not powered off; Reason says why.
	KindRefused Kind = "REFUSED"
	// KindRequested: MAAS is about to be asked to power the member off. Recorded before
	// the request is sent, so a worker that dies after sending it leaves a trace the next
	// one finishes; the cooldown runs from here.
	KindRequested Kind = "REQUESTED"
	// KindConfirmed: a live power-state read after the request said off. Only this counts
	// as fenced.
	KindConfirmed Kind = "CONFIRMED"
	// KindNotConfirmed: the request did not lead to a confirming read; not fenced.
	KindNotConfirmed Kind = "NOT_CONFIRMED"
	// KindQuorumLost: Incus answers but its database does not (no quorum): fencing is
	// paused (member is empty). Recorded once, when the leading worker first sees it.
	KindQuorumLost Kind = "QUORUM_LOST"
	// KindQuorumBack: Incus has its quorum again (member is empty); members it lists
	// Offline count once it has answered for the settle period.
	KindQuorumBack Kind = "QUORUM_BACK"
	// KindUnreadable: the cluster's members cannot be read (member is empty): fencing in
	// that cluster alone is paused. Recorded once per outage.
	KindUnreadable Kind = "UNREADABLE"
	// KindReadable: the cluster can be read again (member is empty).
	KindReadable Kind = "READABLE"
)

// Why fencing is paused in a cluster (ClusterState.PausedReason starts with one).
const (
	PausedIncusUnavailable = "INCUS_UNAVAILABLE"
	PausedNoQuorum         = "INCUS_NO_QUORUM"
	PausedOfflineAfter     = "OFFLINE_AFTER_TOO_SHORT"
)

// ClusterState is the leading worker's state of one cluster, kept in PostgreSQL
// (fence_clusters) for the cluster view and the next leader.
type ClusterState struct {
	Cluster         int64
	LastReadAt      *time.Time // its members last read
	UnreadableSince *time.Time // nil while it can be read
	AnsweringSince  *time.Time // the first answer after it could not be read (settle)
	NoQuorumSince   *time.Time // nil while Incus has its quorum
	// PausedReason is "" while fencing acts in the cluster, else a code
	// (PausedIncusUnavailable, PausedNoQuorum, PausedOfflineAfter), ": ", and why.
	PausedReason string
}

// Paused splits PausedReason into its code and message ("" and "" while fencing acts).
func (s ClusterState) Paused() (code, message string) {
	if s.PausedReason == "" {
		return "", ""
	}
	code, message, _ = strings.Cut(s.PausedReason, ": ")
	return code, message
}

// Kinds lists every kind, for the database constraint's test and the API.
var Kinds = []Kind{KindLeading, KindOffline, KindBackOnline, KindEligible, KindRefused, KindRequested, KindConfirmed, KindNotConfirmed,
	KindQuorumLost, KindQuorumBack, KindUnreadable, KindReadable}

// ErrNoQuorum matches (errors.Is) a member read that failed because Incus answers but its
// database does not: on 6.0.4, with two of three voters down, the member list answered 500
// "context deadline exceeded" after 5 s while GET /1.0 answered at once (seen live).
var ErrNoQuorum = errors.New("Incus has no quorum: its members answer, its database does not")

// NoQuorumMessage is the one wording of the state, for events, the cluster view and logs.
func NoQuorumMessage(since time.Time) string {
	return fmt.Sprintf("Incus has no quorum since %s: fencing paused", since.UTC().Format(time.RFC3339))
}

// Reason says why a member was refused or not confirmed.
type Reason string

const (
	ReasonNone Reason = ""
	// Refusals by the limits.
	ReasonNotMapped      Reason = "NOT_MAPPED"
	ReasonTooManyOffline Reason = "TOO_MANY_OFFLINE"
	ReasonCooldown       Reason = "COOLDOWN"
	// ReasonQuorum: Incus's database would be left without a majority of its voters or
	// without a member (package quorum).
	ReasonQuorum Reason = "QUORUM"
	// ReasonMaintenance: the member is evacuated (in maintenance): never powered off.
	ReasonMaintenance Reason = "MAINTENANCE"
	// Refusals (and non-confirmations) by what MAAS says.
	ReasonUUIDMismatch    Reason = "UUID_MISMATCH"
	ReasonMachineNotFound Reason = "MAAS_MACHINE_NOT_FOUND"
	ReasonMAASUnavailable Reason = "MAAS_UNAVAILABLE"
	// Non-confirmations.
	ReasonPowerNotQueryable Reason = "POWER_NOT_QUERYABLE"
	ReasonPowerOffNotSent   Reason = "POWER_OFF_NOT_SENT"
	ReasonPowerOffRefused   Reason = "POWER_OFF_REFUSED"
	ReasonPowerNotOff       Reason = "POWER_NOT_OFF"
)

// Reasons lists every reason.
var Reasons = []Reason{ReasonNotMapped, ReasonTooManyOffline, ReasonCooldown, ReasonQuorum, ReasonMaintenance, ReasonUUIDMismatch, ReasonMachineNotFound,
	ReasonMAASUnavailable, ReasonPowerNotQueryable, ReasonPowerOffNotSent, ReasonPowerOffRefused, ReasonPowerNotOff}

// Event is one fence event. Events are append-only.
type Event struct {
	ID      int64
	At      time.Time
	Member  string // "" for KindLeading
	Kind    Kind
	Reason  Reason
	Message string
	Worker  string         // the worker that recorded it
	Details map[string]any // secret-free facts: counts, system id, power state, MAAS's answer
	// Cluster is the id of the Incus cluster it is about (domain/clusters); 0 for
	// KindLeading.
	Cluster int64
}

// Request is the latest power-off request for a member and what became of it.
type Request struct {
	EventID      int64
	At           time.Time
	SystemID     string // as mapped when requested: confirmation reads this machine
	HardwareUUID string
	// Outcome is "" while the request is neither confirmed nor reported not confirmed,
	// else KindConfirmed or KindNotConfirmed.
	Outcome   Kind
	OutcomeAt time.Time
}

// Pending reports whether the request still waits for its confirming read.
func (r Request) Pending() bool { return r.Outcome == "" }

// Limits are the safety limits and timings of fencing.
type Limits struct {
	// OfflineAfter: how long a member must have been seen offline before it is powered off.
	OfflineAfter time.Duration
	// Cooldown: no second power-off request for a member within this time of the last.
	Cooldown time.Duration
	// ConfirmTimeout: how long after a request a confirming read may come before the
	// fence is reported not confirmed.
	ConfirmTimeout time.Duration
	// MaxObservationGap: an outage counts as continuous only while the worker looked at
	// least this often; after a longer gap (every worker down) its clock starts again, so a
	// restart never invents an outage.
	MaxObservationGap time.Duration
	// Settle: after Incus could not be read (or had no quorum), how long it must have
	// answered before a member it lists Offline counts (Trust). Zero: at once.
	Settle time.Duration
}

// Validate checks the limits make sense together.
func (l Limits) Validate() error {
	switch {
	case l.OfflineAfter <= 0:
		return fmt.Errorf("the offline time before fencing must be positive, not %v", l.OfflineAfter)
	case l.Cooldown <= 0:
		return fmt.Errorf("the fence cooldown must be positive, not %v", l.Cooldown)
	case l.ConfirmTimeout <= 0:
		return fmt.Errorf("the confirmation timeout must be positive, not %v", l.ConfirmTimeout)
	case l.Cooldown < l.ConfirmTimeout:
		return fmt.Errorf("the fence cooldown (%v) must be at least the confirmation timeout (%v): otherwise a second power-off could be sent while the first is still being confirmed", l.Cooldown, l.ConfirmTimeout)
	case l.MaxObservationGap <= 0:
		return fmt.Errorf("the observation gap must be positive, not %v", l.MaxObservationGap)
	case l.Settle < 0:
		return fmt.Errorf("the settle period must not be negative, not %v", l.Settle)
	}
	return nil
}

// Incus calls a member Offline once it has missed heartbeats for cluster.offline_threshold
// (20 s unless set). A live member's heartbeat lands within that time, so a wrong Offline
// (Incus regaining quorum lists every member Offline for a few seconds) never lasts longer:
// the worker refuses to start with an OfflineAfter shorter than the threshold plus
// OfflineMargin, and the cluster view warns when the leading worker's is.
const (
	DefaultOfflineThreshold = 20 * time.Second
	OfflineMargin           = 5 * time.Second
)

// OfflineThreshold reads Incus's cluster.offline_threshold from its server configuration
// (GET /1.0 config: only keys that are set), or its default.
func OfflineThreshold(cfg map[string]string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(cfg["cluster.offline_threshold"])); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return DefaultOfflineThreshold
}

// MinOfflineAfter is the least OfflineAfter that Incus's offline threshold allows.
func MinOfflineAfter(threshold time.Duration) time.Duration { return threshold + OfflineMargin }

// CheckOfflineThreshold refuses an OfflineAfter that a wrong Offline from Incus could outlast.
func (l Limits) CheckOfflineThreshold(threshold time.Duration) error {
	if least := MinOfflineAfter(threshold); l.OfflineAfter < least {
		return fmt.Errorf("the offline time before fencing (%v) must be at least Incus's cluster.offline_threshold (%v) plus %v, so %v: for a shorter time Incus can list a live member Offline (it does so for a few seconds after regaining quorum) and it would be powered off; raise APELORA_FENCE_OFFLINE_AFTER, or lower cluster.offline_threshold in Incus",
			l.OfflineAfter, threshold, OfflineMargin, least)
	}
	return nil
}

// Drill is the result of the readiness drill for one mapped member: the read-only part of a
// fence (hardware UUID check and a live power-state read).
type Drill struct {
	Cluster      int64
	Member       string
	At           time.Time
	SystemID     string
	HardwareUUID string
	OK           bool
	PowerState   string // "" when it could not be read
	Problem      string // what is wrong, for the administrator; "" when OK
	Worker       string
}

// WorkerStatus is what the leading worker reports each round.
type WorkerStatus struct {
	Worker       string
	LeaderSince  time.Time
	LastRoundAt  time.Time
	PollInterval time.Duration
	Limits       Limits
	// NoQuorumSince is what a worker of the release before clusters reported (the one
	// cluster's quorum loss); the worker keeps it per cluster now (ClusterState) and
	// reports nil here.
	NoQuorumSince *time.Time
}

// Status is a member's fencing state as the fleet view shows it.
type Status struct {
	Mapping      Mapping
	Drill        *Drill     // nil until drilled (or since the mapping changed)
	OfflineSince *time.Time // first seen offline in the current outage, nil when not offline
	LastEvent    *Event
}
