package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/fencing"
)

// leaderStatementTimeout bounds each statement made under a leader lease, so a database
// that stopped answering is noticed and the worker stops acting. A statement never runs
// past the lease's end either (leaderLease.use).
const leaderStatementTimeout = 15 * time.Second

// FenceLeadership hands out the fence worker's lease (role "fence", see lease.go), held on
// a connection of its own. A worker that dies, or whose connection breaks (PostgreSQL
// restarted, failed over, network cut), stops renewing it, and a standby takes it over
// with a higher epoch once it has expired.
//
// A standby keeps its connection between attempts; TryLead is not safe for concurrent use.
func (s *Store) FenceLeadership(holder string, length time.Duration) fencing.Leadership {
	return &fenceLeadership{candidate: candidate{s: s, role: roleFence, holder: holder, ttl: length}}
}

type fenceLeadership struct{ candidate }

func (l *fenceLeadership) TryLead(ctx context.Context) (fencing.Lease, error) {
	lease, err := l.take(ctx)
	if err != nil || lease == nil {
		return nil, err
	}
	return &fenceLease{lease}, nil
}

// sessionConn opens a long-lived connection of its own (a leader's, the listener's), from
// the pool's configuration: a multi-host URL's other hosts and target_session_attrs
// included, so after a failover it reaches the new primary.
func (s *Store) sessionConn(ctx context.Context, application string) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	if application != "" {
		cfg.RuntimeParams["application_name"] = application
	}
	// When either end vanishes (the worker's host, or a PostgreSQL primary in a failover),
	// the other must notice within seconds, not the default two hours: server-side
	// keepalives for TCP connections (ignored on unix sockets, where a dead process closes
	// its socket), and client-side ones, so a listener blocked waiting for a notification
	// on a dead primary's connection reconnects.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}}
	cfg.DialFunc = d.DialContext
	cctx, cancel := context.WithTimeout(ctx, leaderStatementTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", describe(cfg), err)
	}
	return conn, nil
}

// fenceLease is the fence lease (role "fence") and what the worker does under it. The
// worker's loop uses it, and leader.Run renews the lease on it meanwhile (leaderLease
// serialises them).
type fenceLease struct {
	*leaderLease
}

func (f *fenceLease) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer cancel()
	var t time.Time
	err = f.conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, dbError(err)
}

