package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/fencing"
)

// fenceLockNamespace keeps the fence worker's lock apart from the machine locks (which
// use lockNamespace with a hash of the machine's name as the second key).
const (
	fenceLockNamespace = lockNamespace + 1
	fenceLockKey       = 1
)

// leaderConnTimeout bounds each statement of a leader connection, so a database that stopped
// answering is noticed and the worker stops acting.
const leaderConnTimeout = 15 * time.Second

// FenceLeadership hands out the fence worker's lock: a session-level advisory lock held on
// a connection of its own, so that it lasts exactly as long as that connection. A worker
// that dies, or whose connection breaks (PostgreSQL restarted, network cut), loses it, and
// a standby takes it.
//
// A standby keeps its connection between attempts; TryLead is not safe for concurrent use.
func (s *Store) FenceLeadership(application string) fencing.Leadership {
	return &fenceLeadership{s: s, application: application}
}

type fenceLeadership struct {
	s           *Store
	application string
	conn        *pgx.Conn // a standby's connection, kept for the next attempt
}

func (l *fenceLeadership) TryLead(ctx context.Context) (fencing.LeaderConn, error) {
	conn, got, err := l.s.tryLock(ctx, l.conn, l.application, fenceLockNamespace, fenceLockKey)
	l.conn = nil
	if err != nil || !got {
		l.conn = conn
		return nil, err
	}
	return &fenceLeaderConn{conn: conn}, nil
}

// tryLock tries for a session-level advisory lock on conn, connecting first when conn is
// nil or closed. It returns the connection to keep (the lock's, or a standby's for the
// next attempt; nil after an error).
func (s *Store) tryLock(ctx context.Context, conn *pgx.Conn, application string, namespace, key int) (*pgx.Conn, bool, error) {
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = s.lockConn(ctx, application); err != nil {
			return nil, false, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, leaderConnTimeout)
	defer cancel()
	var got bool
	if err := conn.QueryRow(cctx, `SELECT pg_try_advisory_lock($1, $2)`, namespace, key).Scan(&got); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, false, dbError(err)
	}
	return conn, got, nil
}

// lockHeld reports whether conn still holds the session-level advisory lock.
func lockHeld(ctx context.Context, conn *pgx.Conn, namespace, key int) error {
	if conn.IsClosed() {
		return errLockLost
	}
	ctx, cancel := context.WithTimeout(ctx, leaderConnTimeout)
	defer cancel()
	var held bool
	err := conn.QueryRow(ctx, `SELECT `+advisoryLockGranted("$2", true), namespace, key).Scan(&held)
	if err != nil {
		return fmt.Errorf("%w: %v", errLockLost, err)
	}
	if !held {
		return errLockLost
	}
	return nil
}

// lockConn opens a connection of its own for a session-level lock: the lock lasts exactly
// as long as the connection.
func (s *Store) lockConn(ctx context.Context, application string) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	if application != "" {
		cfg.RuntimeParams["application_name"] = application
	}
	// When the worker's host vanishes, PostgreSQL must notice within seconds (not the
	// default two hours) so that the lock goes to a standby: server-side keepalives for
	// TCP connections (ignored on unix sockets, where a dead process closes its socket).
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3}}
	cfg.DialFunc = d.DialContext
	cctx, cancel := context.WithTimeout(ctx, leaderConnTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", describe(cfg), err)
	}
	return conn, nil
}

// fenceLeaderConn is the leader's connection. Not safe for concurrent use: the worker's loop
// is its only user.
type fenceLeaderConn struct {
	conn *pgx.Conn
}

var errLockLost = errors.New("the lock's database connection is gone")

func (f *fenceLeaderConn) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, leaderConnTimeout)
}

func (f *fenceLeaderConn) Check(ctx context.Context) error {
	return lockHeld(ctx, f.conn, fenceLockNamespace, fenceLockKey)
}

func (f *fenceLeaderConn) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	var t time.Time
	err := f.conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, dbError(err)
}

