package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/mutations"
)

// A change is the one way the database is changed on behalf of a mutation, and the one way
// a mutation acts in Incus or MAAS:
//
//  1. it takes the lease of what it changes (changelease.go: the machine's, or a named
//     lock's), so no other change of Apelora's to it runs until its outcome is written;
//  2. a call confirmed with a plan hash is checked against its plan under that lease
//     (plan.Confirmation): planned again, refused PLAN_CHANGED when the plan moved;
//  3. fn runs. Its reads go to the pool until its first write or row lock begins the
//     change's transaction. Before its first call that changes something in Incus or MAAS
//     (plan.Writes, BeforeUpstream) the approved step is committed as its intent: an audit
//     event STARTED and a change_steps row, in a transaction that checks the lease's epoch;
//     if that cannot be written, nothing is sent (fail closed). A database write before an
//     upstream call is refused: no transaction stays open across an Incus or MAAS call;
//  4. the outcome (SUCCEEDED, FAILED, REFUSED) is written in one transaction with the
//     change's database writes, after checking and releasing the lease: one audit event (for
//     a step that reached Incus or MAAS, linked to its intent by details.intent, and
//     finishing its change_steps row). A change that touches only the database is one
//     transaction, check and act in it, and one event, as before.
//
// A step whose outcome was never written (the process died, the database failed over) is
// found by the reconciler (Reconcile), which reads Incus or MAAS and records what happened.

// Audited runs fn as a change (above), for steps whose change happens outside the
// database (in Incus or MAAS), holding the machine's lease (machine ""; the named lock the
// mutation declares).
func (s *Store) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return s.change(ctx, machine, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
}

// lockNamespace keeps Apelora's advisory locks (the audit and event order locks) apart
// from any other user of the database.
const lockNamespace = 0x41504c

// changeTimeout bounds a whole change, Incus or MAAS calls included.
const changeTimeout = 3 * time.Minute

type txKey struct{}

// afterAuditKey holds the change in progress, whose writes may have to finish once its
// outcome's audit event is inserted, in the same transaction: a row that keeps the id of
// the event that recorded it (an admission) can only learn it then, since ids are drawn at
// insert (insertAudit).
type afterAuditKey struct{}

// afterAudit has f run in the change in progress once its outcome's audit event is
// inserted, with the event's id. Outside a change (or in a dry run, which inserts none) f
// never runs.
func afterAudit(ctx context.Context, f func(ctx context.Context, tx pgx.Tx, eventID int64) error) {
	if r, ok := ctx.Value(afterAuditKey{}).(*changeRun); ok && r != nil {
		r.mu.Lock()
		r.after = append(r.after, f)
		r.mu.Unlock()
	}
}

// heldKey marks the leases the change in progress holds: the plan its confirmation makes
// again is not BUSY on them.
type heldKey struct{}

func holds(ctx context.Context, key string) bool {
	held, _ := ctx.Value(heldKey{}).([]string)
	return slices.Contains(held, key)
}

// q returns what a read should run on: the change in progress (its transaction once begun,
// so a read sees its writes; the pool before), or else the pool.
func (s *Store) q(ctx context.Context) querier {
	if tx, ok := ctx.Value(txKey{}).(pgx.Tx); ok {
		return tx
	}
	return s.pool
}

// change runs fn as a change holding the machine's lease (when machine is not empty) or
// the named lock its mutation declares.
func (s *Store) change(ctx context.Context, machine string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	lock := mutations.LockMachine
	if machine == "" {
		lock = ""
	}
	return s.changeHolding(ctx, lock, machine, fn)
}

// changeHolding is change, saying which lock it holds ("" for the one its mutation
// declares, when it is not a machine's), so that it can check the mutation's declaration.
func (s *Store) changeHolding(ctx context.Context, lock mutations.Lock, machine string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	action := audit.ActionFrom(ctx)
	if action == nil {
		return apperr.New(apperr.Internal, "a change was attempted outside an audited mutation")
	}
	key, err := changeKey(action, lock, machine)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changeTimeout)
	defer cancel()
	if r := plan.From(ctx); r != nil {
		return s.dryChange(ctx, r, key, machine, fn)
	}
	lease, err := s.takeLease(ctx, key, action, machine, false)
	if err != nil {
		return err
	}
	if err := s.stillAuthorised(ctx, machine); err != nil {
		lease.release(ctx)
		return err
	}
	run := &changeRun{s: s, key: key, lease: lease, action: action}
	if c := plan.ConfirmationFrom(ctx); c != nil {
		held, _ := ctx.Value(heldKey{}).([]string)
		cctx, err := c.Check(context.WithValue(ctx, heldKey{}, append(slices.Clone(held), key)))
		if err != nil {
			lease.release(ctx)
			return err
		}
		ctx = cctx
	}
	return run.finish(ctx, fn(run.context(ctx), run.writeTx()))
}

