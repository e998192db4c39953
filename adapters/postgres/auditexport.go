package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditexport"
	"github.com/apelora/fabric/domain/auditlog"
)

// AuditLeavesFrom reads up to limit events from leaf index from on, in leaf order. Leaves
// become visible in index order (insertAudit's lock is held to the commit), so a reader
// never sees a leaf before the ones under it.
func (s *Store) AuditLeavesFrom(ctx context.Context, from int64, limit int) ([]auditlog.StoredEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+leafRecordColumns+`, leaf_index, leaf_hash FROM audit_events
		WHERE leaf_index >= $1 ORDER BY leaf_index LIMIT $2`, from, limit)
	if err != nil {
		return nil, dbError(err)
	}
	var out []auditlog.StoredEvent
	var e auditlog.StoredEvent
	var hash []byte
	_, err = pgx.ForEachRow(rows, append(leafRecordFields(&e.Record), &e.LeafIndex, &hash), func() error {
		if len(hash) != tlog.HashSize {
			return fmt.Errorf("audit event %d's leaf hash is %d bytes: it was changed in the database; run `apelora audit verify`", e.ID, len(hash))
		}
		e.HasLeaf, e.LeafHash = true, tlog.Hash(hash)
		out = append(out, e)
		return nil
	})
	return out, dbError(err)
}

// AuditExportLeadership hands out one sink's lease (role "audit export <sink>", see
// lease.go), as DriftLeadership does the drift watcher's: one replica exports to a sink at
// a time, and a replica whose lease ended moves the sink's position no more. Make one per
// exporter: a standby keeps its connection between attempts, and TryLead is not safe for
// concurrent use.
func (s *Store) AuditExportLeadership(holder string, length time.Duration) auditexport.Leadership {
	return &exportLeadership{s: s, holder: holder, ttl: length}
}

type exportLeadership struct {
	s      *Store
	holder string
	ttl    time.Duration
	l      *candidate // the sink's, once TryLead named it
}

// auditExportRole is a sink's row in leader_leases.
func auditExportRole(sink string) string { return "audit export " + sink }

func (e *exportLeadership) TryLead(ctx context.Context, sink string) (auditexport.Progress, error) {
	if e.l == nil || e.l.role != auditExportRole(sink) {
		e.l = &candidate{s: e.s, role: auditExportRole(sink), holder: e.holder, ttl: e.ttl}
	}
	lease, err := e.l.take(ctx)
	if err != nil || lease == nil {
		return nil, err
	}
	return &exportProgress{leaderLease: lease, sink: sink}, nil
}

// exportProgress is the leading exporter's lease: the sink's position is read on its
// connection and moved only in a transaction that checks the lease's epoch.
type exportProgress struct {
	*leaderLease
	sink string
}

func (p *exportProgress) Next(ctx context.Context) (int64, error) {
	ctx, done, err := p.use(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var next int64
	err = p.conn.QueryRow(ctx, `SELECT next_leaf FROM audit_export_progress WHERE sink = $1`, p.sink).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return next, dbError(err)
}

// Acknowledge moves the sink's position to next; it never moves back.
func (p *exportProgress) Acknowledge(ctx context.Context, next int64) error {
	return p.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO audit_export_progress (sink, next_leaf) VALUES ($1, $2)
			ON CONFLICT (sink) DO UPDATE SET next_leaf = greatest(audit_export_progress.next_leaf, EXCLUDED.next_leaf), acknowledged_at = now()`,
			p.sink, next)
		return dbError(err)
	})
}

// AuditExportProgress is every sink's next leaf to send, by sink name.
func (s *Store) AuditExportProgress(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT sink, next_leaf FROM audit_export_progress`)
	if err != nil {
		return nil, dbError(err)
	}
	out := map[string]int64{}
	var sink string
	var next int64
	_, err = pgx.ForEachRow(rows, []any{&sink, &next}, func() error { out[sink] = next; return nil })
	return out, dbError(err)
}
