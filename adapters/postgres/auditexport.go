package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/auditexport"
	"github.com/apelora/fabric/auditlog"
)

// auditExportLockNamespace holds one session-level lock per export sink (the second key
// is a hash of the sink's name), so one replica exports to a sink at a time.
const auditExportLockNamespace = lockNamespace + 5

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

// AuditExportLeadership hands out the export sinks' locks, as DriftLeadership does the
// drift watcher's: a session-level advisory lock per sink on a connection of its own. Not
// safe for concurrent use: make one per exporter.
func (s *Store) AuditExportLeadership(application string) auditexport.Leadership {
	return &exportLeadership{s: s, application: application}
}

type exportLeadership struct {
	s           *Store
	application string
	conn        *pgx.Conn
}

func sinkLockKey(sink string) int {
	h := fnv.New32a()
	h.Write([]byte(sink))
	return int(int32(h.Sum32()))
}

func (l *exportLeadership) TryLead(ctx context.Context, sink string) (auditexport.Progress, error) {
	key := sinkLockKey(sink)
	conn, got, err := l.s.tryLock(ctx, l.conn, l.application, auditExportLockNamespace, key)
	l.conn = nil
	if err != nil || !got {
		l.conn = conn
		return nil, err
	}
	return &exportProgress{conn: conn, sink: sink, key: key}, nil
}

// exportProgress is the leading exporter's connection: the sink's position is read and
// moved on it, so a replica that lost the lock moves nothing.
type exportProgress struct {
	conn *pgx.Conn
	sink string
	key  int
}

func (p *exportProgress) Check(ctx context.Context) error {
	return lockHeld(ctx, p.conn, auditExportLockNamespace, p.key)
}

func (p *exportProgress) Next(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderConnTimeout)
	defer cancel()
	var next int64
	err := p.conn.QueryRow(ctx, `SELECT next_leaf FROM audit_export_progress WHERE sink = $1`, p.sink).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return next, dbError(err)
}

// Acknowledge moves the sink's position to next; it never moves back.
func (p *exportProgress) Acknowledge(ctx context.Context, next int64) error {
	ctx, cancel := context.WithTimeout(ctx, leaderConnTimeout)
	defer cancel()
	_, err := p.conn.Exec(ctx, `INSERT INTO audit_export_progress (sink, next_leaf) VALUES ($1, $2)
		ON CONFLICT (sink) DO UPDATE SET next_leaf = greatest(audit_export_progress.next_leaf, EXCLUDED.next_leaf), acknowledged_at = now()`,
		p.sink, next)
	return dbError(err)
}

func (p *exportProgress) Close() { releaseLock(p.conn) }

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
