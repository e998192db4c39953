package auditlog

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a signed statement of the tree: its size (how many events) and root hash.
type Checkpoint struct {
	Size int64
	Root tlog.Hash
	// Signed is the note: tlog.FormatTree's text, a blank line and the signature line.
	Signed string
	At     time.Time
}

// signCheckpoint signs the tree of size n with root hash root.
func signCheckpoint(s note.Signer, n int64, root tlog.Hash) (string, error) {
	msg, err := note.Sign(&note.Note{Text: string(tlog.FormatTree(tlog.Tree{N: n, Hash: root}))}, s)
	if err != nil {
		return "", fmt.Errorf("sign audit checkpoint: %w", err)
	}
	return string(msg), nil
}

// maxCheckpoint bounds a checkpoint's text: the tree text and one signature line are
// well under 1 KiB; anything longer is not one of ours.
const maxCheckpoint = 4096

// ParseCheckpoint reads a signed checkpoint, checking its signature against v, and
// returns the tree it states.
func ParseCheckpoint(text []byte, v note.Verifier) (tlog.Tree, error) {
	if len(text) > maxCheckpoint {
		return tlog.Tree{}, fmt.Errorf("the checkpoint is %d bytes: a checkpoint is at most %d", len(text), maxCheckpoint)
	}
	n, err := note.Open(text, note.VerifierList(v))
	if err != nil {
		var unknown *note.UnknownVerifierError
		if errors.As(err, &unknown) {
			return tlog.Tree{}, fmt.Errorf("the checkpoint is not signed by the audit key %s (signed by %s): it was not written by this server, or the key was replaced", v.Name(), unknown.Name)
		}
		return tlog.Tree{}, fmt.Errorf("the checkpoint's signature does not verify with the audit key %s: %w", v.Name(), err)
	}
	t, err := tlog.ParseTree([]byte(n.Text))
	if err != nil {
		return tlog.Tree{}, fmt.Errorf("the checkpoint's text is not a tree description: %w", err)
	}
	if t.N < 0 {
		return tlog.Tree{}, fmt.Errorf("the checkpoint states a negative tree size %d", t.N)
	}
	if t.N > MaxTreeSize {
		return tlog.Tree{}, fmt.Errorf("the checkpoint states a tree of %d events: a tree holds at most %d", t.N, MaxTreeSize)
	}
	return t, nil
}
