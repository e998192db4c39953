package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/internal/apperr"
)

// Fences is the API side's view of fencing in the store: mappings (changed in audited
// transactions), events, drills and the worker's last report.
func (s *Store) Fences() fencing.Store { return fenceStore{s} }

type fenceStore struct{ s *Store }

type fenceTx struct{ tx pgx.Tx }

var _ fencing.Store = fenceStore{}

func (f fenceStore) Change(ctx context.Context, member string, fn func(fencing.Tx) error) error {
	return f.s.change(ctx, member, func(_ context.Context, tx pgx.Tx) error { return fn(fenceTx{tx}) })
}

// querier is what both a pool and a single connection offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const mappingColumns = `cluster_id, member, maas_system_id, hardware_uuid, set_by, set_at`

func scanMapping(row pgx.Row) (fencing.Mapping, error) {
	var m fencing.Mapping
	err := row.Scan(&m.Cluster, &m.Member, &m.SystemID, &m.HardwareUUID, &m.SetBy, &m.SetAt)
	return m, err
}

func (t fenceTx) PutMapping(ctx context.Context, m fencing.Mapping) (*fencing.Mapping, error) {
	if m.Cluster == 0 {
		return nil, errors.New("a fence mapping names its cluster")
	}
	prev, err := scanMapping(t.tx.QueryRow(ctx, `SELECT `+mappingColumns+` FROM fence_mappings WHERE cluster_id = $1 AND member = $2 FOR UPDATE`, m.Cluster, m.Member))
	var had *fencing.Mapping
	switch {
	case err == nil:
		had = &prev
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, dbError(err)
	}
	// Another member already fenced by this machine? Asked first, so the error can name it
	// (after a failed statement the transaction can no longer be read from); the unique
	// constraints still hold against a concurrent change.
	var other, otherSystem, otherUUID string
	err = t.tx.QueryRow(ctx, `SELECT f.member || CASE WHEN f.cluster_id = $4 THEN '' ELSE ' of cluster ' || c.name END, f.maas_system_id, f.hardware_uuid
		FROM fence_mappings f JOIN clusters c ON c.id = f.cluster_id
		WHERE (f.cluster_id, f.member) <> ($4, $1) AND (f.maas_system_id = $2 OR f.hardware_uuid = $3) LIMIT 1`, m.Member, m.SystemID, m.HardwareUUID, m.Cluster).Scan(&other, &otherSystem, &otherUUID)
	switch {
	case err == nil && otherSystem == m.SystemID:
		return nil, &apperr.Error{Code: apperr.AlreadyExists, Field: "maasSystemId", Message: fmt.Sprintf(
			"MAAS machine %s already fences member %q: one machine powers one member; remove that mapping first if it was wrong", m.SystemID, other)}
	case err == nil:
		return nil, &apperr.Error{Code: apperr.AlreadyExists, Field: "hardwareUuid", Message: fmt.Sprintf(
			"hardware UUID %s is already mapped to member %q: one machine powers one member; remove that mapping first if it was wrong", m.HardwareUUID, other)}
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, dbError(err)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO fence_mappings (`+mappingColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (cluster_id, member) DO UPDATE SET maas_system_id = EXCLUDED.maas_system_id, hardware_uuid = EXCLUDED.hardware_uuid,
			set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at`,
		m.Cluster, m.Member, m.SystemID, m.HardwareUUID, m.SetBy, m.SetAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil, apperr.Wrap(err, apperr.Busy, "another change mapped the same MAAS machine at the same time: read the mappings again and retry")
	}
	if err != nil {
		return nil, dbError(err)
	}
	if had != nil && (had.SystemID != m.SystemID || had.HardwareUUID != m.HardwareUUID) {
		// The last drill was of another machine: drill the new one before trusting it.
		if _, err := t.tx.Exec(ctx, `DELETE FROM fence_drills WHERE cluster_id = $1 AND member = $2`, m.Cluster, m.Member); err != nil {
			return nil, dbError(err)
		}
	}
	return had, nil
}

func (t fenceTx) DeleteMapping(ctx context.Context, cluster int64, member string) (*fencing.Mapping, error) {
	del := `DELETE FROM fence_mappings WHERE cluster_id = $1 AND member = $2 RETURNING ` + mappingColumns
	if planned(t.tx) {
		// In a dry run the DELETE is a call of the plan, not sent: answer the mapping it would delete.
		_, _ = t.tx.Exec(ctx, `DELETE FROM fence_mappings WHERE cluster_id = $1 AND member = $2`, cluster, member)
		del = `SELECT ` + mappingColumns + ` FROM fence_mappings WHERE cluster_id = $1 AND member = $2`
	}
	m, err := scanMapping(t.tx.QueryRow(ctx, del, cluster, member))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &m, nil
}

// mappings reads one cluster's mappings (cluster 0: every cluster's, the drill's).
func mappings(ctx context.Context, q querier, cluster int64) ([]fencing.Mapping, error) {
	rows, err := q.Query(ctx, `SELECT `+mappingColumns+` FROM fence_mappings WHERE $1 = 0 OR cluster_id = $1 ORDER BY cluster_id, member`, cluster)
	if err != nil {
		return nil, dbError(err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.Mapping, error) { return scanMapping(r) })
	return ms, dbError(err)
}

// clusterMappings reads one cluster's mappings keyed by member.
func clusterMappings(ctx context.Context, q querier, cluster int64) (map[string]fencing.Mapping, error) {
	ms, err := mappings(ctx, q, cluster)
	if err != nil {
		return nil, err
	}
	out := make(map[string]fencing.Mapping, len(ms))
	for _, m := range ms {
		out[m.Member] = m
	}
	return out, nil
}

const eventColumns = `id, at, coalesce(member, ''), kind, coalesce(reason, ''), message, worker, details, coalesce(cluster_id, 0)`

func scanEvent(row pgx.Row) (fencing.Event, error) {
	var e fencing.Event
	var kind, reason string
	err := row.Scan(&e.ID, &e.At, &e.Member, &kind, &reason, &e.Message, &e.Worker, &e.Details, &e.Cluster)
	e.Kind, e.Reason = fencing.Kind(kind), fencing.Reason(reason)
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	return e, err
}

func collectEvents(rows pgx.Rows, err error) ([]fencing.Event, error) {
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.Event, error) { return scanEvent(r) })
	return out, dbError(err)
}

