package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/internal/leader"
)

// The roles that have one leader at a time, each with its row in leader_leases.
const (
	roleFence   = "fence"
	roleDrift   = "drift"
	roleRolling = "rolling"
)

// DefaultLeaderLease is a leader lease's length when none is given (APELORA_LEADER_LEASE).
const DefaultLeaderLease = 15 * time.Second

// candidate is one process trying for one role's leader lease. A standby keeps its
// connection between attempts; take is not safe for concurrent use.
type candidate struct {
	s      *Store
	role   string
	holder string // application_name of the connection, and leader_leases.holder
	ttl    time.Duration
	conn   *pgx.Conn // a standby's connection, kept for the next attempt
}

// take takes the role's lease when it is free (never taken, given up, or expired on the
// database's clock) with the next epoch, and returns the connection that holds it; nil
// when another process holds it. An unexpired lease is never taken over, not even by its
// own holder: a process that lost its connection cannot know whether it already acted on
// the epoch it had, so a new take-over always means a new epoch.
func (l *candidate) take(ctx context.Context) (*leaderLease, error) {
	ttl := l.ttl
	if ttl <= 0 {
		ttl = DefaultLeaderLease
	}
	conn := l.conn
	l.conn = nil
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = l.s.sessionConn(ctx, l.holder); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, leaderStatementTimeout)
	defer cancel()
	// The lease's end is measured here from before the statement was sent: the database
	// sets its own end at least that late, so this process stops acting before any other
	// can take over.
	sent := time.Now()
	var epoch int64
	err := conn.QueryRow(cctx, `INSERT INTO leader_leases AS l (role, epoch, holder, taken_at, renewed_at, expires_at)
		VALUES ($1, 1, $2, clock_timestamp(), clock_timestamp(), clock_timestamp() + $3 * interval '1 millisecond')
		ON CONFLICT (role) DO UPDATE SET epoch = l.epoch + 1, holder = EXCLUDED.holder, taken_at = EXCLUDED.taken_at,
			renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at
		WHERE l.expires_at <= clock_timestamp()
		RETURNING epoch`, l.role, l.holder, ttl.Milliseconds()).Scan(&epoch)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		l.conn = conn
		return nil, nil
	case err != nil:
		conn.Close(context.WithoutCancel(ctx))
		return nil, dbError(err)
	}
	return &leaderLease{conn: conn, role: l.role, epoch: epoch, ttl: ttl, end: sent.Add(ttl)}, nil
}

// leaderLease is a leader lease held: the role's row in leader_leases at this epoch, and
// the connection it was taken on. Its statements (the leader's loop) and the renewals
// (leader.Run's) take turns on the connection.
type leaderLease struct {
	role  string
	epoch int64
	ttl   time.Duration

	mu   sync.Mutex
	conn *pgx.Conn
	end  time.Time // when the lease ends unless renewed, on this process's monotonic clock
}

var _ leader.Lease = (*leaderLease)(nil)

func (l *leaderLease) Epoch() int64 { return l.epoch }

func (l *leaderLease) lost(why string) error {
	return fmt.Errorf("%w (%s lease, epoch %d): %s", leader.ErrLost, l.role, l.epoch, why)
}

// use takes the connection for one statement (or transaction), bounded by the lease's
// end: a leader never reads or writes past it. done gives the connection back.
func (l *leaderLease) use(ctx context.Context) (context.Context, context.CancelFunc, error) {
	l.mu.Lock()
	if !time.Now().Before(l.end) {
		l.mu.Unlock()
		return nil, nil, l.lost("it ended before it could be renewed")
	}
	if l.conn.IsClosed() {
		l.mu.Unlock()
		return nil, nil, l.lost("its database connection is gone")
	}
	cctx, cancel := context.WithDeadline(ctx, l.end)
	cctx, cancel2 := context.WithTimeout(cctx, leaderStatementTimeout)
	return cctx, func() { cancel2(); cancel(); l.mu.Unlock() }, nil
}

// guard is the epoch check every leader write makes in its own transaction: the lease
// must still be this epoch's and unexpired on the database's clock. FOR SHARE keeps a
// take-over (which updates the row) waiting until the write has committed, so no write
// of an old epoch lands after a newer epoch began.
func (l *leaderLease) guard(ctx context.Context, tx pgx.Tx) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT true FROM leader_leases WHERE role = $1 AND epoch = $2 AND expires_at > clock_timestamp() FOR SHARE`,
		l.role, l.epoch).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return l.lost("the database says another epoch leads now, or this one expired: nothing was written")
	}
	return dbError(err)
}

// write runs fn in a transaction that first checks the epoch (guard).
func (l *leaderLease) write(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, done, err := l.use(ctx)
	if err != nil {
		return err
	}
	defer done()
	tx, err := l.conn.Begin(ctx)
	if err != nil {
		return dbError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := l.guard(ctx, tx); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	return dbError(tx.Commit(ctx))
}

// Check returns nil while the lease is still this epoch's: its end has not passed here,
// and the database agrees. The fence worker asks right before it sends a power-off, so
// a worker that was paused past its lease (SIGSTOP, a long GC or VM pause) sends nothing.
func (l *leaderLease) Check(ctx context.Context) error {
	ctx, done, err := l.use(ctx)
	if err != nil {
		return err
	}
	defer done()
	var ok bool
	err = l.conn.QueryRow(ctx, `SELECT true FROM leader_leases WHERE role = $1 AND epoch = $2 AND expires_at > clock_timestamp()`,
		l.role, l.epoch).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return l.lost("the database says another epoch leads now, or this one expired")
	}
	if err != nil {
		return l.lost(fmt.Sprintf("its database connection failed: %v", dbError(err)))
	}
	return nil
}

// Renew extends the lease by its length. It fails with leader.ErrLost when another epoch
// leads, when the connection is gone (a leader on a broken connection stops; a new
// connection would be a new take-over), or when the lease's end passed before a renewal
// succeeded.
func (l *leaderLease) Renew(ctx context.Context) error {
	ctx, done, err := l.use(ctx)
	if err != nil {
		return err
	}
	defer done()
	sent := time.Now()
	tag, err := l.conn.Exec(ctx, `UPDATE leader_leases SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $3 * interval '1 millisecond'
		WHERE role = $1 AND epoch = $2 AND expires_at > clock_timestamp()`, l.role, l.epoch, l.ttl.Milliseconds())
	switch {
	case err != nil && (l.conn.IsClosed() || !time.Now().Before(l.end)):
		return l.lost(fmt.Sprintf("it could not be renewed: %v", dbError(err)))
	case err != nil:
		return fmt.Errorf("renew the %s lease (epoch %d): %w", l.role, l.epoch, dbError(err))
	case tag.RowsAffected() == 0:
		return l.lost("the database says another epoch leads now, or this one expired")
	}
	l.end = sent.Add(l.ttl)
	return nil
}

// Close gives the lease up when it is still this epoch's (a standby then takes over at
// once), and closes the connection.
func (l *leaderLease) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !l.conn.IsClosed() {
		_, _ = l.conn.Exec(ctx, `UPDATE leader_leases SET expires_at = clock_timestamp() WHERE role = $1 AND epoch = $2`, l.role, l.epoch)
	}
	_ = l.conn.Close(ctx)
}