func (f *fenceLeaderConn) Tracking(ctx context.Context) (map[string]fencing.Tracking, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	rows, err := f.conn.Query(ctx, `SELECT member, first_seen_offline, last_seen_online, last_observed, maintenance FROM fence_member_tracking`)
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

func (f *fenceLeaderConn) SaveTracking(ctx context.Context, next []fencing.Tracking, gone []string, events []fencing.Event) ([]fencing.Event, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	tx, err := f.conn.Begin(ctx)
	if err != nil {
		return nil, dbError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, t := range next {
		if _, err := tx.Exec(ctx, `INSERT INTO fence_member_tracking (member, first_seen_offline, last_seen_online, last_observed, maintenance)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (member) DO UPDATE SET first_seen_offline = EXCLUDED.first_seen_offline,
			last_seen_online = EXCLUDED.last_seen_online, last_observed = EXCLUDED.last_observed, maintenance = EXCLUDED.maintenance`,
			t.Member, nullTime(t.FirstSeenOffline), nullTime(t.LastSeenOnline), t.LastObserved, t.Maintenance); err != nil {
			return nil, dbError(err)
		}
	}
	if len(gone) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM fence_member_tracking WHERE member = ANY($1)`, gone); err != nil {
			return nil, dbError(err)
		}
	}
	out := make([]fencing.Event, len(events))
	for i, e := range events {
		if out[i], err = insertFenceEvent(ctx, tx, e); err != nil {
			return nil, err
		}
	}
	return out, dbError(tx.Commit(ctx))
}

// insertFenceEvent writes one event. Fence events have one writer at a time, the leading
// worker, on its lock's connection (a statement or transaction at a time), so ids become
// visible in id order, as the fence feed and fenceProgress's replay need.
func insertFenceEvent(ctx context.Context, q querier, e fencing.Event) (fencing.Event, error) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	err := q.QueryRow(ctx, `INSERT INTO fence_events (at, member, kind, reason, message, worker, details)
		VALUES ($1, nullif($2, ''), $3, nullif($4, ''), $5, $6, $7) RETURNING id`,
		e.At, e.Member, string(e.Kind), string(e.Reason), e.Message, e.Worker, e.Details).Scan(&e.ID)
	if err != nil {
		return e, dbError(err)
	}
	return e, nil
}

func (f *fenceLeaderConn) Mappings(ctx context.Context) (map[string]fencing.Mapping, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	return mappings(ctx, f.conn)
}

// Requests derives each member's latest request, and what became of it, from the events.
func (f *fenceLeaderConn) Requests(ctx context.Context) (map[string]fencing.Request, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	rows, err := f.conn.Query(ctx, `SELECT r.member, r.id, r.at, coalesce(r.details->>'maasSystemId', ''), coalesce(r.details->>'hardwareUuid', ''),
			coalesce(o.kind, ''), o.at
		FROM (SELECT DISTINCT ON (member) member, id, at, details FROM fence_events WHERE kind = 'REQUESTED' ORDER BY member, id DESC) r
		LEFT JOIN LATERAL (SELECT kind, at FROM fence_events o WHERE o.member = r.member AND o.id > r.id
			AND o.kind IN ('CONFIRMED', 'NOT_CONFIRMED') ORDER BY o.id LIMIT 1) o ON true`)
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

func (f *fenceLeaderConn) LatestEvents(ctx context.Context) (map[string]fencing.Event, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	// One index lookup per member the worker tracks (the members it decides on), instead of
	// reading the whole trail.
	evs, err := collectEvents(f.conn.Query(ctx, `SELECT e.id, e.at, coalesce(e.member, ''), e.kind, coalesce(e.reason, ''), e.message, e.worker, e.details
		FROM fence_member_tracking t
		CROSS JOIN LATERAL (SELECT * FROM fence_events WHERE member = t.member ORDER BY id DESC LIMIT 1) e`))
	if err != nil {
		return nil, err
	}
	out := make(map[string]fencing.Event, len(evs))
	for _, e := range evs {
		out[e.Member] = e
	}
	return out, nil
}

// Append records an event on the lock's own connection: if it succeeds, this worker held
// the lock when it was written.
func (f *fenceLeaderConn) Append(ctx context.Context, e fencing.Event) (fencing.Event, error) {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	return insertFenceEvent(ctx, f.conn, e)
}

func (f *fenceLeaderConn) Heartbeat(ctx context.Context, ws fencing.WorkerStatus) error {
	ctx, cancel := f.ctx(ctx)
	defer cancel()
	settings := map[string]any{
		"pollSeconds": ws.PollInterval.Seconds(), "offlineAfterSeconds": ws.Limits.OfflineAfter.Seconds(),
		"cooldownSeconds": ws.Limits.Cooldown.Seconds(), "confirmTimeoutSeconds": ws.Limits.ConfirmTimeout.Seconds(),
		"maxGapSeconds": ws.Limits.MaxObservationGap.Seconds(), "settleSeconds": ws.Limits.Settle.Seconds(),
	}
	_, err := f.conn.Exec(ctx, `INSERT INTO fence_worker (singleton, worker, leader_since, last_round_at, settings) VALUES (true, $1, $2, $3, $4)
		ON CONFLICT (singleton) DO UPDATE SET worker = EXCLUDED.worker, leader_since = EXCLUDED.leader_since,
			last_round_at = EXCLUDED.last_round_at, settings = EXCLUDED.settings`,
		ws.Worker, ws.LeaderSince, ws.LastRoundAt, settings)
	return dbError(err)
}

func (f *fenceLeaderConn) Close() { releaseLock(f.conn) }

// releaseLock unlocks before closing: PostgreSQL frees a closed connection's locks only when
// its backend has exited, a moment after the client hung up, so a standby (or this process
// leading again) could find the lock still taken. A connection that is already broken has
// nothing to unlock.
func releaseLock(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !conn.IsClosed() {
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	}
	_ = conn.Close(ctx)
}
