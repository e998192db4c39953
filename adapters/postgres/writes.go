package postgres

import (
	"context"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// writeTx is the transaction of a change as fn and the views see it: each statement that
// writes (INSERT, UPDATE, DELETE, also inside a WITH) goes through the seam
// (plan.Writes), which sends it, or in a dry run records it as a DATABASE call (verb and
// table, never values) and sends nothing: the statement then answers no rows and changes
// none. In a dry run every statement runs in its READ ONLY transaction, reads without
// their row lock (FOR UPDATE and the like, which a READ ONLY transaction refuses and a plan
// must not take); whatever else reaches it (a batch, a copy) and writes is refused by
// PostgreSQL.
//
// In a real change the transaction begins at the change's first write or row lock
// (changeRun.begin): reads before it go to the pool, under the change's lease. So a change
// that calls Incus or MAAS holds no transaction across the call: its database writes come
// after its upstream calls, in the transaction that writes its outcome (a write before an
// upstream call is refused there, changeRun.beforeUpstream).
type writeTx struct {
	// dry is a dry run's READ ONLY transaction (planned is then its recorder).
	dry     pgx.Tx
	planned *plan.Recorder
	// run is a real change's.
	run    *changeRun
	writes *plan.Writes
}

var _ pgx.Tx = (*writeTx)(nil)

// rowLock is a read's row-locking clause.
var rowLock = regexp.MustCompile(`(?i)\bFOR\s+(NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)\b`)

// statement returns sql as it is sent, the call of a plan it stands for, whether it writes, and
// whether it locks rows.
func (t *writeTx) statement(ctx context.Context, sql string) (string, plan.Call, bool, bool) {
	// A row lock, or a transaction lock (the order locks of the event tables), begins a
	// real change's transaction: it must hold until the change commits.
	locks := rowLock.MatchString(sql) || strings.Contains(sql, "advisory_xact_lock")
	if t.planned != nil {
		sql = rowLock.ReplaceAllString(sql, "")
		locks = false
	}
	m := writes.FindStringSubmatch(comments.ReplaceAllString(quoted.ReplaceAllString(sql, "''"), " "))
	if m == nil || !tables()[strings.ToLower(m[2])] {
		return sql, plan.Call{}, false, locks
	}
	verb := strings.ToUpper(strings.Fields(m[1])[0])
	return sql, plan.Call{Request: verb + " " + strings.ToLower(m[2]), Target: actionMachine(ctx)}, true, locks
}

// on returns what a statement runs on: the dry run's transaction; a real change's
// transaction, begun for a write or a row lock; else (a plain read before the change's
// first write) the pool.
func (t *writeTx) on(ctx context.Context, write, locks bool) (querier, error) {
	if t.run == nil {
		return t.dry, nil
	}
	if write || locks {
		return t.run.begin(ctx, write)
	}
	return t.run.reader(), nil
}

// seam hands one write to the seam under the transaction's choice.
func (t *writeTx) seam(ctx context.Context, call plan.Call, send func() error) (bool, error) {
	if t.planned != nil {
		ctx = plan.With(ctx, t.planned)
	} else if plan.Active(ctx) {
		ctx = plan.With(ctx, nil) // a real change: its statements are sent
	}
	return t.writes.Do(ctx, plan.Database, func() plan.Call { return call }, send)
}

func (t *writeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sql, call, write, locks := t.statement(ctx, sql)
	if !write {
		q, err := t.on(ctx, false, locks)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return q.Exec(ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	_, err := t.seam(ctx, call, func() error {
		q, err := t.on(ctx, true, locks)
		if err != nil {
			return err
		}
		tag, err = q.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

func (t *writeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sql, call, write, locks := t.statement(ctx, sql)
	if !write {
		q, err := t.on(ctx, false, locks)
		if err != nil {
			return nil, err
		}
		return q.Query(ctx, sql, args...)
	}
	var rows pgx.Rows
	planned, err := t.seam(ctx, call, func() error {
		q, err := t.on(ctx, true, locks)
		if err != nil {
			return err
		}
		rows, err = q.Query(ctx, sql, args...)
		return err
	})
	if planned {
		return noRows{}, nil
	}
	return rows, err
}

func (t *writeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sql, call, write, locks := t.statement(ctx, sql)
	if !write {
		q, err := t.on(ctx, false, locks)
		if err != nil {
			return errRow{err}
		}
		return q.QueryRow(ctx, sql, args...)
	}
	var row pgx.Row
	planned, err := t.seam(ctx, call, func() error {
		q, err := t.on(ctx, true, locks)
		if err != nil {
			return err
		}
		row = q.QueryRow(ctx, sql, args...)
		return nil // a row's error comes with Scan
	})
	if planned {
		return noRows{}
	}
	if err != nil {
		return errRow{err}
	}
	return row
}

// The rest of pgx.Tx: what the domain has no use for runs on the transaction (a batch or
// a copy counts as a write); the change alone commits or rolls back.

func (t *writeTx) tx(ctx context.Context) (pgx.Tx, error) {
	if t.run == nil {
		return t.dry, nil
	}
	q, err := t.run.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	return q.(pgx.Tx), nil
}

func (t *writeTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.tx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (t *writeTx) Commit(context.Context) error {
	return apperr.New(apperr.Internal, "a change's transaction is committed by the change, not by what runs in it")
}

func (t *writeTx) Rollback(context.Context) error {
	return apperr.New(apperr.Internal, "a change's transaction is rolled back by the change, not by what runs in it")
}

func (t *writeTx) CopyFrom(ctx context.Context, name pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.tx(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, name, cols, src)
}

func (t *writeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.tx(ctx)
	if err != nil {
		return errBatch{err}
	}
	return tx.SendBatch(ctx, b)
}

func (t *writeTx) LargeObjects() pgx.LargeObjects {
	tx, _ := t.tx(context.Background())
	if tx == nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

func (t *writeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.tx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (t *writeTx) Conn() *pgx.Conn {
	tx, _ := t.tx(context.Background())
	if tx == nil {
		return nil
	}
	return tx.Conn()
}

// errRow is a row whose statement could not be sent (its transaction could not begin).
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a batch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// planned reports whether tx is a dry run's: its writes were recorded, not sent. For the
// views whose answer is the row a write returns (none in a plan).
func planned(tx pgx.Tx) bool {
	w, ok := tx.(*writeTx)
	return ok && w.planned != nil
}

// noRows is a planned write's answer: nothing was written, so no row comes back.
type noRows struct{}

func (noRows) Close()                                       {}
func (noRows) Err() error                                   { return nil }
func (noRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (noRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (noRows) Next() bool                                   { return false }
func (noRows) Scan(...any) error                            { return pgx.ErrNoRows }
func (noRows) Values() ([]any, error)                       { return nil, pgx.ErrNoRows }
func (noRows) RawValues() [][]byte                          { return nil }
func (noRows) Conn() *pgx.Conn                              { return nil }
func (noRows) TypeMap() *pgtype.Map                         { return nil }

// actionMachine is the machine of the mutation in progress, a call's target ("" for none).
func actionMachine(ctx context.Context) string {
	if a := audit.ActionFrom(ctx); a != nil {
		return a.Machine
	}
	return ""
}
