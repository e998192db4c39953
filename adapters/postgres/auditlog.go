package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/auditlog"
)

// auditEdge is the audit tree's right edge as this process last wrote it: the tree's size,
// the last tree hash its append stored and its frontier. An append uses it only when the
// tree hashes in the database still end with that hash, read under the audit order lock:
// that hash covers the last leaf, whose hash covers the event's id, which no other event
// has, so a match means this process's own last append committed on top of the frontier it
// had; anything else (another replica appended, or the append rolled back) restores the
// frontier from the stored tree hashes instead. This replaces a state row every append had
// to read and rewrite. The size is taken from the tree hashes, not from audit_events, so
// rows deleted from audit_events in the database leave the tree appendable (and `apelora
// audit verify` names them).
type auditEdge struct {
	mu  sync.Mutex
	n   int64
	top tlog.Hash
	f   *auditlog.Frontier // nil until the first append
}

// appendAuditEvent takes the lock every audit insert takes, held to commit (see
// insertAudit), and writes e as the next leaf of the audit log: the row with its leaf
// index and hash and the tree hashes it completes, in tx. The tree's last stored hash is
// read after the lock was granted, so replicas append to one tree and never fork it; an
// append costs the two round trips an audit insert always took (the lock and the read in
// one batch, then the writes in another) and O(log n) hashing, plus one read of O(log n)
// stored hashes when edge is not the database's (see auditEdge).
func appendAuditEvent(ctx context.Context, tx pgx.Tx, edge *auditEdge, e audit.Event) (int64, error) {
	// The record's JSON as the database will hold it (jsonb's text is canonical), its id
	// and time, and the tree's last stored hash.
	r := auditlog.Record{Actor: e.Actor, Action: e.Action, Machine: e.Machine, Outcome: string(e.Outcome),
		Error: e.Error, RequestID: e.RequestID}
	var topIndex *int64
	var topHash []byte
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, 0)`, auditOrderLock)
	b.Queue(`SELECT nextval(pg_get_serial_sequence('audit_events', 'id')), now(),
		coalesce($1::jsonb, '{}')::text, coalesce($2::jsonb, '{}')::text, t.storage_index, t.hash
		FROM (SELECT) AS one LEFT JOIN LATERAL (SELECT storage_index, hash FROM audit_tree_hashes
			ORDER BY storage_index DESC LIMIT 1) AS t ON true`, e.Parameters, e.Details).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.ID, &r.At, &r.Parameters, &r.Details, &topIndex, &topHash)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	var n int64
	var top tlog.Hash
	if topIndex != nil {
		var err error
		if n, err = auditlog.SizeOfStoredHashes(*topIndex + 1); err != nil {
			return 0, fmt.Errorf("the audit log's tree hashes were changed in the database (%v); run `apelora audit verify`", err)
		}
		if len(topHash) != tlog.HashSize {
			return 0, fmt.Errorf("audit tree hash %d is %d bytes: it was changed in the database; run `apelora audit verify`", *topIndex, len(topHash))
		}
		top = tlog.Hash(topHash)
	}
	f, err := edge.frontier(ctx, tx, n, top)
	if err != nil {
		return 0, err
	}
	leaf := r.LeafHash()
	stored := f.Add(leaf, nil)
	first := tlog.StoredHashIndex(0, n)
	indexes, values := make([]int64, len(stored)), make([][]byte, len(stored))
	for i := range stored {
		indexes[i], values[i] = first+int64(i), stored[i][:]
	}
	w := &pgx.Batch{}
	w.Queue(`INSERT INTO audit_events (id, at, actor, action, machine, parameters, outcome, error, request_id, details, leaf_index, leaf_hash)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6::jsonb, $7, nullif($8, ''), $9, $10::jsonb, $11, $12)`,
		r.ID, r.At, r.Actor, r.Action, r.Machine, r.Parameters, r.Outcome, r.Error, r.RequestID, r.Details, n, leaf[:])
	w.Queue(`INSERT INTO audit_tree_hashes (storage_index, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[])`, indexes, values)
	if err := tx.SendBatch(ctx, w).Close(); err != nil {
		return 0, err
	}
	edge.mu.Lock()
	edge.n, edge.top, edge.f = n+1, stored[len(stored)-1], f
	edge.mu.Unlock()
	return r.ID, nil
}

// frontier is the frontier of the tree of n leaves whose last stored hash is top: a copy
// of the kept one when it is of that tree, else read from the stored tree hashes in tx.
func (edge *auditEdge) frontier(ctx context.Context, tx pgx.Tx, n int64, top tlog.Hash) (*auditlog.Frontier, error) {
	edge.mu.Lock()
	kept := edge.f
	if kept != nil && (edge.n != n || edge.top != top) {
		kept = nil
	}
	edge.mu.Unlock()
	if kept != nil {
		return auditlog.FrontierOf(kept.Size(), kept.Hashes())
	}
	hashes, err := readTreeHashes(ctx, tx, auditlog.FrontierIndexes(n))
	if err != nil {
		return nil, err
	}
	return auditlog.FrontierOf(n, hashes)
}

// readTreeHashes reads stored hashes by storage index, in the order asked.
func readTreeHashes(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT storage_index, hash FROM audit_tree_hashes WHERE storage_index = ANY($1)`, indexes)
	if err != nil {
		return nil, err
	}
	byIndex := make(map[int64]tlog.Hash, len(indexes))
	var i int64
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&i, &b}, func() error {
		if len(b) != tlog.HashSize {
			return fmt.Errorf("audit tree hash %d is %d bytes, not %d", i, len(b), tlog.HashSize)
		}
		byIndex[i] = tlog.Hash(b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for k, idx := range indexes {
		h, ok := byIndex[idx]
		if !ok {
			return nil, fmt.Errorf("audit tree hash %d is missing: run `apelora audit verify` to find what was removed", idx)
		}
		out[k] = h
	}
	return out, nil
}

// AuditTreeSize is the number of leaves committed: as an append takes it, from the tree
// hashes (see auditEdge), so rows deleted from audit_events do not shrink the tree a
// checkpoint signs.
func (s *Store) AuditTreeSize(ctx context.Context) (int64, error) {
	var count int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(storage_index) + 1, 0) FROM audit_tree_hashes`).Scan(&count)
	if err != nil {
		return 0, dbError(err)
	}
	n, err := auditlog.SizeOfStoredHashes(count)
	if err != nil {
		return 0, fmt.Errorf("the audit log's tree hashes were changed in the database (%v); run `apelora audit verify`", err)
	}
	return n, nil
}

// AuditTreeHashes reads stored tree hashes by storage index.
func (s *Store) AuditTreeHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	out, err := readTreeHashes(ctx, s.pool, indexes)
	return out, dbError(err)
}

// AuditLeaf is event id's leaf index and hash.
func (s *Store) AuditLeaf(ctx context.Context, id int64) (int64, tlog.Hash, bool, error) {
	var index *int64
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT leaf_index, leaf_hash FROM audit_events WHERE id = $1`, id).Scan(&index, &b)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, tlog.Hash{}, false, nil
	}
	if err != nil {
		return 0, tlog.Hash{}, false, dbError(err)
	}
	if index == nil || len(b) != tlog.HashSize {
		return 0, tlog.Hash{}, true, fmt.Errorf("audit event %d has no leaf in the audit log: it was not recorded by Apelora; run `apelora audit verify`", id)
	}
	return *index, tlog.Hash(b), true, nil
}

