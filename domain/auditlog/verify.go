package auditlog

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// StoredEvent is an audit row as the store keeps it: the record and the leaf columns
// written with it (HasLeaf false when the row has none: it was not written by Apelora),
// and its seal (nil when it has none).
type StoredEvent struct {
	Record
	HasLeaf   bool
	LeafIndex int64
	LeafHash  tlog.Hash
	Seal      []byte
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
	// Sealed is how many events' seals were checked (0 without the audit key).
	Sealed int64
	// Witnessed is how many heads witnessed outside the database the trail was checked
	// against.
	Witnessed int
	Problem   *Problem
}

// VerifyOptions say what to check the trail against.
type VerifyOptions struct {
	// Verifier checks the checkpoints' signatures (the audit key's public part).
	Verifier note.Verifier
	// Sealer checks every event's seal: only with the audit key itself (on a server).
	// Without it the events after the latest checkpoint are chained but not proven.
	Sealer *Sealer
	// Witnessed are tree heads seen outside the database (a replica's witness file, an
	// export): the trail must hold each of them as a prefix.
	Witnessed []Witnessed
}

const timeText = "2006-01-02 15:04:05Z"

// Verify recomputes the tree from the events and checks it against the stored leaf
// columns, the stored tree hashes, every event's seal (with the audit key), every
// checkpoint (its signature by v, and its root) and every head witnessed outside the
// database. It stops at the first problem. The error is for a failure to read, not a
// finding.
func Verify(ctx context.Context, snap Snapshot, o VerifyOptions) (Report, error) {
	var rep Report
	nextHash, stopHashes := iter.Pull2(snap.TreeHashes(ctx))
	defer stopHashes()
	nextCheckpoint, stopCheckpoints := iter.Pull2(snap.Checkpoints(ctx))
	defer stopCheckpoints()
	var checkSeal func(Head, []byte) bool
	if o.Sealer != nil {
		checkSeal = o.Sealer.Checker()
	}
	witnessed := append([]Witnessed(nil), o.Witnessed...)
	sortHeads(witnessed)
	// signedHeads are the checkpoints witnessed as signed, whose rows must be among the
	// checkpoints.
	var signedHeads []Witnessed
	for _, w := range witnessed {
		if w.Checkpoint {
			signedHeads = append(signedHeads, w)
		}
	}

	// cp is the next checkpoint to reach; badSignature holds why it cannot be trusted,
	// reported once the walk reaches its last event (the one it names). Rows repeating
	// the one before (the same size and text) are skipped; any other row of the same size
	// is checked on its own (a checkpoint another key signed beside ours).
	var cp *Checkpoint
	var badSignature error
	var prev Checkpoint
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
			if c.Size == prev.Size && c.Signed == prev.Signed {
				continue
			}
			prev = c
			cp, badSignature = &c, nil
			tree, err := ParseCheckpoint([]byte(c.Signed), o.Verifier)
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
		var root tlog.Hash
		if checkSeal != nil || (cp != nil && cp.Size == f.n) || (len(witnessed) > 0 && witnessed[0].Size == f.n) {
			root = f.Root()
		}
		if checkSeal != nil {
			if e.Seal == nil {
				return fail("it has no seal: it was inserted directly in the database by someone without the audit key (or recorded before migration 0020 and not sealed since: start `apelora serve` once)")
			}
			if !checkSeal(Head{Size: f.n, Root: root}, e.Seal) {
				return fail("its seal does not match the tree of %d events it ends: it, or an event or tree hash before it, was written by someone without the audit key (a row inserted with computed hashes, changed, or swapped)", f.n)
			}
			rep.Sealed++
		}
		rep.Events++
		lastID = e.ID
		for cp != nil && cp.Size == f.n {
			if badSignature != nil {
				return fail("the checkpoint of %d events (signed at %s) that ends with it cannot be trusted: %v", cp.Size, cp.At.UTC().Format(timeText), badSignature)
			}
			if root != cp.Root {
				return fail("the checkpoint of %d events (signed at %s) does not match the events after event %d up to this one: one of them was changed after it was signed", cp.Size, cp.At.UTC().Format(timeText), lastGoodID)
			}
			rep.Checkpoints++
			lastGoodID = e.ID
			signedHeads = slices.DeleteFunc(signedHeads, func(w Witnessed) bool { return w.Size == cp.Size && w.Root == cp.Root })
			if err := advance(); err != nil {
				return rep, fmt.Errorf("read the audit checkpoints: %w", err)
			}
		}
		for len(witnessed) > 0 && witnessed[0].Size == f.n {
			w := witnessed[0]
			if root != w.Root {
				return fail("the tree of %d events that ends with it is not the one %s witnessed (at %s): events up to this one were replaced (the tree was cut short and grown again, a fork)", w.Size, w.By, w.At.UTC().Format(timeText))
			}
			rep.Witnessed++
			witnessed = witnessed[1:]
		}
	}
	if cp != nil && badSignature != nil {
		rep.Problem = &Problem{Message: fmt.Sprintf("the checkpoint of %d events (signed at %s) cannot be trusted: %v", cp.Size, cp.At.UTC().Format(timeText), badSignature)}
		return rep, nil
	}
	if cp != nil {
		rep.Problem = &Problem{Message: fmt.Sprintf("the checkpoint of %d events (signed at %s) covers more events than the trail has (%d): events after event %d were deleted", cp.Size, cp.At.UTC().Format(timeText), f.n, lastID)}
		return rep, nil
	}
	if sh, err, ok := nextHash(); ok {
		if err != nil {
			return rep, fmt.Errorf("read the audit tree hashes: %w", err)
		}
		rep.Problem = &Problem{Message: fmt.Sprintf("the stored tree goes on past the trail's %d events (hash %d): events after event %d were deleted", f.n, sh.Index, lastID)}
		return rep, nil
	}
	for _, w := range signedHeads {
		if w.Size <= f.n {
			rep.Problem = &Problem{Message: fmt.Sprintf("%s (%d events, at %s) is no longer among the checkpoints in the database: checkpoints were deleted",
				w.By, w.Size, w.At.UTC().Format(timeText))}
			return rep, nil
		}
	}
	if len(witnessed) > 0 {
		w := witnessed[len(witnessed)-1]
		after := fmt.Sprintf("after event %d", lastID)
		if f.n == 0 {
			after = "the trail is empty"
		}
		rep.Problem = &Problem{Message: fmt.Sprintf("%s witnessed a tree of %d events (at %s), but the trail has %d: the newest %d were deleted with their tree hashes, or the audit tables were emptied (%s)",
			w.By, w.Size, w.At.UTC().Format(timeText), f.n, w.Size-f.n, after)}
	}
	return rep, nil
}
