package auditexport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditlog"
)

// MaxLine bounds one exported line: an event is at most about 10 KiB once bounded
// (audit.Bound: parameters and details within 8 KiB), its checkpoint under 1 KiB, and
// JSON's escapes can grow text sixfold.
const MaxLine = 1 << 20

// ExportReport is what VerifyExport found.
type ExportReport struct {
	Lines      int64 // lines read (blank ones not counted)
	Events     int64 // distinct leaves, 0 up to Events-1
	Duplicates int64 // lines that repeat a leaf already read, identical (at-least-once delivery)
	// Checkpoints is how many distinct signed checkpoints matched the leaves; Verified is the
	// largest tree they cover: every leaf below it is proven in order and unchanged.
	Checkpoints int
	Verified    int64
	// Ahead is the largest checkpoint carried that covers more leaves than the export
	// holds (0: none): the rest is still on its way, or lost after the last line.
	Ahead int64
	// Heads are the tree heads the export witnessed: its leaves' (Events and their root)
	// and the checkpoint ahead of them, if any. `apelora audit verify --witness-export`
	// checks the database holds each.
	Heads   []auditlog.Head
	Problem *ExportProblem
}

// ExportProblem is the first thing wrong in an export: the line (from 1) and, when it
// names one, the leaf index and event id it affects.
type ExportProblem struct {
	Line      int64
	LeafIndex int64 // -1 when none
	EventID   int64 // 0 when none
	Message   string
}

func (p *ExportProblem) Error() string { return p.Message }

// VerifyExport checks an export read from r: a JSON Lines file, or the lines a syslog
// receiver wrote (each line's JSON object starts at its first '{': the syslog header
// before it is ignored). Leaves must run from 0 in order; a line that repeats a leaf is
// accepted only when it is identical to the first (a redelivery). Each line's fields must
// give its leaf hash, and every checkpoint carried must be signed by v and match the root
// of the leaves up to its size. Leaves after the largest checkpoint are chained but not yet
// proven (Events - Verified). The error is for a failure to read, not a finding.
func VerifyExport(r io.Reader, v note.Verifier) (ExportReport, error) {
	var rep ExportReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLine)
	var hashes []tlog.Hash // every leaf hash, to check redeliveries and late checkpoints
	var f auditlog.Frontier
	seen := map[string]bool{}        // checkpoint texts already read
	pending := map[int64]tlog.Hash{} // checkpoints above the leaves read so far, by size
	proven := map[int64]tlog.Hash{}  // checkpoints matched, by size
	var lineNo int64
	fail := func(index, id int64, format string, args ...any) (ExportReport, error) {
		rep.Problem = &ExportProblem{Line: lineNo, LeafIndex: index, EventID: id,
			Message: fmt.Sprintf("line %d: ", lineNo) + fmt.Sprintf(format, args...)}
		return rep, nil
	}
	failErr := func(index, id int64, format string, args ...any) error {
		_, _ = fail(index, id, format, args...)
		return rep.Problem
	}
	prove := func(size int64, root tlog.Hash) {
		rep.Checkpoints++
		proven[size] = root
		rep.Verified = max(rep.Verified, size)
	}
	// checkpoint checks a checkpoint a line carries (once per text): signed by v, and the
	// root of the leaves up to its size, now or when the export reaches it.
	checkpoint := func(idx, id int64, text string) error {
		if seen[text] {
			return nil
		}
		seen[text] = true
		tree, err := auditlog.ParseCheckpoint([]byte(text), v)
		if err != nil {
			return failErr(idx, id, "the checkpoint it carries cannot be trusted: %v", err)
		}
		if root, ok := proven[tree.N]; ok && root != tree.Hash {
			return failErr(idx, id, "it carries a checkpoint of %d events whose root differs from another checkpoint of the same size: the log forked", tree.N)
		}
		if root, ok := pending[tree.N]; ok && root != tree.Hash {
			return failErr(idx, id, "it carries a checkpoint of %d events whose root differs from another checkpoint of the same size: the log forked", tree.N)
		}
		if tree.N <= int64(len(hashes)) {
			// A checkpoint of leaves already read: recompute that prefix's root.
			var g auditlog.Frontier
			for _, x := range hashes[:tree.N] {
				g.Add(x, nil)
			}
			if g.Root() != tree.Hash {
				return failErr(idx, id, "the checkpoint of %d events it carries does not match the exported leaves 0 to %d: one of those lines was changed, removed, added or reordered", tree.N, tree.N-1)
			}
			prove(tree.N, tree.Hash)
		} else {
			pending[tree.N] = tree.Hash
		}
		return nil
	}
	for sc.Scan() {
		lineNo++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		rep.Lines++
		start := bytes.IndexByte(text, '{')
		if start < 0 {
			return fail(-1, 0, "it holds no JSON object: not a line Apelora exported")
		}
		var l Line
		if err := json.Unmarshal(text[start:], &l); err != nil {
			return fail(-1, 0, "its JSON does not read as an exported audit event: %v", err)
		}
		if !IsEvent(text[start:]) {
			if l.Checkpoint == "" {
				return fail(-1, 0, "it holds neither an event nor a checkpoint: not a line Apelora exported")
			}
			if err := checkpoint(-1, 0, l.Checkpoint); err != nil {
				return rep, nil
			}
			continue
		}
		idx, id := l.LeafIndex, l.Event.ID
		rec, err := l.Record()
		if err != nil {
			return fail(idx, id, "event %d: %v", id, err)
		}
		h, err := l.Hash()
		if err != nil {
			return fail(idx, id, "event %d: %v", id, err)
		}
		if rec.LeafHash() != h {
			return fail(idx, id, "event %d (leaf %d): its fields do not give its leaf hash: the line was changed after Apelora exported it", id, idx)
		}
		n := int64(len(hashes))
		switch {
		case idx < 0:
			return fail(idx, id, "event %d has leaf index %d", id, idx)
		case idx < n:
			if hashes[idx] != h {
				return fail(idx, id, "event %d is leaf %d, but leaf %d was read before with other contents: the trail was rewritten between the two exports", id, idx, idx)
			}
			rep.Duplicates++
		case idx > n:
			return fail(idx, id, "event %d is leaf %d where leaf %d was expected: %d event(s) before it are missing from the export (deleted from the trail, or lost on the way)", id, idx, n, idx-n)
		default:
			hashes = append(hashes, h)
			f.Add(h, nil)
			rep.Events++
		}
		if l.Checkpoint != "" {
			if err := checkpoint(idx, id, l.Checkpoint); err != nil {
				return rep, nil
			}
		}
		if root, ok := pending[f.Size()]; ok {
			delete(pending, f.Size())
			if f.Root() != root {
				return fail(idx, id, "the checkpoint of %d events does not match the exported leaves 0 to %d (this line is the last of them): one of those lines was changed, removed, added or reordered after it was signed", f.Size(), f.Size()-1)
			}
			prove(f.Size(), root)
		}
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("read the export after line %d: %w", lineNo, err)
	}
	for size := range pending {
		rep.Ahead = max(rep.Ahead, size)
	}
	if rep.Events > 0 {
		rep.Heads = append(rep.Heads, auditlog.Head{Size: rep.Events, Root: f.Root()})
	}
	if rep.Ahead > 0 {
		rep.Heads = append(rep.Heads, auditlog.Head{Size: rep.Ahead, Root: pending[rep.Ahead]})
	}
	return rep, nil
}
