package fencing

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// Tx is the part of a database transaction that fence mappings need.
type Tx interface {
	// PutMapping inserts or replaces the member's mapping and forgets its last drill. It
	// returns the mapping it replaced, if any.
	PutMapping(ctx context.Context, m Mapping) (*Mapping, error)
	// DeleteMapping removes the cluster's member's mapping (and its drill) and returns it,
	// or nil.
	DeleteMapping(ctx context.Context, cluster int64, member string) (*Mapping, error)
}

// EventFilter selects a page of fence events, newest first.
type EventFilter struct {
	Member string
	// Cluster keeps one cluster's events when non-zero.
	Cluster int64
	Before  int64 // when non-zero, only events with a smaller id
	Limit   int
}

// Store is what the API side needs from the database.
type Store interface {
	// Change runs fn in one transaction that holds the member's lock and writes the audit
	// event of the mutation in progress.
	Change(ctx context.Context, member string, fn func(Tx) error) error
	Events(ctx context.Context, f EventFilter) ([]Event, error)
	// EventsAfter returns events (of cluster, or any for 0; of member, or any for "") with an
	// id above after, oldest first.
	EventsAfter(ctx context.Context, cluster int64, member string, after int64, limit int) ([]Event, error)
	WorkerStatus(ctx context.Context) (*WorkerStatus, error)
	// Statuses returns every mapping's status, keyed (cluster, member).
	Statuses(ctx context.Context) (map[clusters.MemberKey]Status, error)
	// ClusterStates returns the leading worker's state of every cluster it looked at.
	ClusterStates(ctx context.Context) (map[int64]ClusterState, error)
}

// Feed is where fence events are published as they are recorded, on every API replica,
// keyed by member.
type Feed = *broadcast.Hub[string, Event]

// Records reads machine records, to keep mappings consistent with them.
type Records interface {
	Record(ctx context.Context, name string) (*machines.Record, error)
}

// ClusterConfig reads the Incus server configuration (cluster-wide keys that are set).
type ClusterConfig interface {
	ServerConfig(ctx context.Context) (map[string]string, error)
}

