package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/internal/apperr"
)

// auditOrderLock serialises the audit inserts' last moments (see insertAudit).
const auditOrderLock = lockNamespace + 2

// insertAudit writes every audit row there is, bounded by audit.Bound: whatever the
// caller sent, the row fits its limits and the database accepts it.
//
// It first takes a transaction lock that every audit insert takes, held until commit: a
// row's id is then drawn only after every earlier row has committed, so ids become
// visible in id order, and a stream that reads "the rows after the last id I have"
// (auditEventRecorded's replay, the feed) can never skip one that commits late. Inserts
// wait for each other only between the insert and the commit, at the end of a change.
// Under the same lock (taken in appendAuditEvent) the event becomes the next leaf of the
// audit log, so leaf indexes follow ids, sealed with the audit key's sealer. Every event,
// whatever it records, is appended here. A stored tree that cannot take the event (or a
// process without the audit key) is UNAVAILABLE with a message that says what is wrong and
// what to run.
func (s *Store) insertAudit(ctx context.Context, tx pgx.Tx, e audit.Event) (int64, error) {
	id, err := appendAuditEvent(ctx, tx, &s.auditEdge, s.sealer.Load(), s.tracer.commits.Load(), audit.Bound(e))
	s.noteAppend(err)
	var d *auditlog.Damage
	if errors.As(err, &d) {
		return 0, apperr.New(apperr.Unavailable, "%s", d.Message)
	}
	return id, err
}

// RecordAudit writes an audit event on its own, for an action that changed nothing
// (refused, or failed and rolled back).
func (s *Store) RecordAudit(ctx context.Context, e audit.Event) (err error) {
	defer func() { s.auditWrite(err) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := s.insertAudit(ctx, tx, e); err != nil {
		return dbError(err)
	}
	return dbError(tx.Commit(ctx))
}

const auditColumns = `id, at, actor, action, coalesce(machine, ''), parameters, outcome, coalesce(error, ''), request_id, details`

func scanAudit(row pgx.Row) (audit.Event, error) {
	var e audit.Event
	err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Machine, &e.Parameters, &e.Outcome, &e.Error, &e.RequestID, &e.Details)
	return e, err
}

// AuditEvents returns a page of the audit trail, newest first, with one more event than
// asked for when there is a next page.
func (s *Store) AuditEvents(ctx context.Context, f audit.Filter) ([]audit.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_events
		WHERE ($1 = '' OR machine = $1) AND ($2 = 0 OR id < $2) AND ($4 = '' OR actor = $4) AND ($5 = '' OR outcome = $5)
		ORDER BY id DESC LIMIT $3`, f.Machine, f.Before, f.Limit, f.Actor, string(f.Outcome))
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Event, error) { return scanAudit(row) })
	return out, dbError(err)
}

// AuditEvent returns one event, or nil.
func (s *Store) AuditEvent(ctx context.Context, id int64) (*audit.Event, error) {
	e, err := scanAudit(s.pool.QueryRow(ctx, `SELECT `+auditColumns+` FROM audit_events WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &e, nil
}

// AuditEventsAfter returns the events f keeps with an id above after, oldest first: what
// the audit feed publishes, and what a subscriber replays (f.Before and f.Limit are not
// used).
func (s *Store) AuditEventsAfter(ctx context.Context, f audit.Filter, after int64, limit int) ([]audit.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_events
		WHERE id > $1 AND ($3 = '' OR machine = $3) AND ($4 = '' OR actor = $4) AND ($5 = '' OR outcome = $5)
		ORDER BY id LIMIT $2`, after, limit, f.Machine, f.Actor, string(f.Outcome))
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Event, error) { return scanAudit(row) })
	return out, dbError(err)
}
