package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/internal/leader"
)

// The reconciler's side of changes (change.go): steps whose outcome was never written, and
// the recording of what became of them.

var _ changes.Store = (*Store)(nil)

// roleChanges is the reconciler's row in leader_leases.
const roleChanges = "changes"

// Unfinished lists the steps whose outcome is not recorded and whose lease is gone: another
// epoch holds it, or it ended more than grace ago on the database's clock.
func (s *Store) Unfinished(ctx context.Context, grace time.Duration) ([]changes.Step, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.intent_event, c.lock_key, c.action, coalesce(c.machine, ''), c.actor, c.request_id,
			c.parameters, c.details, c.started_at
		FROM change_steps c JOIN change_leases l ON l.lock_key = c.lock_key
		WHERE c.outcome IS NULL AND (l.epoch <> c.lease_epoch OR l.expires_at <= clock_timestamp() - $1 * interval '1 millisecond')
		ORDER BY c.intent_event`, grace.Milliseconds())
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (changes.Step, error) {
		var st changes.Step
		err := row.Scan(&st.Intent, &st.Key, &st.Action, &st.Machine, &st.Actor, &st.RequestID, &st.Parameters, &st.Details, &st.StartedAt)
		return st, err
	})
	return out, dbError(err)
}

// Reconcile records what became of st (see changes.Store): under a new epoch of its lease,
// judge runs as a change of the step's lock (its reads and writes go through it, nothing
// may be sent to Incus or MAAS), and the outcome is written with judge's writes, checked
// against that epoch and against an outcome recorded meanwhile.
func (s *Store) Reconcile(ctx context.Context, st changes.Step, judge func(ctx context.Context) (changes.Verdict, error)) (bool, error) {
	act := &audit.Action{Actor: st.Actor, Name: st.Action, Machine: st.Machine, RequestID: st.RequestID, Parameters: st.Parameters}
	lease, err := s.takeLease(ctx, st.Key, act, st.Machine, true)
	if err != nil || lease == nil {
		return false, err
	}
	var still bool
	if err := s.pool.QueryRow(ctx, `SELECT outcome IS NULL FROM change_steps WHERE intent_event = $1`, st.Intent).Scan(&still); err != nil || !still {
		lease.release(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return false, dbError(err)
	}
	run := &changeRun{s: s, key: st.Key, lease: lease, action: act, intent: st.Intent, reconciled: true}
	ctx = audit.WithAction(ctx, act)
	v, err := judge(run.context(ctx))
	if err != nil {
		run.mu.Lock()
		if run.tx != nil {
			_ = run.tx.Rollback(context.WithoutCancel(ctx))
		}
		run.mu.Unlock()
		lease.release(ctx)
		return false, err
	}
	if v.Outcome != audit.Succeeded && v.Outcome != audit.Failed && v.Outcome != audit.Refused {
		v.Outcome = audit.Failed
	}
	run.found = changes.FoundAfterRestart + ": " + v.Found
	msg := ""
	if v.Outcome != audit.Succeeded {
		msg = run.found
	}
	run.mu.Lock()
	tx := run.tx
	run.tx = nil
	run.mu.Unlock()
	if err := run.record(ctx, tx, v.Outcome, msg); err != nil {
		return false, err
	}
	return true, nil
}

// ChangesLeadership hands out the reconciler's lease (role "changes", as drift's): one API
// replica reconciles at a time. A standby keeps its connection between attempts; TryLead
// is not safe for concurrent use.
func (s *Store) ChangesLeadership(holder string, length time.Duration) changes.Leadership {
	return &changesLeadership{candidate: candidate{s: s, role: roleChanges, holder: holder, ttl: length}}
}

type changesLeadership struct{ candidate }

func (l *changesLeadership) TryLead(ctx context.Context) (leader.Lease, error) {
	lease, err := l.take(ctx)
	if err != nil || lease == nil {
		return nil, err
	}
	return lease, nil
}
