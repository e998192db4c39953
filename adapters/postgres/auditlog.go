package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditlog"
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
// index, its leaf hash and its seal (the sealer's MAC of the tree head the leaf ends), and
// the tree hashes it completes, in tx. The tree's last stored hash is read after the lock
// was granted, so replicas append to one tree and never fork it; an append costs the two
// round trips an audit insert always took (the lock and the read in one batch, then the
// writes in another) and O(log n) hashing, plus one read of O(log n) stored hashes when
// edge is not the database's (see auditEdge). Without a sealer it writes nothing: an event
// that cannot be sealed is refused, and so is the change it records. A stored tree that
// does not allow the next leaf is an *auditlog.Damage that says so. The head the append
// makes is handed to the witness once its transaction commits (see auditCommits).
func appendAuditEvent(ctx context.Context, tx pgx.Tx, edge *auditEdge, sealer *auditlog.Sealer, commits *auditCommits, e audit.Event) (int64, error) {
	if sealer == nil {
		return 0, auditlog.NoKeyDamage
	}
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
			return 0, auditlog.TreeDamage("%v", err)
		}
		if len(topHash) != tlog.HashSize {
			return 0, auditlog.TreeDamage("tree hash %d is %d bytes", *topIndex, len(topHash))
		}
		top = tlog.Hash(topHash)
	}
	f, err := edge.frontier(ctx, tx, n, top)
	if err != nil {
		return 0, err
	}
	leaf := r.LeafHash()
	stored := f.Add(leaf, nil)
	head := auditlog.Head{Size: n + 1, Root: f.Root(), At: r.At}
	seal := sealer.Seal(head)
	first := tlog.StoredHashIndex(0, n)
	indexes, values := make([]int64, len(stored)), make([][]byte, len(stored))
	for i := range stored {
		indexes[i], values[i] = first+int64(i), stored[i][:]
	}
	w := &pgx.Batch{}
	w.Queue(`INSERT INTO audit_events (id, at, actor, action, machine, parameters, outcome, error, request_id, details, leaf_index, leaf_hash, seal)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6::jsonb, $7, nullif($8, ''), $9, $10::jsonb, $11, $12, $13)`,
		r.ID, r.At, r.Actor, r.Action, r.Machine, r.Parameters, r.Outcome, r.Error, r.RequestID, r.Details, n, leaf[:], seal)
	w.Queue(`INSERT INTO audit_tree_hashes (storage_index, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[])`, indexes, values)
	if err := tx.SendBatch(ctx, w).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" &&
			(pgErr.ConstraintName == "audit_events_leaf_index_key" || pgErr.ConstraintName == "audit_tree_hashes_pkey") {
			return 0, auditlog.TreeDamage("leaf %d, or a tree hash it completes, is stored already: tree hashes were removed, or events added, in the database", n)
		}
		return 0, err
	}
	edge.mu.Lock()
	edge.n, edge.top, edge.f = n+1, stored[len(stored)-1], f
	edge.mu.Unlock()
	commits.pending(tx.Conn(), head)
	return r.ID, nil
}

// auditCommits hands the witness each head an append made, once the append's transaction
// has committed: an append happens inside a change whose commit is the caller's, so the
// head waits beside the transaction's connection until the store's tracer sees that
// connection's COMMIT succeed (or its ROLLBACK, which drops it). A head is never witnessed
// for an event that did not commit, so a rolled-back append is no false alarm; a commit
// whose answer was lost (the connection broke) is not witnessed either.
type auditCommits struct {
	heads   sync.Map // *pgx.Conn → auditlog.Head
	count   atomic.Int64
	witness func(auditlog.Head)
}

func (c *auditCommits) pending(conn *pgx.Conn, h auditlog.Head) {
	if c == nil || c.witness == nil || conn == nil {
		return
	}
	// A connection that broke mid-transaction never says commit or rollback: its head
	// stays behind. Forget them all now and then (an append in flight then goes
	// unwitnessed, which only weakens the witness).
	if c.count.Add(1)%4096 == 0 {
		c.heads.Clear()
	}
	c.heads.Store(conn, h)
}