const checkpointColumns = `tree_size, root_hash, signed, signed_at`

func scanCheckpoint(row pgx.Row) (auditlog.Checkpoint, error) {
	var c auditlog.Checkpoint
	var root []byte
	if err := row.Scan(&c.Size, &root, &c.Signed, &c.At); err != nil {
		return c, err
	}
	if len(root) != tlog.HashSize {
		return c, fmt.Errorf("audit checkpoint %d's root hash is %d bytes, not %d", c.Size, len(root), tlog.HashSize)
	}
	c.Root = tlog.Hash(root)
	return c, nil
}

// LatestAuditCheckpoint is the checkpoint of the largest tree, or nil.
func (s *Store) LatestAuditCheckpoint(ctx context.Context) (*auditlog.Checkpoint, error) {
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM audit_checkpoints ORDER BY tree_size DESC LIMIT 1`))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &c, nil
}

// AddAuditCheckpoint keeps c, unless one of its size is kept already.
func (s *Store) AddAuditCheckpoint(ctx context.Context, c auditlog.Checkpoint) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_checkpoints (tree_size, root_hash, signed, signed_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tree_size) DO NOTHING`, c.Size, c.Root[:], c.Signed, c.At)
	return dbError(err)
}

// backfillAuditLog gives the rows written before migration 0010 their leaves, in id order,
// in the migration's transaction: a page of rows at a time, the tree's right edge in
// memory, so any number of rows takes the same memory.
func backfillAuditLog(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`); err != nil {
		return err
	}
	const page = 10000
	var f auditlog.Frontier
	var stored []tlog.Hash
	var after int64
	for {
		rows, err := tx.Query(ctx, `SELECT `+leafRecordColumns+` FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2`, after, page)
		if err != nil {
			return err
		}
		var ids, leafIndexes, treeIndexes []int64
		var leafHashes, treeHashes [][]byte
		var r auditlog.Record
		_, err = pgx.ForEachRow(rows, leafRecordFields(&r), func() error {
			n := f.Size()
			h := r.LeafHash()
			ids, leafIndexes, leafHashes = append(ids, r.ID), append(leafIndexes, n), append(leafHashes, h[:])
			stored = f.Add(h, stored)
			for i, sh := range stored {
				treeIndexes, treeHashes = append(treeIndexes, tlog.StoredHashIndex(0, n)+int64(i)), append(treeHashes, append([]byte(nil), sh[:]...))
			}
			after = r.ID
			return nil
		})
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			break
		}
		if _, err := tx.Exec(ctx, `UPDATE audit_events e SET leaf_index = l.leaf_index, leaf_hash = l.leaf_hash
			FROM unnest($1::bigint[], $2::bigint[], $3::bytea[]) AS l (id, leaf_index, leaf_hash) WHERE e.id = l.id`,
			ids, leafIndexes, leafHashes); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_tree_hashes (storage_index, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[])`,
			treeIndexes, treeHashes); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only`)
	return err
}

// leafRecordColumns are the columns of an auditlog.Record (the leaf), read into leafRecordFields.
const leafRecordColumns = `id, at, actor, action, coalesce(machine, ''), outcome, coalesce(error, ''), request_id, parameters::text, details::text`

func leafRecordFields(r *auditlog.Record) []any {
	return []any{&r.ID, &r.At, &r.Actor, &r.Action, &r.Machine, &r.Outcome, &r.Error, &r.RequestID, &r.Parameters, &r.Details}
}

// AuditSnapshot is one consistent view of the audit log for `apelora audit verify`: three
// read-only transactions on one exported snapshot, so the events, the tree hashes and the
// checkpoints are streamed side by side and agree with each other while the trail grows.
type AuditSnapshot struct {
	conns []*pgxpool.Conn
	txs   []pgx.Tx
}

var _ auditlog.Snapshot = (*AuditSnapshot)(nil)

// AuditSnapshot opens a snapshot of the audit log; Close it.
func (s *Store) AuditSnapshot(ctx context.Context) (_ *AuditSnapshot, err error) {
	a := &AuditSnapshot{}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	var id string
	for i := range 3 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, unavailable(err)
		}
		a.conns = append(a.conns, c)
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return nil, dbError(err)
		}
		a.txs = append(a.txs, tx)
		if i == 0 {
			err = tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&id)
		} else {
			_, err = tx.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+id+`'`) // id is PostgreSQL's own text
		}
		if err != nil {
			return nil, dbError(err)
		}
	}
	return a, nil
}