// changeKey is the lease a change of action holding lock takes, after checking the lock is
// the one its mutation declares beside it in schema/ (@change): a service that locks
// otherwise is a programming error, caught by any test that runs it (`apelora identity` on
// the server runs under its mutation's name and is checked too). Actions named after no
// mutation (the server's own, the rolling driver's) are not checked.
func changeKey(action *audit.Action, lock mutations.Lock, machine string) (string, error) {
	m, declared := mutations.Of(action.Name)
	if declared {
		switch {
		case lock == "" && m.Lock != mutations.LockMachine && m.Lock != mutations.LockIdentities:
			lock = m.Lock
		case m.Lock != lock:
			held := lock
			if held == "" {
				held = "no machine's"
			}
			return "", apperr.New(apperr.Internal, "mutation %s declares the lock %s (schema/, @change) but its change holds %s: make the service or the declaration say the same", m.Name, m.Lock, held)
		}
	}
	switch {
	case lock == mutations.LockMachine:
		return lock.Key(machine), nil
	case lock != "":
		return lock.Key(""), nil
	}
	return "action " + action.Name, nil
}

// dryChange is a dry run's change. It takes no lease: it only looks whether a change holds
// it (a busy machine is BUSY in the plan), so a plan never makes the change it previews,
// or another plan (the console asking again as the operator types), BUSY. Its transaction
// is READ ONLY: its writes are calls of the plan (writeTx), a write that bypasses the seam is
// refused by PostgreSQL itself, and nextval cannot run in it, so a plan advances no
// sequence. Nothing is committed, and no event is written (the gate decides).
func (s *Store) dryChange(ctx context.Context, r *plan.Recorder, key, machine string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	raw, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return unavailable(err)
	}
	defer raw.Rollback(context.WithoutCancel(ctx))
	tx := &writeTx{dry: raw, writes: s.writes, planned: r}
	if !holds(ctx, key) {
		var busy bool
		if err := raw.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM change_leases WHERE lock_key = $1 AND expires_at > clock_timestamp())
			OR EXISTS (SELECT 1 FROM change_steps WHERE lock_key = $1 AND outcome IS NULL)`, key).Scan(&busy); err != nil {
			return dbError(err)
		}
		if busy {
			return s.busy(ctx, key, machine)
		}
	}
	fctx := context.WithValue(context.WithValue(ctx, txKey{}, pgx.Tx(tx)), afterAuditKey{}, (*changeRun)(nil))
	return fn(fctx, tx)
}

// changeRun is one real change in progress.
type changeRun struct {
	s      *Store
	key    string
	lease  *changeLease
	action *audit.Action

	mu     sync.Mutex
	tx     pgx.Tx // begun at the first write or row lock; nil before
	wrote  bool   // tx holds a write
	intent int64  // the intent's audit event, once committed
	after  []func(ctx context.Context, tx pgx.Tx, eventID int64) error
	// reconciled: the outcome is the reconciler's, found after the process that made the
	// step stopped (Reconcile); found says what it found.
	reconciled bool
	found      string
}

func (r *changeRun) writeTx() *writeTx { return &writeTx{run: r, writes: r.s.writes} }

// context is ctx for fn: its reads and writes go through the change, and every Incus or
// MAAS write asks it first (beforeUpstream).
func (r *changeRun) context(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, txKey{}, pgx.Tx(r.writeTx()))
	ctx = context.WithValue(ctx, afterAuditKey{}, r)
	return plan.BeforeUpstream(ctx, r.beforeUpstream)
}

// begin returns the change's transaction, beginning it at the first write or row lock.
func (r *changeRun) begin(ctx context.Context, write bool) (querier, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tx == nil {
		tx, err := r.s.pool.Begin(context.WithoutCancel(ctx))
		if err != nil {
			return nil, unavailable(err)
		}
		r.tx = tx
	}
	if write {
		r.wrote = true
	}
	return r.tx, nil
}

// reader is what a plain read runs on: the transaction once begun, the pool before.
func (r *changeRun) reader() querier {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tx != nil {
		return r.tx
	}
	return r.s.pool
}

// beforeUpstream runs before each call that changes something in Incus or MAAS: the first
// commits the intent, every one checks the lease is still this change's. Refused, nothing
// is sent.
func (r *changeRun) beforeUpstream(ctx context.Context, sys plan.System) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reconciled {
		return apperr.New(apperr.Internal, "the reconciler only reads Incus and MAAS: it sent a change to %s", sys)
	}
	if r.wrote {
		return apperr.New(apperr.Internal, "%s wrote to the database before its %s call: a change's database writes come after its upstream calls, so no transaction stays open across one", r.action.Name, sys)
	}
	if err := r.lease.check(); err != nil {
		return apperr.Wrap(err, apperr.Unavailable, "%s: the change's lease was lost (the database did not answer, or this process was paused), so nothing more was sent to %s; what was sent is recorded by Apelora's reconciler", r.action.Name, sys)
	}
	if r.intent != 0 {
		return nil
	}
	if r.tx != nil {
		// Only row locks: the lease keeps Apelora's changes away while Incus or MAAS answers.
		_ = r.tx.Rollback(context.WithoutCancel(ctx))
		r.tx = nil
	}
	id, err := r.s.writeIntent(context.WithoutCancel(ctx), r)
	if err != nil {
		r.s.auditWrite(err)
		return apperr.Wrap(err, apperr.Unavailable, "%s was not sent to %s: its intent could not be recorded first (a step is never taken unaudited); check the database", r.action.Name, sys)
	}
	r.s.auditWrite(nil)
	r.intent = id
	// The call's events are the change's from now on: the outcome, or the reconciler's.
	r.action.MarkRecorded()
	return nil
}

// writeIntent commits the approved step before it is sent: its audit event (STARTED) and
// its change_steps row, under the lease's epoch.
func (s *Store) writeIntent(ctx context.Context, r *changeRun) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := r.lease.guard(ctx, tx); err != nil {
		return 0, err
	}
	ev := r.action.Event(audit.Started, "")
	ev.Details["lease"] = fmt.Sprintf("%s (epoch %d)", r.key, r.lease.epoch)
	ev = audit.Bound(ev)
	id, err := s.insertAudit(ctx, tx, ev)
	if err != nil {
		return 0, dbError(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO change_steps (intent_event, lock_key, lease_epoch, action, machine, actor, request_id, parameters, details)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9)`,
		id, r.key, r.lease.epoch, ev.Action, ev.Machine, ev.Actor, ev.RequestID, ev.Parameters, ev.Details); err != nil {
		return 0, dbError(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, unavailable(err)
	}
	return id, nil
}