func (f *fenceLease) Tracking(ctx context.Context, cluster int64) (map[string]fencing.Tracking, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := f.conn.Query(ctx, `SELECT member, first_seen_offline, last_seen_online, last_observed, maintenance FROM fence_member_tracking WHERE cluster_id = $1`, cluster)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[string]fencing.Tracking{}
	for rows.Next() {
		var t fencing.Tracking
		var off, on *time.Time
		if err := rows.Scan(&t.Member, &off, &on, &t.LastObserved, &t.Maintenance); err != nil {
			return nil, dbError(err)
		}
		if off != nil {
			t.FirstSeenOffline = *off
		}
		if on != nil {
			t.LastSeenOnline = *on
		}
		out[t.Member] = t
	}
	return out, dbError(rows.Err())
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// SaveTracking writes in one transaction that checks the lease's epoch first.
// Only the cluster's own tracking is written and forgotten: gone names members of that
// cluster, and the same name in another cluster is another member.
func (f *fenceLease) SaveTracking(ctx context.Context, cluster int64, next []fencing.Tracking, gone []string, events []fencing.Event) ([]fencing.Event, error) {
	out := make([]fencing.Event, len(events))
	err := f.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, t := range next {
			if _, err := tx.Exec(ctx, `INSERT INTO fence_member_tracking (cluster_id, member, first_seen_offline, last_seen_online, last_observed, maintenance)
			VALUES ($6, $1, $2, $3, $4, $5) ON CONFLICT (cluster_id, member) DO UPDATE SET first_seen_offline = EXCLUDED.first_seen_offline,
			last_seen_online = EXCLUDED.last_seen_online, last_observed = EXCLUDED.last_observed, maintenance = EXCLUDED.maintenance`,
				t.Member, nullTime(t.FirstSeenOffline), nullTime(t.LastSeenOnline), t.LastObserved, t.Maintenance, cluster); err != nil {
				return dbError(err)
			}
		}
		if len(gone) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM fence_member_tracking WHERE cluster_id = $1 AND member = ANY($2)`, cluster, gone); err != nil {
				return dbError(err)
			}
		}
		for i, e := range events {
			var err error
			if out[i], err = insertFenceEvent(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertFenceEvent writes one event. Fence events have one writer at a time, the leading
// worker, on its lease's connection (a transaction at a time, each checking the epoch, and
// a take-over waits for the old epoch's last write), so ids become visible in id order, as
// the fence feed and fenceProgress's replay need.
func insertFenceEvent(ctx context.Context, q querier, e fencing.Event) (fencing.Event, error) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	err := q.QueryRow(ctx, `INSERT INTO fence_events (at, member, kind, reason, message, worker, details, cluster_id)
		VALUES ($1, nullif($2, ''), $3, nullif($4, ''), $5, $6, $7, nullif($8::bigint, 0)) RETURNING id, coalesce(cluster_id, 0)`,
		e.At, e.Member, string(e.Kind), string(e.Reason), e.Message, e.Worker, e.Details, e.Cluster).Scan(&e.ID, &e.Cluster)
	if err != nil {
		return e, dbError(err)
	}
	return e, nil
}

func (f *fenceLease) Mappings(ctx context.Context, cluster int64) (map[string]fencing.Mapping, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return clusterMappings(ctx, f.conn, cluster)
}

// Requests derives each member's latest request, and what became of it, from the events.
func (f *fenceLease) Requests(ctx context.Context, cluster int64) (map[string]fencing.Request, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := f.conn.Query(ctx, `SELECT r.member, r.id, r.at, coalesce(r.details->>'maasSystemId', ''), coalesce(r.details->>'hardwareUuid', ''),
			coalesce(o.kind, ''), o.at
		FROM (SELECT DISTINCT ON (member) member, id, at, details FROM fence_events WHERE cluster_id = $1 AND kind = 'REQUESTED' ORDER BY member, id DESC) r
		LEFT JOIN LATERAL (SELECT kind, at FROM fence_events o WHERE o.cluster_id = $1 AND o.member = r.member AND o.id > r.id
			AND o.kind IN ('CONFIRMED', 'NOT_CONFIRMED') ORDER BY o.id LIMIT 1) o ON true`, cluster)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[string]fencing.Request{}
	for rows.Next() {
		var member, outcome string
		var r fencing.Request
		var outAt *time.Time
		if err := rows.Scan(&member, &r.EventID, &r.At, &r.SystemID, &r.HardwareUUID, &outcome, &outAt); err != nil {
			return nil, dbError(err)
		}
		r.Outcome = fencing.Kind(outcome)
		if outAt != nil {
			r.OutcomeAt = *outAt
		}
		out[member] = r
	}
	return out, dbError(rows.Err())
}

func (f *fenceLease) LatestEvents(ctx context.Context, cluster int64) (map[string]fencing.Event, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// One index lookup per member the worker tracks (the members it decides on), instead of
	// reading the whole trail.
	evs, err := collectEvents(f.conn.Query(ctx, `SELECT e.id, e.at, coalesce(e.member, ''), e.kind, coalesce(e.reason, ''), e.message, e.worker, e.details, coalesce(e.cluster_id, 0)
		FROM fence_member_tracking t
		CROSS JOIN LATERAL (SELECT * FROM fence_events WHERE cluster_id = t.cluster_id AND member = t.member ORDER BY id DESC LIMIT 1) e
		WHERE t.cluster_id = $1`, cluster))
	if err != nil {
		return nil, err
	}
	out := make(map[string]fencing.Event, len(evs))
	for _, e := range evs {
		out[e.Member] = e
	}
	return out, nil
}

// Append records an event in a transaction that checks the lease's epoch first: if it
// succeeds, this worker led when it was written; a REQUESTED that is refused here is
// never sent.
func (f *fenceLease) Append(ctx context.Context, e fencing.Event) (fencing.Event, error) {
	err := f.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		e, err = insertFenceEvent(ctx, tx, e)
		return err
	})
	return e, err
}

func (f *fenceLease) Heartbeat(ctx context.Context, ws fencing.WorkerStatus) error {
	settings := map[string]any{
		"pollSeconds": ws.PollInterval.Seconds(), "offlineAfterSeconds": ws.Limits.OfflineAfter.Seconds(),
		"cooldownSeconds": ws.Limits.Cooldown.Seconds(), "confirmTimeoutSeconds": ws.Limits.ConfirmTimeout.Seconds(),
		"maxGapSeconds": ws.Limits.MaxObservationGap.Seconds(), "settleSeconds": ws.Limits.Settle.Seconds(),
	}
	return f.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO fence_worker (singleton, worker, leader_since, last_round_at, settings, no_quorum_since) VALUES (true, $1, $2, $3, $4, $5)
		ON CONFLICT (singleton) DO UPDATE SET worker = EXCLUDED.worker, leader_since = EXCLUDED.leader_since,
			last_round_at = EXCLUDED.last_round_at, settings = EXCLUDED.settings, no_quorum_since = EXCLUDED.no_quorum_since`,
			ws.Worker, ws.LeaderSince, ws.LastRoundAt, settings, ws.NoQuorumSince)
		return dbError(err)
	})
}

// ClusterState is the state the worker last saved for the cluster (zero: none).
func (f *fenceLease) ClusterState(ctx context.Context, cluster int64) (fencing.ClusterState, error) {
	ctx, cancel, err := f.use(ctx)
	if err != nil {
		return fencing.ClusterState{}, err
	}
	defer cancel()
	c, err := scanClusterState(f.conn.QueryRow(ctx, `SELECT `+clusterStateColumns+` FROM fence_clusters WHERE cluster_id = $1`, cluster))
	if errors.Is(err, pgx.ErrNoRows) {
		return fencing.ClusterState{Cluster: cluster}, nil
	}
	return c, dbError(err)
}

// SaveClusterState writes the cluster's state under the lease; a cluster removed since
// (its row gone) is skipped.
func (f *fenceLease) SaveClusterState(ctx context.Context, c fencing.ClusterState) error {
	return f.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO fence_clusters (cluster_id, last_read_at, unreadable_since, answering_since, no_quorum_since, paused_reason)
			SELECT $1, $2, $3, $4, $5, nullif($6, '') WHERE EXISTS (SELECT 1 FROM clusters WHERE id = $1)
			ON CONFLICT (cluster_id) DO UPDATE SET last_read_at = EXCLUDED.last_read_at, unreadable_since = EXCLUDED.unreadable_since,
				answering_since = EXCLUDED.answering_since, no_quorum_since = EXCLUDED.no_quorum_since, paused_reason = EXCLUDED.paused_reason`,
			c.Cluster, c.LastReadAt, c.UnreadableSince, c.AnsweringSince, c.NoQuorumSince, c.PausedReason)
		return dbError(err)
	})
}