// Service is the API side of fencing: mappings, events, progress, the cluster view.
type Service struct {
	Store   Store
	Records Records
	Feed    Feed
	// MAAS checks mappings; nil when the API has no MAAS configured.
	MAAS MachineReader
	// Incus is nil when Incus is not configured.
	Incus      ClusterConfig
	Membership membership.Source
	// Clusters lists the registered clusters: a mapping's cluster is resolved among them
	// (clusters.OfRecord). Nil: mappings are the environment's cluster's (tests).
	Clusters clusters.Lister
	Now      func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// MappingInput is what an administrator asks to map.
type MappingInput struct {
	Member string
	// Cluster names the member's cluster ("": the machine record's, else the only one).
	Cluster      string
	SystemID     string
	HardwareUUID string
}

// MappingResult is a mapping as set, and whether MAAS confirmed it.
type MappingResult struct {
	Mapping  Mapping
	Previous *Mapping
	// Verified is true when MAAS was asked and reported the hardware UUID.
	Verified bool
	// Notice tells the administrator what was and was not checked.
	Notice string
}

// NoMAASNotice says what happens to a mapping when the API cannot ask MAAS.
const NoMAASNotice = "MAAS is not configured for the API (APELORA_MAAS_URL with a read-only APELORA_MAAS_API_KEY), so this mapping was saved without asking MAAS whether the system id exists and reports this hardware UUID. apelora-worker checks it in its readiness drill before it is ever needed: watch the machine's fence.lastDrill."

// SetMapping sets (or replaces) a member's fence mapping, after checking it against the
// machine record and, when the API has MAAS, against MAAS.
func (s *Service) SetMapping(ctx context.Context, actor string, in MappingInput) (*MappingResult, error) {
	if err := ValidateMember(in.Member); err != nil {
		return nil, err
	}
	// Taken as given, never trimmed: the gate checked the cluster of the record of exactly
	// this system id (@change systemId), so the mapping must name the same one.
	systemID := in.SystemID
	if err := machines.ValidateSystemID("maasSystemId", systemID); err != nil {
		return nil, err
	}
	uuid, err := NormalizeUUID(in.HardwareUUID)
	if err != nil {
		return nil, err
	}
	var rec *machines.Record
	if s.Records != nil {
		if rec, err = s.Records.Record(ctx, in.Member); err != nil {
			return nil, err
		}
	}
	cluster, rec, err := s.cluster(in.Member, rec, in.Cluster)
	if err != nil {
		return nil, err
	}
	{
		if rec != nil && rec.MAASSystemID != "" && rec.MAASSystemID != systemID {
			return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "maasSystemId", Message: fmt.Sprintf(
				"machine %s is registered from MAAS as system id %s, not %s: map it to the machine it was registered as, or fix the registration", apperr.Quote(in.Member), apperr.Quote(rec.MAASSystemID), apperr.Quote(systemID))}
		}
		if rec != nil && rec.MAASSystemID != "" && rec.HardwareUUID == "" && s.MAAS == nil {
			// Registered before MAAS reported a UUID, and no MAAS here to check the one
			// typed: a mapping must not point at a machine nobody has identified.
			return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "hardwareUuid", Message: fmt.Sprintf(
				"machine %s has no hardware UUID yet (MAAS reports one once it has commissioned the machine, and Apelora copies it to the record): commission it (commissionMachine), then map it", apperr.Quote(in.Member))}
		}
		if rec != nil && rec.HardwareUUID != "" && !SameUUID(rec.HardwareUUID, uuid) {
			return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "hardwareUuid", Message: fmt.Sprintf(
				"machine %s was registered with hardware UUID %s, not %s: check which machine this is", apperr.Quote(in.Member), rec.HardwareUUID, uuid)}
		}
	}
	res := &MappingResult{Mapping: Mapping{Cluster: cluster.ID, Member: in.Member, SystemID: systemID, HardwareUUID: uuid, SetBy: actor,
		// The database keeps microseconds: the answer says the time as it is stored.
		SetAt: s.now().UTC().Truncate(time.Microsecond)}}
	action := audit.ActionFrom(ctx)
	if s.MAAS == nil {
		res.Notice = NoMAASNotice
	} else {
		m, err := s.MAAS.Machine(ctx, systemID)
		switch {
		case errors.Is(err, ErrMachineNotFound):
			return nil, &apperr.Error{Code: apperr.NotFound, Field: "maasSystemId", Message: fmt.Sprintf("MAAS has no machine with system id %s: copy the system id from MAAS", apperr.Quote(systemID))}
		case err != nil:
			return nil, apperr.Wrap(err, apperr.Unavailable, "MAAS could not be asked to check machine %s, so the mapping was not saved: check APELORA_MAAS_URL and that MAAS is up, then try again", systemID)
		case m.HardwareUUID == "":
			return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "hardwareUuid", Message: fmt.Sprintf("MAAS reports no hardware UUID for machine %s yet (not commissioned?): commission it (commissionMachine), then map it", systemID)}
		case !SameUUID(m.HardwareUUID, uuid):
			return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "hardwareUuid", Message: fmt.Sprintf("MAAS machine %s reports hardware UUID %s, not %s: the mapping would point at another machine; check both", systemID, strings.ToLower(m.HardwareUUID), uuid)}
		}
		res.Verified = true
		res.Notice = fmt.Sprintf("MAAS machine %s (%s, power type %q) reports hardware UUID %s.", systemID, m.Hostname, m.PowerType, uuid)
		if err := plan.Read(ctx, "MAAS machine "+systemID, fmt.Sprintf("%s, power type %q, hardware UUID %s", m.Hostname, m.PowerType, strings.ToLower(m.HardwareUUID))); err != nil {
			return nil, err
		}
		if action != nil {
			action.Detail("maasPowerType", m.PowerType)
		}
	}
	if action != nil {
		action.Detail("verifiedWithMaas", res.Verified)
		action.Detail("cluster", cluster.Name)
	}
	err = s.Store.Change(ctx, in.Member, func(tx Tx) error {
		if err := plan.Read(ctx, "cluster", cluster.Name+"; "+cluster.Fact()); err != nil {
			return err
		}
		prev, err := tx.PutMapping(ctx, res.Mapping)
		if err != nil {
			return err
		}
		if err := plan.Read(ctx, "fence mapping of "+in.Member+" in cluster "+cluster.Name+" now", prev.fact()); err != nil {
			return err
		}
		res.Previous = prev
		if prev != nil && action != nil {
			action.Detail("previous", map[string]any{"maasSystemId": prev.SystemID, "hardwareUuid": prev.HardwareUUID})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// cluster names the member's cluster by the one rule evacuations, restores and rolling
// reboots use (clusters.OfMember): a machine record's (a record naming none: the
// environment's), else the given one, else the only one; with the member's record (nil
// when the cluster given is not its record's: that cluster's member of the same name).
func (s *Service) cluster(member string, rec *machines.Record, given string) (clusters.Cluster, *machines.Record, error) {
	var all []clusters.Cluster
	if s.Clusters != nil {
		all = s.Clusters.All()
	}
	return clusters.OfMember(all, member, rec, given)
}

// RemoveMapping removes a member's fence mapping: the member is never powered off again
// until it gets a new one. A power-off already requested is still confirmed.
func (s *Service) RemoveMapping(ctx context.Context, member, clusterName string) (*Mapping, error) {
	if err := ValidateMember(member); err != nil {
		return nil, err
	}
	var rec *machines.Record
	if s.Records != nil {
		var err error
		if rec, err = s.Records.Record(ctx, member); err != nil {
			return nil, err
		}
	}
	cluster, _, err := s.cluster(member, rec, clusterName)
	if err != nil {
		return nil, err
	}
	var removed *Mapping
	err = s.Store.Change(ctx, member, func(tx Tx) error {
		if err := plan.Read(ctx, "cluster", cluster.Name+"; "+cluster.Fact()); err != nil {
			return err
		}
		m, err := tx.DeleteMapping(ctx, cluster.ID, member)
		if err != nil {
			return err
		}
		if m == nil {
			return &apperr.Error{Code: apperr.NotFound, Field: "member", Message: fmt.Sprintf("%s has no fence mapping in cluster %s", apperr.Quote(member), cluster.Name)}
		}
		if err := plan.Read(ctx, "fence mapping of "+member+" in cluster "+cluster.Name, m.fact()); err != nil {
			return err
		}
		removed = m
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("cluster", cluster.Name)
			a.Detail("removed", map[string]any{"maasSystemId": m.SystemID, "hardwareUuid": m.HardwareUUID})
		}
		return nil
	})
	return removed, err
}

// Events returns a page of fence events, newest first, with one more than asked for when
// there is a next page.
func (s *Service) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	if f.Member != "" {
		if err := ValidateMember(f.Member); err != nil {
			return nil, err
		}
	}
	return s.Store.Events(ctx, f)
}

// ParseEventID reads an event id given by a client (field names the argument).
func ParseEventID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id < 0 {
		return 0, apperr.Invalid(field, "%s is not a fence event id: pass the id of the last event you received", apperr.Quote(s))
	}
	return id, nil
}