// ended is the tracer's: conn ran sql ("commit" or "rollback") with the tag and error given.
func (c *auditCommits) ended(conn *pgx.Conn, sql string, tag pgconn.CommandTag, err error) {
	if c == nil || c.witness == nil || (sql != "commit" && sql != "rollback") {
		return
	}
	v, ok := c.heads.LoadAndDelete(conn)
	if ok && sql == "commit" && err == nil && tag.String() == "COMMIT" {
		c.witness(v.(auditlog.Head))
	}
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
	f, err := auditlog.FrontierOf(n, hashes)
	if err != nil {
		return nil, auditlog.TreeDamage("%v", err)
	}
	return f, nil
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
			return auditlog.TreeDamage("tree hash %d is %d bytes, not %d", i, len(b), tlog.HashSize)
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
			return nil, auditlog.TreeDamage("tree hash %d is missing", idx)
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
		return 0, auditlog.TreeDamage("%v", err)
	}
	return n, nil
}

// AuditTreeHashes reads stored tree hashes by storage index.
func (s *Store) AuditTreeHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	out, err := readTreeHashes(ctx, s.pool, indexes)
	return out, auditError(err)
}

// auditError is dbError, keeping an *auditlog.Damage as it is (the audit log's readers
// tell it apart from a failure to read).
func auditError(err error) error {
	var d *auditlog.Damage
	if errors.As(err, &d) {
		return err
	}
	return dbError(err)
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

// LatestAuditCheckpoint is the checkpoint row of the largest tree, or nil, whoever
// signed it: the audit log's readers keep only the ones its key verifies
// (auditlog.Service.Latest).
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

// AuditCheckpoints reads up to limit checkpoint rows of tree sizes from minSize to
// maxSize, largest first when newestFirst.
func (s *Store) AuditCheckpoints(ctx context.Context, minSize, maxSize int64, limit int, newestFirst bool) ([]auditlog.Checkpoint, error) {
	order := "ASC"
	if newestFirst {
		order = "DESC"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+checkpointColumns+` FROM audit_checkpoints WHERE tree_size BETWEEN $1 AND $2
		ORDER BY tree_size `+order+`, signed_at LIMIT $3`, minSize, maxSize, limit)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auditlog.Checkpoint, error) { return scanCheckpoint(row) })
	return out, dbError(err)
}

// AddAuditCheckpoint keeps c, unless the same one is kept already. A row of the same size
// with another text (not signed by the audit key) does not keep it out.
func (s *Store) AddAuditCheckpoint(ctx context.Context, c auditlog.Checkpoint) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_checkpoints (tree_size, root_hash, signed, signed_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, c.Size, c.Root[:], c.Signed, c.At)
	return dbError(err)
}

// SealAuditWith makes the store seal every event it appends with sealer; until then (or
// with nil) every append is refused: an event that cannot be sealed is not written.
func (s *Store) SealAuditWith(sealer *auditlog.Sealer) { s.sealer.Store(sealer) }

// SealsAudit says whether the store holds a sealer: without one every append is refused.
func (s *Store) SealsAudit() bool { return s.sealer.Load() != nil }

// OnAuditAppended has witness told each head an append of this store committed (nil:
// nobody). It is called on the committing goroutine: it must be quick.
func (s *Store) OnAuditAppended(witness func(auditlog.Head)) {
	if witness == nil {
		s.tracer.commits.Store(nil)
		return
	}
	s.tracer.commits.Store(&auditCommits{witness: witness})
}

// noteAppend keeps whether the latest append (or appendability check) found the stored
// tree unable to take the next event.
func (s *Store) noteAppend(err error) {
	var d *auditlog.Damage
	switch {
	case err == nil:
		s.appendDamage.Store(nil)
	case errors.As(err, &d):
		s.appendDamage.Store(d)
	}
}

// AuditAppendDamage is what stopped the latest append (or check) of this process, or nil:
// kept in memory, so asking costs nothing. AuditAppendable asks the database again.
func (s *Store) AuditAppendDamage() error {
	if d := s.appendDamage.Load(); d != nil {
		return d
	}
	return nil
}