// Close ends the snapshot's transactions and gives back their connections.
func (a *AuditSnapshot) Close() {
	for _, tx := range a.txs {
		_ = tx.Rollback(context.Background())
	}
	for _, c := range a.conns {
		c.Release()
	}
}

// stream yields each row of a query scanned by scan.
func stream[T any](ctx context.Context, tx pgx.Tx, sql string, scan func(pgx.Rows) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := tx.Query(ctx, sql)
		if err != nil {
			yield(zero, dbError(err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				yield(zero, dbError(err))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(zero, dbError(err))
		}
	}
}

// Events streams every audit event in id order.
func (a *AuditSnapshot) Events(ctx context.Context) iter.Seq2[auditlog.StoredEvent, error] {
	var e auditlog.StoredEvent
	var index *int64
	var hash []byte
	dest := append(leafRecordFields(&e.Record), &index, &hash)
	return stream(ctx, a.txs[0], `SELECT `+leafRecordColumns+`, leaf_index, leaf_hash FROM audit_events ORDER BY id`,
		func(rows pgx.Rows) (auditlog.StoredEvent, error) {
			if err := rows.Scan(dest...); err != nil {
				return e, err
			}
			e.HasLeaf = index != nil && len(hash) == tlog.HashSize
			e.LeafIndex, e.LeafHash = 0, tlog.Hash{}
			if e.HasLeaf {
				e.LeafIndex, e.LeafHash = *index, tlog.Hash(hash)
			}
			return e, nil
		})
}

// TreeHashes streams the tree's stored hashes in storage index order.
func (a *AuditSnapshot) TreeHashes(ctx context.Context) iter.Seq2[auditlog.StoredHash, error] {
	return stream(ctx, a.txs[1], `SELECT storage_index, hash FROM audit_tree_hashes ORDER BY storage_index`,
		func(rows pgx.Rows) (auditlog.StoredHash, error) {
			var h auditlog.StoredHash
			var b []byte
			if err := rows.Scan(&h.Index, &b); err != nil {
				return h, err
			}
			if len(b) != tlog.HashSize {
				return h, fmt.Errorf("audit tree hash %d is %d bytes, not %d", h.Index, len(b), tlog.HashSize)
			}
			h.Hash = tlog.Hash(b)
			return h, nil
		})
}

// Checkpoints streams the checkpoints, smallest tree first.
func (a *AuditSnapshot) Checkpoints(ctx context.Context) iter.Seq2[auditlog.Checkpoint, error] {
	return stream(ctx, a.txs[2], `SELECT `+checkpointColumns+` FROM audit_checkpoints ORDER BY tree_size`,
		func(rows pgx.Rows) (auditlog.Checkpoint, error) { return scanCheckpoint(rows) })
}

// afterMigration are steps that run in a migration's transaction after its SQL: work
// SQL cannot do, such as hashing rows the way the Go code does.
var afterMigration = map[int]func(context.Context, pgx.Tx) error{
	10: backfillAuditLog,
}
