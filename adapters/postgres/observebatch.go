package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tracer sees the statements of a batch (a pipeline: the audit log's append sends
// its statements that way) as it sees single ones: each is one statement for the
// observer, timed from when the batch was sent or the previous statement's answer came
// back. (A dry run's change runs READ ONLY and writes no audit event, so no batch of it
// writes: PostgreSQL would refuse it.)

type batchKey struct{}

type batchTrace struct{ last time.Time }

func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &batchTrace{last: time.Now()})
}

func (t *tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	b, _ := ctx.Value(batchKey{}).(*batchTrace)
	o := t.obs.Load()
	if o == nil || b == nil {
		return
	}
	now := time.Now()
	(*o).Statement(StatementName(data.SQL), now.Sub(b.last), data.Err)
	b.last = now
}

func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