// finish writes the change's outcome (fnErr: how fn ended) and releases the lease.
func (r *changeRun) finish(ctx context.Context, fnErr error) error {
	r.lease.stopRenewing()
	r.mu.Lock()
	tx, intent := r.tx, r.intent
	r.tx = nil
	r.mu.Unlock()
	if fnErr != nil {
		if tx != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		if intent == 0 {
			// Nothing was sent: the gate records the refusal or failure on its own.
			r.lease.release(ctx)
			return fnErr
		}
		if err := r.record(ctx, nil, audit.OutcomeOf(fnErr), apperr.PublicMessage(fnErr)); err != nil {
			return apperr.Wrap(fnErr, apperr.CodeOf(fnErr), "%s; and its outcome could not be recorded (%s): Apelora's reconciler records it", apperr.PublicMessage(fnErr), apperr.PublicMessage(err))
		}
		return fnErr
	}
	if err := r.record(ctx, tx, audit.Succeeded, ""); err != nil {
		if intent != 0 {
			return apperr.Wrap(err, apperr.Unavailable, "%s was carried out in Incus or MAAS (its intent is audit event %d) but its outcome could not be recorded: %s; Apelora's reconciler reads what happened and records it (a restarted server finds it too)", r.action.Name, intent, apperr.PublicMessage(err))
		}
		return err
	}
	return nil
}