// Progress says what a fenceProgress subscriber receives from the feed: one member's
// events (member "": every member's) of one cluster (cluster 0: every cluster's; a member
// name is unique within its cluster only), first those after the event id `after` when
// given, read from the store, then live ones, without gaps or repeats; one that falls
// behind catches up from the store. Subscribe with broadcast.Subscribe on Feed.
func (s *Service) Progress(member string, cluster int64, after *int64) (broadcast.Want[string, Event], error) {
	if member != "" {
		if err := ValidateMember(member); err != nil {
			return broadcast.Want[string, Event]{}, err
		}
	}
	var match func(Event) bool
	if cluster != 0 {
		match = func(e Event) bool { return e.Cluster == cluster }
	}
	return broadcast.Want[string, Event]{Key: member, All: member == "", After: after, Match: match,
		Replay: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			// Filtered in the store, not by Match alone: a replay page shorter than asked
			// for ends the replay.
			return s.Store.EventsAfter(ctx, cluster, member, after, limit)
		}}, nil
}

// ClusterWarning is something about the cluster an administrator should look at.
type ClusterWarning struct {
	Code    string
	Message string
}

// Cluster warning codes.
const (
	WarnHealingEnabled   = "HEALING_ENABLED"
	WarnIncusUnavailable = "INCUS_UNAVAILABLE"
	WarnNoFenceWorker    = "NO_FENCE_WORKER"
	WarnWorkerSilent     = "FENCE_WORKER_SILENT"
	WarnUnmappedMembers  = "UNMAPPED_MEMBERS"
	WarnOfflineAfter     = "OFFLINE_AFTER_TOO_SHORT"
	WarnNoQuorum         = "INCUS_NO_QUORUM"
)

