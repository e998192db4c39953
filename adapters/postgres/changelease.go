package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
)

// A change's lock is a lease (table change_leases, migration 0017): a row per lock key
// ("machine NAME", or a named lock such as "identities"), taken with the next epoch when
// it is free, as the leaders' leases are (lease.go). Unlike a transaction's advisory lock it
// needs no connection held open while the change waits for Incus or MAAS, and unlike a
// session lock it says which holder is current: the change's last writes (its outcome, the
// release) check the epoch in their own transaction, so a change that lost its lease
// (paused past it, cut off from the database) records nothing over the one that took over.

// DefaultChangeLease is a change lease's length when none is given: renewed every third
// of it while the change runs, so it outlives a change only when its process stopped.
const DefaultChangeLease = 15 * time.Second

// namedLeaseWait is how long a change waits for a named lock (identities, hardware
// profiles …) another change holds before it is BUSY; a machine's lock is BUSY at once.
const namedLeaseWait = 5 * time.Second

// SetChangeLease sets the length of the leases changes hold (APELORA_LEADER_LEASE, as the
// leaders' leases).
func (s *Store) SetChangeLease(d time.Duration) {
	if d > 0 {
		s.changeLease = d
	}
}

func (s *Store) changeLeaseLength() time.Duration {
	if s.changeLease > 0 {
		return s.changeLease
	}
	return DefaultChangeLease
}

// processHolder names this process in the leases it takes.
var processHolder = func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}()

// changeLease is one lease a change holds.
type changeLease struct {
	s     *Store
	key   string
	epoch int64
	ttl   time.Duration

	mu   sync.Mutex
	end  time.Time // when it ends unless renewed, on this process's monotonic clock
	lost error
	stop chan struct{}
	done chan struct{}
}

// takeLease takes the lease of key for action, renewing it until release. A lease held by
// another change (or, unless forReconciler, one whose step has no recorded outcome yet) is
// BUSY: at once for a machine's, after namedLeaseWait for a named lock's. forReconciler
// takes only an expired lease, whatever its step.
func (s *Store) takeLease(ctx context.Context, key string, action *audit.Action, machine string, forReconciler bool) (*changeLease, error) {
	ttl := s.changeLeaseLength()
	wait := time.Duration(0)
	if machine == "" && !forReconciler {
		wait = namedLeaseWait
	}
	deadline := time.Now().Add(wait)
	for {
		sent := time.Now()
		var epoch int64
		err := s.pool.QueryRow(ctx, `INSERT INTO change_leases AS l (lock_key, epoch, holder, action, request_id, taken_at, expires_at)
			VALUES ($1, 1, $2, $3, $4, clock_timestamp(), clock_timestamp() + $5 * interval '1 millisecond')
			ON CONFLICT (lock_key) DO UPDATE SET epoch = l.epoch + 1, holder = EXCLUDED.holder, action = EXCLUDED.action,
				request_id = EXCLUDED.request_id, taken_at = EXCLUDED.taken_at, expires_at = EXCLUDED.expires_at
			WHERE l.expires_at <= clock_timestamp()
				AND ($6 OR NOT EXISTS (SELECT 1 FROM change_steps c WHERE c.lock_key = l.lock_key AND c.outcome IS NULL))
			RETURNING epoch`, key, processHolder, audit.Text(action.Name, audit.MaxNameBytes), audit.Text(action.RequestID, audit.MaxRequestIDBytes),
			ttl.Milliseconds(), forReconciler).Scan(&epoch)
		switch {
		case err == nil:
			l := &changeLease{s: s, key: key, epoch: epoch, ttl: ttl, end: sent.Add(ttl), stop: make(chan struct{}), done: make(chan struct{})}
			go l.renew()
			return l, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, unavailable(err)
		}
		if forReconciler {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, s.busy(ctx, key, machine)
		}
		select {
		case <-ctx.Done():
			return nil, s.busy(ctx, key, machine)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// busy says what holds key: another change in progress, or a step whose outcome is not
// recorded yet (its process stopped: the reconciler records it).
func (s *Store) busy(ctx context.Context, key, machine string) error {
	what := fmt.Sprintf("%s is busy", key)
	if machine != "" {
		what = fmt.Sprintf("machine %q is busy", machine)
	}
	var action, request string
	err := s.pool.QueryRow(context.WithoutCancel(ctx), `SELECT action, request_id FROM change_steps WHERE lock_key = $1 AND outcome IS NULL ORDER BY intent_event LIMIT 1`, key).Scan(&action, &request)
	if err == nil {
		return apperr.New(apperr.Busy, "%s: its step %s (request %s) was sent to Incus or MAAS and its outcome is not recorded yet (the process carrying it out stopped); Apelora reads what happened and records it within a minute or two: try again then", what, action, request)
	}
	return apperr.New(apperr.Busy, "%s: another change to it is in progress; try again when it has finished", what)
}

// renew extends the lease every third of its length until release.
func (l *changeLease) renew() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		tag, err := l.s.pool.Exec(ctx, `UPDATE change_leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
			WHERE lock_key = $1 AND epoch = $2 AND expires_at > clock_timestamp()`, l.key, l.epoch, l.ttl.Milliseconds())
		cancel()
		l.mu.Lock()
		switch {
		case err == nil && tag.RowsAffected() == 1:
			l.end = sent.Add(l.ttl)
		case err == nil:
			l.lost = fmt.Errorf("the %s lease (epoch %d) is another change's now, or expired", l.key, l.epoch)
		}
		l.mu.Unlock()
	}
}

// check answers nil while the lease is still this change's as far as this process can
// tell: not lost at a renewal, and its end not passed on the monotonic clock (a process
// paused past it sends nothing more).
func (l *changeLease) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if !time.Now().Before(l.end) {
		return fmt.Errorf("the %s lease (epoch %d) ended before it could be renewed", l.key, l.epoch)
	}
	return nil
}

// stopRenewing stops the renewals (before the change's last transaction).
func (l *changeLease) stopRenewing() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// guard checks, in tx, that the lease is still this epoch's and unexpired on the database's
// clock, and holds its row until tx ends, so a take-over waits for tx (a change's intent).
func (l *changeLease) guard(ctx context.Context, tx pgx.Tx) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT true FROM change_leases WHERE lock_key = $1 AND epoch = $2 AND expires_at > clock_timestamp() FOR UPDATE`,
		l.key, l.epoch).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return errLeaseLost
	}
	return dbError(err)
}

// guardRelease is guard that also releases the lease when tx commits: the change's last
// transaction (its outcome).
func (l *changeLease) guardRelease(ctx context.Context, tx pgx.Tx) error {
	tag, err := tx.Exec(ctx, `UPDATE change_leases SET expires_at = clock_timestamp() WHERE lock_key = $1 AND epoch = $2 AND expires_at > clock_timestamp()`,
		l.key, l.epoch)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return errLeaseLost
	}
	return nil
}

// release gives the lease up on its own (a change that ended without writing anything, or
// whose last transaction failed), best effort: otherwise it expires.
func (l *changeLease) release(ctx context.Context) {
	l.stopRenewing()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = l.s.pool.Exec(ctx, `UPDATE change_leases SET expires_at = clock_timestamp() WHERE lock_key = $1 AND epoch = $2 AND expires_at > clock_timestamp()`,
		l.key, l.epoch)
}

// errLeaseLost: the change's lease is another's now, or expired on the database's clock.
var errLeaseLost = errors.New("the change's lease is no longer its own (it expired, or another change or the reconciler took it)")