// AuditAppendable is nil when the next event can be appended: this process holds the
// audit key, the tree hashes end where an append ends, the hashes the next append extends
// are there, and no event already holds the next leaf index. Otherwise an
// *auditlog.Damage says what is wrong (every append fails until it is repaired).
func (s *Store) AuditAppendable(ctx context.Context) (err error) {
	if s.sealer.Load() == nil {
		s.noteAppend(auditlog.NoKeyDamage)
		return auditlog.NoKeyDamage
	}
	defer func() { s.noteAppend(err) }()
	var top, maxLeaf *int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT max(storage_index) FROM audit_tree_hashes), (SELECT max(leaf_index) FROM audit_events)`).
		Scan(&top, &maxLeaf); err != nil {
		return dbError(err)
	}
	var n int64
	if top != nil {
		if n, err = auditlog.SizeOfStoredHashes(*top + 1); err != nil {
			return auditlog.TreeDamage("%v", err)
		}
	}
	if maxLeaf != nil && *maxLeaf >= n {
		return auditlog.TreeDamage("an event holds leaf %d but the stored tree ends at %d leaves: tree hashes were removed, or events added", *maxLeaf, n)
	}
	if _, err := readTreeHashes(ctx, s.pool, auditlog.FrontierIndexes(n)); err != nil {
		return auditError(err)
	}
	return nil
}

// AuditTip reads the stored tree's size, its frontier and last leaf, and the event with
// the highest leaf index, in one read-only snapshot.
func (s *Store) AuditTip(ctx context.Context) (auditlog.Tip, error) {
	var tip auditlog.Tip
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return tip, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var top *int64
	if err := tx.QueryRow(ctx, `SELECT max(storage_index) FROM audit_tree_hashes`).Scan(&top); err != nil {
		return tip, dbError(err)
	}
	if top != nil {
		if tip.Size, err = auditlog.SizeOfStoredHashes(*top + 1); err != nil {
			return tip, auditlog.TreeDamage("%v", err)
		}
	}
	var e auditlog.StoredEvent
	var index *int64
	var hash []byte
	err = tx.QueryRow(ctx, `SELECT `+leafRecordColumns+`, leaf_index, leaf_hash, seal FROM audit_events
		WHERE leaf_index IS NOT NULL ORDER BY leaf_index DESC LIMIT 1`).Scan(append(leafRecordFields(&e.Record), &index, &hash, &e.Seal)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return tip, dbError(err)
	default:
		e.HasLeaf, e.LeafIndex = true, *index
		if len(hash) == tlog.HashSize {
			e.LeafHash = tlog.Hash(hash)
		}
		tip.Newest = &e
	}
	if tip.Size > 0 {
		indexes := append(auditlog.FrontierIndexes(tip.Size), tlog.StoredHashIndex(0, tip.Size-1))
		hashes, err := readTreeHashes(ctx, tx, indexes)
		if err != nil {
			return tip, auditError(err)
		}
		tip.Frontier, tip.LastLeaf = hashes[:len(hashes)-1], hashes[len(hashes)-1]
	}
	return tip, nil
}

// OpenAuditSnapshot is AuditSnapshot as the audit log's checks take it.
func (s *Store) OpenAuditSnapshot(ctx context.Context) (auditlog.ClosingSnapshot, error) {
	snap, err := s.AuditSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// SealAuditBacklog seals the events recorded before sealing existed (migration 0020), in
// leaf order, with sealer: once, on a trail none of whose events is sealed yet (a trail with
// any sealed event has every unsealed one named by `apelora audit verify`, never sealed
// after the fact). It first checks what it seals: leaves 0 to n-1 in order, each event's
// contents giving its leaf hash, and the leaves giving the stored tree's root; it refuses
// a trail that does not, naming why. It holds the audit order lock throughout, so no event
// is appended meanwhile. It returns how many events it sealed.
func (s *Store) SealAuditBacklog(ctx context.Context, sealer *auditlog.Sealer) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The newest event tells: sealed (any start after the upgrade's), or none at all.
	var newest []byte
	var some bool
	if err := tx.QueryRow(ctx, `SELECT pg_advisory_xact_lock($1, 0), (SELECT seal FROM audit_events ORDER BY id DESC LIMIT 1),
		EXISTS (SELECT 1 FROM audit_events)`, auditOrderLock).Scan(nil, &newest, &some); err != nil {
		return 0, dbError(err)
	}
	if newest != nil || !some {
		return 0, nil
	}
	var sealed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM audit_events WHERE seal IS NOT NULL)`).Scan(&sealed); err != nil {
		return 0, dbError(err)
	}
	if sealed {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`); err != nil {
		return 0, dbError(err)
	}
	const page = 10000
	var f auditlog.Frontier
	var after int64 = -1
	for {
		rows, err := tx.Query(ctx, `SELECT `+leafRecordColumns+`, leaf_index, leaf_hash FROM audit_events
			WHERE leaf_index > $1 ORDER BY leaf_index LIMIT $2`, after, page)
		if err != nil {
			return 0, dbError(err)
		}
		var ids []int64
		var seals [][]byte
		var r auditlog.Record
		var index int64
		var hash []byte
		_, err = pgx.ForEachRow(rows, append(leafRecordFields(&r), &index, &hash), func() error {
			if index != f.Size() {
				return fmt.Errorf("event %d is leaf %d where leaf %d was expected", r.ID, index, f.Size())
			}
			h := r.LeafHash()
			if len(hash) != tlog.HashSize || tlog.Hash(hash) != h {
				return fmt.Errorf("event %d does not match its leaf hash", r.ID)
			}
			f.Add(h, nil)
			ids, seals = append(ids, r.ID), append(seals, sealer.Seal(auditlog.Head{Size: f.Size(), Root: f.Root()}))
			after = index
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("the audit events recorded before sealing were not sealed, because the trail does not verify (%w): run `apelora audit verify`", err)
		}
		if len(ids) == 0 {
			break
		}
		if _, err := tx.Exec(ctx, `UPDATE audit_events e SET seal = l.seal FROM unnest($1::bigint[], $2::bytea[]) AS l (id, seal) WHERE e.id = l.id`,
			ids, seals); err != nil {
			return 0, dbError(err)
		}
	}
	var left bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM audit_events WHERE seal IS NULL)`).Scan(&left); err != nil {
		return 0, dbError(err)
	}
	var top *int64
	if err := tx.QueryRow(ctx, `SELECT max(storage_index) FROM audit_tree_hashes`).Scan(&top); err != nil {
		return 0, dbError(err)
	}
	stored := int64(-1)
	if top != nil {
		stored, _ = auditlog.SizeOfStoredHashes(*top + 1)
	}
	if left || stored != f.Size() {
		return 0, fmt.Errorf("the audit events recorded before sealing were not sealed, because the trail does not verify (events without a leaf, or a stored tree of %d leaves for %d events): run `apelora audit verify`", stored, f.Size())
	}
	hashes, err := readTreeHashes(ctx, tx, auditlog.FrontierIndexes(f.Size()))
	if err != nil {
		return 0, auditError(err)
	}
	if g, err := auditlog.FrontierOf(f.Size(), hashes); err != nil || g.Root() != f.Root() {
		return 0, errors.New("the audit events recorded before sealing were not sealed, because the stored tree hashes do not match the events: run `apelora audit verify`")
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only`); err != nil {
		return 0, dbError(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, unavailable(err)
	}
	return f.Size(), nil
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
	var seal []byte
	dest := append(leafRecordFields(&e.Record), &index, &hash, &seal)
	return stream(ctx, a.txs[0], `SELECT `+leafRecordColumns+`, leaf_index, leaf_hash, seal FROM audit_events ORDER BY id`,
		func(rows pgx.Rows) (auditlog.StoredEvent, error) {
			if err := rows.Scan(dest...); err != nil {
				return e, err
			}
			e.HasLeaf = index != nil && len(hash) == tlog.HashSize
			e.LeafIndex, e.LeafHash, e.Seal = 0, tlog.Hash{}, seal
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