// record writes the outcome in tx (the change's writes, or nil for a fresh transaction):
// the lease is checked and released, the audit event inserted (linked to the intent), the
// step finished, the writes' after-audit hooks run, and it all commits or nothing does.
func (r *changeRun) record(ctx context.Context, tx pgx.Tx, outcome audit.Outcome, msg string) (err error) {
	ctx = context.WithoutCancel(ctx)
	defer func() {
		if err != nil {
			r.lease.release(ctx)
		}
	}()
	if tx == nil {
		if tx, err = r.s.pool.Begin(ctx); err != nil {
			r.s.auditWrite(err)
			return unavailable(err)
		}
	}
	defer tx.Rollback(ctx)
	if err := r.lease.guardRelease(ctx, tx); err != nil {
		if err == errLeaseLost {
			return apperr.Wrap(err, apperr.Unavailable, "the change's lease was lost before its outcome was written (the database did not answer in time, or this process was paused), so nothing of it was kept in the database; try again")
		}
		return err
	}
	ev := r.action.Event(outcome, msg)
	if r.intent != 0 {
		// The intent holds what was approved (input, plan); the outcome names it.
		delete(ev.Details, "approvedPlan")
		delete(ev.Details, "approvedInput")
		ev.Details["intent"] = r.intent
	}
	if r.reconciled {
		ev.Details["found"] = r.found
		ev.Details["recordedBy"] = "reconciler"
	}
	id, err := r.s.insertAudit(ctx, tx, ev)
	if err != nil {
		r.s.auditWrite(err)
		if _, ok := apperr.As(err); ok {
			// The append said what is wrong and what to run (a damaged tree, no audit key):
			// its words reach the caller unchanged.
			return err
		}
		return apperr.Wrap(err, apperr.Unavailable, "the audit trail could not be written, so the database was not changed; check the database")
	}
	if r.intent != 0 {
		tag, err := tx.Exec(ctx, `UPDATE change_steps SET outcome = $2, outcome_event = $3, finished_at = now() WHERE intent_event = $1 AND outcome IS NULL`,
			r.intent, string(outcome), id)
		if err != nil {
			return apperr.Wrap(dbError(err), apperr.Unavailable, "the step's outcome could not be recorded; check the database")
		}
		if tag.RowsAffected() == 0 {
			return apperr.New(apperr.Unavailable, "the outcome of step %d was recorded already (by the reconciler): nothing more was written", r.intent)
		}
	}
	for _, f := range r.after {
		if err := f(ctx, tx, id); err != nil {
			return apperr.Wrap(dbError(err), apperr.Unavailable, "the change could not be recorded, so the database was not changed; check the database")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		r.s.auditWrite(err)
		return apperr.Wrap(err, apperr.Unavailable, "the change could not be committed, so the database was not changed; check the database")
	}
	r.lease.stopRenewing()
	r.s.auditWrite(nil)
	r.action.MarkRecorded()
	return nil
}

// stillAuthorised refuses BUSY a change to machine by a caller the gate allowed in some
// clusters only (clusters.Authorised) when, under the machine's lease, its record is no
// longer in one of them: it moved since the gate looked.
func (s *Store) stillAuthorised(ctx context.Context, machine string) error {
	a := clusters.AuthorisedFrom(ctx)
	if a == nil || a.Machine == "" || a.Machine != machine || len(a.Clusters) == 0 {
		return nil
	}
	var cluster *int64
	var name string
	err := s.pool.QueryRow(ctx, `SELECT r.cluster_id, coalesce(c.name, '') FROM machine_records r LEFT JOIN clusters c ON c.id = r.cluster_id
		WHERE r.name = $1`, machine).Scan(&cluster, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // no record: the change itself decides (it was allowed for the cluster named)
	}
	if err != nil {
		return dbError(err)
	}
	if cluster != nil && slices.Contains(a.Clusters, *cluster) {
		return nil
	}
	where := "enrolled in no cluster"
	if cluster != nil {
		where = "in cluster " + name
	}
	return apperr.New(apperr.Busy, "%s is %s now, not where this call was authorised: it moved since; try again (you may need a grant there)", machine, where)
}
