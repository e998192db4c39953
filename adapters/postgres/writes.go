package postgres

import (
	"context"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/plan"
)

// writeTx is the transaction of a change as fn and the views see it: each statement that
// writes (INSERT, UPDATE, DELETE, also inside a WITH) goes through the seam
// (plan.Writes), which sends it, or in a dry run records it as a DATABASE step (verb and
// table, never values) and sends nothing: the statement then answers no rows and changes
// none. Reads go to the transaction as they are; in a dry run without their row lock
// (FOR UPDATE and the like), which a READ ONLY transaction refuses and a plan must not
// take. Whatever else reaches the transaction (a batch, a copy) and writes is refused by
// PostgreSQL in a dry run, whose transaction is READ ONLY.
type writeTx struct {
	pgx.Tx
	writes *plan.Writes
	// planned is the dry run's recorder (nil: a real change). The choice is the
	// transaction's, whatever context the domain passes with a statement.
	planned *plan.Recorder
}

// rowLock is a read's row-locking clause.
var rowLock = regexp.MustCompile(`(?i)\bFOR\s+(NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)\b`)

// statement returns sql as it is sent, and whether it writes: the step it stands for.
func (t *writeTx) statement(ctx context.Context, sql string) (string, plan.Step, bool) {
	if t.planned != nil {
		sql = rowLock.ReplaceAllString(sql, "")
	}
	m := writes.FindStringSubmatch(comments.ReplaceAllString(quoted.ReplaceAllString(sql, "''"), " "))
	if m == nil || !tables()[strings.ToLower(m[2])] {
		return sql, plan.Step{}, false
	}
	verb := strings.ToUpper(strings.Fields(m[1])[0])
	return sql, plan.Step{Call: verb + " " + strings.ToLower(m[2]), Target: actionMachine(ctx)}, true
}

// seam hands one write to the seam under the transaction's choice.
func (t *writeTx) seam(ctx context.Context, step plan.Step, send func() error) (bool, error) {
	if t.planned != nil {
		ctx = plan.With(ctx, t.planned)
	} else if plan.Active(ctx) {
		ctx = plan.With(ctx, nil) // a real change: its statements are sent
	}
	return t.writes.Do(ctx, plan.Database, func() plan.Step { return step }, send)
}

func (t *writeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sql, step, write := t.statement(ctx, sql)
	if !write {
		return t.Tx.Exec(ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	_, err := t.seam(ctx, step, func() (err error) {
		tag, err = t.Tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

func (t *writeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sql, step, write := t.statement(ctx, sql)
	if !write {
		return t.Tx.Query(ctx, sql, args...)
	}
	var rows pgx.Rows
	planned, err := t.seam(ctx, step, func() (err error) {
		rows, err = t.Tx.Query(ctx, sql, args...)
		return err
	})
	if planned {
		return noRows{}, nil
	}
	return rows, err
}

func (t *writeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sql, step, write := t.statement(ctx, sql)
	if !write {
		return t.Tx.QueryRow(ctx, sql, args...)
	}
	var row pgx.Row
	planned, _ := t.seam(ctx, step, func() error {
		row = t.Tx.QueryRow(ctx, sql, args...)
		return nil // a row's error comes with Scan
	})
	if planned {
		return noRows{}
	}
	return row
}

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

// actionMachine is the machine of the mutation in progress, a step's target ("" for none).
func actionMachine(ctx context.Context) string {
	if a := audit.ActionFrom(ctx); a != nil {
		return a.Machine
	}
	return ""
}