func (f fenceStore) Events(ctx context.Context, flt fencing.EventFilter) ([]fencing.Event, error) {
	return collectEvents(f.s.pool.Query(ctx, `SELECT `+eventColumns+` FROM fence_events
		WHERE ($1 = '' OR member = $1) AND ($2 = 0 OR id < $2) AND ($4 = 0 OR cluster_id = $4) ORDER BY id DESC LIMIT $3`, flt.Member, flt.Before, flt.Limit, flt.Cluster))
}

func (f fenceStore) EventsAfter(ctx context.Context, cluster int64, member string, after int64, limit int) ([]fencing.Event, error) {
	return collectEvents(f.s.pool.Query(ctx, `SELECT `+eventColumns+` FROM fence_events
		WHERE ($1 = '' OR member = $1) AND ($4 = 0 OR cluster_id = $4) AND id > $2 ORDER BY id LIMIT $3`, member, after, limit, cluster))
}

// FenceEvent returns one event, or nil.
func (s *Store) FenceEvent(ctx context.Context, id int64) (*fencing.Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventColumns+` FROM fence_events WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &e, nil
}

func (f fenceStore) WorkerStatus(ctx context.Context) (*fencing.WorkerStatus, error) {
	var ws fencing.WorkerStatus
	var settings struct {
		PollSeconds, OfflineAfterSeconds, CooldownSeconds, ConfirmTimeoutSeconds, MaxGapSeconds, SettleSeconds float64
	}
	err := f.s.pool.QueryRow(ctx, `SELECT worker, leader_since, last_round_at, settings, no_quorum_since FROM fence_worker`).
		Scan(&ws.Worker, &ws.LeaderSince, &ws.LastRoundAt, &settings, &ws.NoQuorumSince)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	ws.PollInterval = sec(settings.PollSeconds)
	ws.Limits = fencing.Limits{OfflineAfter: sec(settings.OfflineAfterSeconds), Cooldown: sec(settings.CooldownSeconds),
		ConfirmTimeout: sec(settings.ConfirmTimeoutSeconds), MaxObservationGap: sec(settings.MaxGapSeconds),
		Settle: sec(settings.SettleSeconds)}
	return &ws, nil
}

// Statuses reads every mapping with its last drill (when it was of this mapping), the
// member's current outage and its latest event: one query, whatever the fleet's size.
func (f fenceStore) Statuses(ctx context.Context) (map[clusters.MemberKey]fencing.Status, error) {
	rows, err := f.s.pool.Query(ctx, `SELECT m.cluster_id, m.member, m.maas_system_id, m.hardware_uuid, m.set_by, m.set_at,
			d.at, coalesce(d.ok, false), coalesce(d.power_state, ''), coalesce(d.problem, ''), coalesce(d.worker, ''),
			t.first_seen_offline,
			e.id, e.at, coalesce(e.kind, ''), coalesce(e.reason, ''), coalesce(e.message, ''), coalesce(e.worker, ''), e.details
		FROM fence_mappings m
		LEFT JOIN fence_drills d ON d.cluster_id = m.cluster_id AND d.member = m.member AND d.maas_system_id = m.maas_system_id AND d.hardware_uuid = m.hardware_uuid
		LEFT JOIN fence_member_tracking t ON t.cluster_id = m.cluster_id AND t.member = m.member
		LEFT JOIN LATERAL (SELECT * FROM fence_events e WHERE e.cluster_id = m.cluster_id AND e.member = m.member ORDER BY e.id DESC LIMIT 1) e ON true`)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[clusters.MemberKey]fencing.Status{}
	for rows.Next() {
		var st fencing.Status
		mp := &st.Mapping
		var drillAt, offline, eventAt *time.Time
		var eventID *int64
		var d fencing.Drill
		var e fencing.Event
		var kind, reason string
		if err := rows.Scan(&mp.Cluster, &mp.Member, &mp.SystemID, &mp.HardwareUUID, &mp.SetBy, &mp.SetAt,
			&drillAt, &d.OK, &d.PowerState, &d.Problem, &d.Worker, &offline,
			&eventID, &eventAt, &kind, &reason, &e.Message, &e.Worker, &e.Details); err != nil {
			return nil, dbError(err)
		}
		if drillAt != nil {
			d.Cluster, d.Member, d.At, d.SystemID, d.HardwareUUID = mp.Cluster, mp.Member, *drillAt, mp.SystemID, mp.HardwareUUID
			st.Drill = &d
		}
		st.OfflineSince = offline
		if eventID != nil {
			e.ID, e.At, e.Cluster, e.Member, e.Kind, e.Reason = *eventID, *eventAt, mp.Cluster, mp.Member, fencing.Kind(kind), fencing.Reason(reason)
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			st.LastEvent = &e
		}
		out[clusters.MemberKey{Cluster: mp.Cluster, Name: mp.Member}] = st
	}
	return out, dbError(rows.Err())
}

// The drill store: the readiness drill changes nothing, so it needs no lock and uses the
// pool.

// FenceDrills is the store the readiness drill reads mappings from and writes results to.
func (s *Store) FenceDrills() fencing.DrillStore { return drillStore{s} }

type drillStore struct{ s *Store }

func (d drillStore) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, dbError(err)
}

func (d drillStore) Mappings(ctx context.Context) ([]fencing.Mapping, error) {
	return mappings(ctx, d.s.pool, 0)
}

func (d drillStore) Drills(ctx context.Context) (map[clusters.MemberKey]fencing.Drill, error) {
	rows, err := d.s.pool.Query(ctx, `SELECT cluster_id, member, at, maas_system_id, hardware_uuid, ok, coalesce(power_state, ''), problem, worker FROM fence_drills`)
	if err != nil {
		return nil, dbError(err)
	}
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.Drill, error) {
		var x fencing.Drill
		err := r.Scan(&x.Cluster, &x.Member, &x.At, &x.SystemID, &x.HardwareUUID, &x.OK, &x.PowerState, &x.Problem, &x.Worker)
		return x, err
	})
	if err != nil {
		return nil, dbError(err)
	}
	out := make(map[clusters.MemberKey]fencing.Drill, len(ds))
	for _, x := range ds {
		out[clusters.MemberKey{Cluster: x.Cluster, Name: x.Member}] = x
	}
	return out, nil
}

// SaveDrill keeps the result only while the member is still mapped to the machine drilled.
func (d drillStore) SaveDrill(ctx context.Context, x fencing.Drill) error {
	_, err := d.s.pool.Exec(ctx, `INSERT INTO fence_drills (cluster_id, member, at, maas_system_id, hardware_uuid, ok, power_state, problem, worker)
		SELECT $9, $1, $2, $3, $4, $5, nullif($6, ''), $7, $8
		WHERE EXISTS (SELECT 1 FROM fence_mappings WHERE cluster_id = $9 AND member = $1 AND maas_system_id = $3 AND hardware_uuid = $4)
		ON CONFLICT (cluster_id, member) DO UPDATE SET at = EXCLUDED.at, maas_system_id = EXCLUDED.maas_system_id,
			hardware_uuid = EXCLUDED.hardware_uuid, ok = EXCLUDED.ok, power_state = EXCLUDED.power_state,
			problem = EXCLUDED.problem, worker = EXCLUDED.worker`,
		x.Member, x.At, x.SystemID, x.HardwareUUID, x.OK, x.PowerState, x.Problem, x.Worker, x.Cluster)
	return dbError(err)
}

// ClusterStates reads the leading worker's state of every cluster it has looked at.
func (f fenceStore) ClusterStates(ctx context.Context) (map[int64]fencing.ClusterState, error) {
	rows, err := f.s.pool.Query(ctx, `SELECT `+clusterStateColumns+` FROM fence_clusters`)
	if err != nil {
		return nil, dbError(err)
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.ClusterState, error) { return scanClusterState(r) })
	if err != nil {
		return nil, dbError(err)
	}
	out := make(map[int64]fencing.ClusterState, len(cs))
	for _, c := range cs {
		out[c.Cluster] = c
	}
	return out, nil
}

const clusterStateColumns = `cluster_id, last_read_at, unreadable_since, answering_since, no_quorum_since, coalesce(paused_reason, '')`

func scanClusterState(row pgx.Row) (fencing.ClusterState, error) {
	var c fencing.ClusterState
	err := row.Scan(&c.Cluster, &c.LastReadAt, &c.UnreadableSince, &c.AnsweringSince, &c.NoQuorumSince, &c.PausedReason)
	return c, err
}
