package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/auditlog"
)

// appendAuditEvent takes the lock every audit insert takes, held to commit (see
// insertAudit), and writes e as the next leaf of the audit log: the row with its leaf
// index and hash, the tree hashes it completes and the tree's new right edge
// (audit_tree_state), in tx. The state is read after the lock was granted, so replicas
// append to one tree and never fork it; an append costs the two round trips an audit
// insert always took (the lock and the read in one batch, then the writes in another)
// and O(log n) hashing.
func appendAuditEvent(ctx context.Context, tx pgx.Tx, e audit.Event) (int64, error) {
	// The record's JSON as the database will hold it (jsonb's text is canonical), its id
	// and time, and the tree's state.
	r := auditlog.Record{Actor: e.Actor, Action: e.Action, Machine: e.Machine, Outcome: string(e.Outcome),
		Error: e.Error, RequestID: e.RequestID}
	var n int64
	var edge [][]byte
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, 0)`, auditOrderLock)
	b.Queue(`SELECT nextval(pg_get_serial_sequence('audit_events', 'id')), now(),
		coalesce($1::jsonb, '{}')::text, coalesce($2::jsonb, '{}')::text, s.size, s.frontier
		FROM audit_tree_state s`, e.Parameters, e.Details).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.ID, &r.At, &r.Parameters, &r.Details, &n, &edge)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, errors.New("the audit log's state (audit_tree_state) is missing: it was deleted in the database; run `apelora audit verify`")
		}
		return 0, err
	}
	hashes := make([]tlog.Hash, len(edge))
	for i, h := range edge {
		if len(h) != tlog.HashSize {
			return 0, fmt.Errorf("the audit log's state holds a hash of %d bytes: it was changed in the database; run `apelora audit verify`", len(h))
		}
		hashes[i] = tlog.Hash(h)
	}
	f, err := auditlog.FrontierOf(n, hashes)
	if err != nil {
		return 0, fmt.Errorf("the audit log's state was changed in the database (%v); run `apelora audit verify`", err)
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
	w.Queue(`UPDATE audit_tree_state SET size = $1, frontier = $2`, n+1, hashBytes(f.Hashes()))
	return r.ID, tx.SendBatch(ctx, w).Close()
}

func hashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
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

// AuditTreeSize is the number of leaves committed.
func (s *Store) AuditTreeSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(leaf_index) + 1, 0) FROM audit_events`).Scan(&n)
	return n, dbError(err)
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
	if _, err := tx.Exec(ctx, `INSERT INTO audit_tree_state (size, frontier) VALUES ($1, $2)`, f.Size(), hashBytes(f.Hashes())); err != nil {
		return err
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
