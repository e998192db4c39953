package auditlog

import (
	"context"
	"fmt"
	"iter"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// StoredEvent is an audit row as the store keeps it: the record and the leaf columns
// written with it (HasLeaf false when the row has none: it was not written by Apelora).
type StoredEvent struct {
	Record
	HasLeaf   bool
	LeafIndex int64
	LeafHash  tlog.Hash
}

// StoredHash is one of the tree's stored hashes.
type StoredHash struct {
	Index int64
	Hash  tlog.Hash
}

// Snapshot is one consistent view of the trail, read as streams so that verifying needs
// the same memory for a thousand events as for a billion.
type Snapshot interface {
	// Events in id order.
	Events(ctx context.Context) iter.Seq2[StoredEvent, error]
	// TreeHashes in storage index order.
	TreeHashes(ctx context.Context) iter.Seq2[StoredHash, error]
	// Checkpoints by tree size, smallest first.
	Checkpoints(ctx context.Context) iter.Seq2[Checkpoint, error]
}

// Problem is the first thing verification found wrong. EventID is the first event it
// affects (0 when none is left to name: the trail ends before it).
type Problem struct {
	EventID int64
	Message string
}

func (p *Problem) Error() string { return p.Message }

// Report is what Verify found: how much it checked, and the problem if any.
type Report struct {
	Events      int64
	Checkpoints int
	Problem     *Problem
}

// Verify recomputes the tree from the events and checks it against the stored leaf
// columns, the stored tree hashes and every checkpoint (its signature by v, and its root).
// It stops at the first problem. The error is for a failure to read, not a finding.
func Verify(ctx context.Context, snap Snapshot, v note.Verifier) (Report, error) {
	var rep Report
	nextHash, stopHashes := iter.Pull2(snap.TreeHashes(ctx))
	defer stopHashes()
	nextCheckpoint, stopCheckpoints := iter.Pull2(snap.Checkpoints(ctx))
	defer stopCheckpoints()

	// cp is the next checkpoint to reach; badSignature holds why it cannot be trusted,
	// reported once the walk reaches its last event (the one it names).
	var cp *Checkpoint
	var badSignature error
	var prevSize int64
	advance := func() error {
		for {
			c, err, ok := nextCheckpoint()
			if !ok {
				cp = nil
				return nil
			}
			if err != nil {
				return err
			}
			if c.Size <= prevSize {
				continue // size 0, or a duplicate: nothing to check
			}
			prevSize = c.Size
			cp, badSignature = &c, nil
			tree, err := ParseCheckpoint([]byte(c.Signed), v)
			switch {
			case err != nil:
				badSignature = err
			case tree.N != c.Size || tree.Hash != c.Root:
				badSignature = fmt.Errorf("its size or root (%d, %s) differ from what its signed text states (%d, %s)", c.Size, c.Root, tree.N, tree.Hash)
			}
			return nil
		}
	}
	if err := advance(); err != nil {
		return rep, fmt.Errorf("read the audit checkpoints: %w", err)
	}

	var f Frontier
	var stored []tlog.Hash
	var lastID, lastGoodID int64
	for e, err := range snap.Events(ctx) {
		if err != nil {
			return rep, fmt.Errorf("read the audit events: %w", err)
		}
		n := f.n
		fail := func(format string, args ...any) (Report, error) {
			rep.Problem = &Problem{EventID: e.ID, Message: fmt.Sprintf("event %d: ", e.ID) + fmt.Sprintf(format, args...)}
			return rep, nil
		}
		if !e.HasLeaf {
			return fail("it has no leaf in the audit log: it was inserted directly in the database, not recorded by Apelora")
		}
		h := e.LeafHash
		if got := e.Record.LeafHash(); got != h {
			return fail("its contents do not match the leaf hash recorded with it: the row was changed after it was recorded (or rows were swapped)")
		}
		if e.LeafIndex != n {
			if e.LeafIndex > n {
				return fail("it is leaf %d where leaf %d was expected: %d event(s) before it were deleted, or rows were reordered", e.LeafIndex, n, e.LeafIndex-n)
			}
			return fail("it is leaf %d where leaf %d was expected: it was inserted, or rows were reordered", e.LeafIndex, n)
		}
		stored = f.Add(h, stored)
		for j, want := range stored {
			sh, err, ok := nextHash()
			if !ok {
				return fail("the stored tree ends before it: it was added directly in the database with leaf columns copied or made up")
			}
			if err != nil {
				return rep, fmt.Errorf("read the audit tree hashes: %w", err)
			}
			if idx := tlog.StoredHashIndex(0, n) + int64(j); sh.Index != idx {
				return fail("the stored tree has hash %d where %d was expected: tree hashes were deleted or added", sh.Index, idx)
			}
			if sh.Hash != want {
				return fail("the stored tree's hash differs from the one its events give: the event (and its leaf hash) was changed after it was recorded, or the tree was")
			}
		}
		rep.Events++
		lastID = e.ID
		for cp != nil && cp.Size == f.n {
			if badSignature != nil {
				return fail("the checkpoint of %d events (signed at %s) that ends with it cannot be trusted: %v", cp.Size, cp.At.UTC().Format("2006-01-02 15:04:05Z"), badSignature)
			}
			if root := f.Root(); root != cp.Root {
				return fail("the checkpoint of %d events (signed at %s) does not match the events after event %d up to this one: one of them was changed after it was signed", cp.Size, cp.At.UTC().Format("2006-01-02 15:04:05Z"), lastGoodID)
			}
			rep.Checkpoints++
			lastGoodID = e.ID
			if err := advance(); err != nil {
				return rep, fmt.Errorf("read the audit checkpoints: %w", err)
			}
		}
	}
	if cp != nil {
		rep.Problem = &Problem{Message: fmt.Sprintf("the checkpoint of %d events (signed at %s) covers more events than the trail has (%d): events after event %d were deleted", cp.Size, cp.At.UTC().Format("2006-01-02 15:04:05Z"), f.n, lastID)}
		return rep, nil
	}
	if sh, err, ok := nextHash(); ok {
		if err != nil {
			return rep, fmt.Errorf("read the audit tree hashes: %w", err)
		}
		rep.Problem = &Problem{Message: fmt.Sprintf("the stored tree goes on past the trail's %d events (hash %d): events after event %d were deleted", f.n, sh.Index, lastID)}
	}
	return rep, nil
}