// ClusterView is the cluster as fencing cares about it.
type ClusterView struct {
	// HealingThreshold and OfflineThreshold are Incus's cluster.healing_threshold and
	// cluster.offline_threshold in seconds; nil when Incus could not be asked.
	HealingThreshold *int
	OfflineThreshold *int
	// MinOfflineAfter is the least offline time before fencing the worker accepts with
	// that threshold, in seconds (MinOfflineAfter); nil when Incus could not be asked.
	MinOfflineAfter *int
	// Members and OfflineMembers are nil, and UnmappedMembers too, when Incus could not be
	// asked for its members: "unknown" is never shown as 0 (a WarnIncusUnavailable says why).
	Members         *int
	OfflineMembers  *int
	UnmappedMembers []string
	Worker          *WorkerStatus
	Warnings        []ClusterWarning
}

// environment is the cluster of APELORA_INCUS_* (the one the deprecated cluster view and
// the API's Incus and Membership ports are about).
func (s *Service) environment() (clusters.Cluster, bool) {
	if s.Clusters == nil {
		return clusters.Cluster{}, false
	}
	for _, c := range s.Clusters.All() {
		if c.FromEnvironment {
			return c, true
		}
	}
	return clusters.Cluster{}, false
}

// Cluster reads the cluster view of the environment's cluster: Incus's settings that matter to fencing, the fence worker,
// and warnings.
func (s *Service) Cluster(ctx context.Context) (*ClusterView, error) {
	v := &ClusterView{}
	ws, err := s.Store.WorkerStatus(ctx)
	if err != nil {
		return nil, err
	}
	v.Worker = ws
	now := s.now()
	switch {
	case ws == nil:
		v.Warnings = append(v.Warnings, ClusterWarning{WarnNoFenceWorker, "no apelora-worker has ever led: dead members are not fenced until one runs (with its own MAAS power key)"})
	case now.Sub(ws.LastRoundAt) > 3*ws.PollInterval+30*time.Second:
		v.Warnings = append(v.Warnings, ClusterWarning{WarnWorkerSilent, fmt.Sprintf("the fence worker %s last looked at the cluster at %s: check that an apelora-worker runs and reaches PostgreSQL, Incus and MAAS", ws.Worker, ws.LastRoundAt.UTC().Format(time.RFC3339))})
	}
	env, hasEnv := s.environment()
	var state ClusterState
	if hasEnv {
		states, err := s.Store.ClusterStates(ctx)
		if err != nil {
			return nil, err
		}
		state = states[env.ID]
	}
	if state.NoQuorumSince != nil {
		// The state the leading worker keeps (it records the loss once as a fence event):
		// first, as it explains the INCUS_UNAVAILABLE that usually follows.
		v.Warnings = append(v.Warnings, ClusterWarning{WarnNoQuorum, NoQuorumMessage(*state.NoQuorumSince) +
			" (Incus's members answer, its database does not: bring back the voters that are down; members it lists Offline count again once it has answered for the settle period)"})
	}
	if s.Incus == nil || s.Membership == nil {
		v.Warnings = append(v.Warnings, ClusterWarning{WarnIncusUnavailable, apperr.NotConfigured(apperr.Incus).Message})
		return v, nil
	}
	cfg, err := s.Incus.ServerConfig(ctx)
	if err != nil {
		v.Warnings = append(v.Warnings, ClusterWarning{WarnIncusUnavailable, problem(err)})
		return v, nil
	}
	threshold := OfflineThreshold(cfg)
	healing, offline, least := seconds(cfg["cluster.healing_threshold"], 0), int(threshold/time.Second), int(MinOfflineAfter(threshold)/time.Second)
	v.HealingThreshold, v.OfflineThreshold, v.MinOfflineAfter = &healing, &offline, &least
	if ws != nil {
		// A worker checks at start; the threshold may have been raised since.
		if err := ws.Limits.CheckOfflineThreshold(threshold); err != nil {
			v.Warnings = append(v.Warnings, ClusterWarning{WarnOfflineAfter, fmt.Sprintf("fence worker %s: %v", ws.Worker, err)})
		}
	}
	if healing != 0 {
		v.Warnings = append(v.Warnings, ClusterWarning{WarnHealingEnabled, fmt.Sprintf(
			"Incus's cluster.healing_threshold is %d s: Incus evacuates an offline member's instances after that time, before a fence is confirmed, so an instance can run twice (on the member that only looked dead and on its new host); set it to 0 and let fencing decide", healing)})
	}
	snap, err := s.Membership.Snapshot(ctx)
	if err != nil {
		v.Warnings = append(v.Warnings, ClusterWarning{WarnIncusUnavailable, problem(err)})
		return v, nil
	}
	statuses, err := s.Store.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	total, down := len(snap.Members), 0
	v.Members, v.OfflineMembers, v.UnmappedMembers = &total, &down, []string{}
	for _, m := range snap.Members {
		if m.Status == membership.StatusOffline {
			down++
		}
		if _, ok := statuses[clusters.MemberKey{Cluster: env.ID, Name: m.Name}]; !ok {
			v.UnmappedMembers = append(v.UnmappedMembers, m.Name)
		}
	}
	sort.Strings(v.UnmappedMembers)
	if len(v.UnmappedMembers) > 0 {
		v.Warnings = append(v.Warnings, ClusterWarning{WarnUnmappedMembers, fmt.Sprintf("%s %s no fence mapping: if %s, nothing powers %s off (setFenceMapping)",
			strings.Join(v.UnmappedMembers, ", "), plural(len(v.UnmappedMembers), "has", "have"), plural(len(v.UnmappedMembers), "it dies", "they die"), plural(len(v.UnmappedMembers), "it", "them"))})
	}
	return v, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func seconds(v string, def int) int {
	if v = strings.TrimSpace(v); v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}

func problem(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return "Incus could not be asked"
}

// Statuses returns every mapped member's fencing state, keyed (cluster, member).
func (s *Service) Statuses(ctx context.Context) (map[clusters.MemberKey]Status, error) {
	return s.Store.Statuses(ctx)
}

// Fencing is fencing in one cluster as the leading worker last saw it.
type Fencing struct {
	// Acting: the leading worker reads the cluster and may fence in it.
	Acting bool
	// PausedCode and PausedReason say why it does not ("" while it acts): a
	// ClusterState code, or WarnNoFenceWorker / WarnWorkerSilent / NotWatched.
	PausedCode, PausedReason string
	State                    ClusterState
	Mappings                 int
}

// NotWatched: no worker has read the cluster yet (registered since, or no worker runs).
const NotWatched = "NOT_WATCHED"

// Fencings returns fencing's state in every cluster (by id) the list names.
func (s *Service) Fencings(ctx context.Context, ids []int64) (map[int64]Fencing, error) {
	ws, err := s.Store.WorkerStatus(ctx)
	if err != nil {
		return nil, err
	}
	states, err := s.Store.ClusterStates(ctx)
	if err != nil {
		return nil, err
	}
	statuses, err := s.Store.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Fencing, len(ids))
	for _, id := range ids {
		f := Fencing{State: states[id]}
		for k := range statuses {
			if k.Cluster == id {
				f.Mappings++
			}
		}
		code, msg := f.State.Paused()
		_, watched := states[id]
		switch {
		case ws == nil:
			f.PausedCode, f.PausedReason = WarnNoFenceWorker, "no apelora-worker has ever led: dead members are not fenced until one runs (with its own MAAS power key)"
		case s.now().Sub(ws.LastRoundAt) > 3*ws.PollInterval+30*time.Second:
			f.PausedCode, f.PausedReason = WarnWorkerSilent, fmt.Sprintf("the fence worker %s last reported at %s: check that an apelora-worker runs and reaches PostgreSQL, Incus and MAAS", ws.Worker, ws.LastRoundAt.UTC().Format(time.RFC3339))
		case code != "":
			f.PausedCode, f.PausedReason = code, msg
		case !watched || f.State.LastReadAt == nil:
			f.PausedCode, f.PausedReason = NotWatched, "the fence worker has not read this cluster's members yet"
		default:
			f.Acting = true
		}
		out[id] = f
	}
	return out, nil
}
