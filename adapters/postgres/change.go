package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/plan"
)

// A change is the one way the database is changed on behalf of a mutation: under the
// machine's lock, with the mutation's audit event written in the same transaction.

// Audited runs fn holding the machine's lock and, when fn succeeds, writes the audit
// event of the mutation in progress, for steps whose change happens outside the database
// (in Incus or MAAS).
func (s *Store) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return s.change(ctx, machine, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
}

// lockNamespace keeps Apelora's advisory locks apart from any other user of the database.
const lockNamespace = 0x41504c

// changeTimeout bounds a whole change, Incus or MAAS calls included.
const changeTimeout = 3 * time.Minute

type txKey struct{}

// afterAuditKey holds what a change's writes must finish once its audit event is inserted,
// in the same transaction: a row that keeps the id of the event that recorded it (an
// admission) can only learn it then, since ids are drawn at insert (insertAudit).
type afterAuditKey struct{}

// afterAudit has f run in the change in progress once its audit event is inserted, with
// the event's id. Outside a change (or in a dry run, which inserts none) f never runs.
func afterAudit(ctx context.Context, f func(ctx context.Context, tx pgx.Tx, eventID int64) error) {
	if after, ok := ctx.Value(afterAuditKey{}).(*[]func(context.Context, pgx.Tx, int64) error); ok {
		*after = append(*after, f)
	}
}

// q returns what a read should run on: the transaction of the change in progress, so a
// read inside a change sees it and needs no second connection, or else the pool.
func (s *Store) q(ctx context.Context) querier {
	if tx, ok := ctx.Value(txKey{}).(pgx.Tx); ok {
		return tx
	}
	return s.pool
}

// change runs fn in a transaction that holds the machine's lock (when machine is not
// empty) and, on success, writes the audit event of the mutation in progress in the same
// transaction. If the event cannot be written, nothing fn did in the database is kept.
//
// Once begun, a change runs to its end even if the client goes away: its context is
// detached from the request's (keeping its values) and bounded by changeTimeout, so a
// step Incus or MAAS has carried out is always recorded.
func (s *Store) change(ctx context.Context, machine string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	lock := mutations.LockNone
	if machine != "" {
		lock = mutations.LockMachine
	}
	return s.changeHolding(ctx, lock, machine, fn)
}

// changeHolding is change, saying which lock it holds (the identities' changes lock rows
// of their own, not a machine), so that it can check the mutation's declaration.
func (s *Store) changeHolding(ctx context.Context, lock mutations.Lock, machine string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	action := audit.ActionFrom(ctx)
	if action == nil {
		return apperr.New(apperr.Internal, "a change was attempted outside an audited mutation")
	}
	// The lock a mutation's change holds is declared beside it in schema/ (@change): a
	// service that locks otherwise is a programming error, caught by any test that runs
	// it (`apelora identity` on the server runs under its mutation's name and is checked
	// too). Actions named after no mutation are not.
	if m, ok := mutations.Of(action.Name); ok && m.Lock != lock {
		return apperr.New(apperr.Internal, "mutation %s declares the lock %s (schema/, @change) but its change holds %s: make the service or the declaration say the same", m.Name, m.Lock, lock)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changeTimeout)
	defer cancel()
	// A dry run's transaction is READ ONLY: its writes are plan steps (writeTx), and a
	// write that bypasses the seam is refused by PostgreSQL itself; nextval cannot run in
	// it, so a plan advances no sequence.
	r := plan.From(ctx)
	opts := pgx.TxOptions{}
	if r != nil {
		opts.AccessMode = pgx.ReadOnly
	}
	raw, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return unavailable(err)
	}
	defer raw.Rollback(context.WithoutCancel(ctx))
	tx := &writeTx{Tx: raw, writes: s.writes, planned: r}
	if machine != "" {
		// A dry run only looks whether a change holds the lock, and takes none: a plan
		// must not make the change it previews (or another plan, such as the console's
		// asking again as the operator types) BUSY.
		lock := `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`
		if r != nil {
			lock = `SELECT NOT ` + advisoryLockGranted("hashtext($2)")
		}
		var got bool
		if err := tx.QueryRow(ctx, lock, lockNamespace, machine).Scan(&got); err != nil {
			return dbError(err)
		}
		if !got {
			return apperr.New(apperr.Busy, "machine %q is busy: another change to it is in progress; try again when it has finished", machine)
		}
	}
	var after []func(ctx context.Context, tx pgx.Tx, eventID int64) error
	fctx := context.WithValue(context.WithValue(ctx, txKey{}, pgx.Tx(tx)), afterAuditKey{}, &after)
	if err := fn(fctx, tx); err != nil {
		return err
	}
	if r != nil {
		// A dry run sent no write (they are its steps) and keeps nothing; the gate writes
		// the PLANNED event on its own.
		return nil
	}
	eventID, err := s.insertAudit(ctx, tx, action.Event(audit.Succeeded, ""))
	if err != nil {
		s.auditWrite(err)
		return apperr.Wrap(err, apperr.Unavailable, "the audit trail could not be written, so the database was not changed (a step in Incus or MAAS may have happened: check the machine); check the database")
	}
	for _, f := range after {
		if err := f(ctx, tx, eventID); err != nil {
			return apperr.Wrap(dbError(err), apperr.Unavailable, "the change could not be recorded, so the database was not changed (a step in Incus or MAAS may have happened: check the machine); check the database")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		s.auditWrite(err)
		return apperr.Wrap(err, apperr.Unavailable, "the change could not be committed, so the database was not changed (a step in Incus or MAAS may have happened: check the machine); check the database")
	}
	s.auditWrite(nil)
	action.MarkRecorded()
	return nil
}
