package auditlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// WitnessFile is a replica's witness file's name in APELORA_STATE_DIR.
const WitnessFile = "audit-witness.json"

// Witnessed is a tree head seen outside the database, and who saw it (for messages:
// "this replica's last append").
type Witnessed struct {
	Head
	By string
	// Checkpoint: the head is a checkpoint this replica signed, whose row must still be in
	// the database.
	Checkpoint bool
}

// Witness is what one replica saw of the tree, kept outside the database (in its state
// folder) so that a tree cut short in the database — its newest events deleted with their
// tree hashes, or every audit table emptied — no longer passes for whole: the newest head
// an append of this replica committed, the newest head a check of this replica found
// sealed, and the newest checkpoint it signed. Heads only grow: a head smaller than the
// one kept is ignored. Saves happen on their own goroutine (Run), after each change, so an
// append never waits for the disk.
type Witness struct {
	path string // "" : kept in memory only
	mu   sync.Mutex
	st   witnessState
	wake chan struct{}
}

type witnessState struct {
	Appended Head
	Seen     Head
	Signed   Head
	changed  bool
}

// fileHead is a head as the witness file holds it.
type fileHead struct {
	Size int64     `json:"size"`
	Root string    `json:"root"`
	At   time.Time `json:"at"`
}

type witnessFileV1 struct {
	Note     string    `json:"note"`
	Appended *fileHead `json:"appended,omitempty"`
	Seen     *fileHead `json:"seen,omitempty"`
	Signed   *fileHead `json:"signed,omitempty"`
}

const witnessNote = "apelora audit witness v1: the newest audit tree heads this replica appended, checked and signed. Do not edit; `apelora audit verify` on this host checks the database against it."

// OpenWitness reads the witness at path ("" : none, kept in memory only); a missing file is
// an empty witness, written on the first change.
func OpenWitness(path string) (*Witness, error) {
	w := &Witness{path: path, wake: make(chan struct{}, 1)}
	if path == "" {
		return w, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the audit witness: %w", err)
	}
	var f witnessFileV1
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("the audit witness %s is not a witness file (%v): it was changed on this host; move it aside to start a new one (this replica then forgets the heads it witnessed)", path, err)
	}
	for _, p := range []struct {
		from *fileHead
		to   *Head
	}{{f.Appended, &w.st.Appended}, {f.Seen, &w.st.Seen}, {f.Signed, &w.st.Signed}} {
		if p.from == nil {
			continue
		}
		h, err := tlog.ParseHash(p.from.Root)
		if err != nil || p.from.Size <= 0 || p.from.Size > MaxTreeSize {
			return nil, fmt.Errorf("the audit witness %s holds a head that is not one (%d, %q): it was changed on this host; move it aside to start a new one", path, p.from.Size, p.from.Root)
		}
		*p.to = Head{Size: p.from.Size, Root: h, At: p.from.At}
	}
	return w, nil
}

// Path is the witness file ("" when kept in memory only).
func (w *Witness) Path() string { return w.path }

// Heads are the heads witnessed, smallest first.
func (w *Witness) Heads() []Witnessed {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Witnessed
	for _, h := range []Witnessed{
		{w.st.Signed, "the checkpoint this replica signed", true},
		{w.st.Seen, "this replica's last check", false},
		{w.st.Appended, "this replica's last append", false},
	} {
		if h.Size > 0 {
			out = append(out, h)
		}
	}
	sortHeads(out)
	return out
}

// Signed is the newest checkpoint this replica signed (Size 0: none).
func (w *Witness) Signed() Head {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.Signed
}

func sortHeads(hs []Witnessed) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Size < hs[j-1].Size; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}

// Appended notes a head an append of this replica committed.
func (w *Witness) Appended(h Head) { w.note(&w.st.Appended, h) }

// Saw notes a head a check of this replica found sealed and consistent.
func (w *Witness) Saw(h Head) { w.note(&w.st.Seen, h) }

// SignedHead notes a checkpoint this replica signed.
func (w *Witness) SignedHead(h Head) { w.note(&w.st.Signed, h) }

func (w *Witness) note(to *Head, h Head) {
	w.mu.Lock()
	if h.Size <= to.Size {
		w.mu.Unlock()
		return
	}
	*to = h
	w.st.changed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run saves the witness after each change until ctx ends (then once more).
func (w *Witness) Run(ctx context.Context, onError func(error)) {
	for {
		select {
		case <-ctx.Done():
			if err := w.Save(); err != nil && onError != nil {
				onError(err)
			}
			return
		case <-w.wake:
			if err := w.Save(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}

// Save writes the witness file now when it changed since the last save: a new file,
// synced, renamed over the old one, so a crash leaves one or the other whole.
func (w *Witness) Save() error {
	w.mu.Lock()
	if w.path == "" || !w.st.changed {
		w.mu.Unlock()
		return nil
	}
	st := w.st
	w.st.changed = false
	w.mu.Unlock()
	f := witnessFileV1{Note: witnessNote}
	for _, p := range []struct {
		from Head
		to   **fileHead
	}{{st.Appended, &f.Appended}, {st.Seen, &f.Seen}, {st.Signed, &f.Signed}} {
		if p.from.Size > 0 {
			*p.to = &fileHead{Size: p.from.Size, Root: p.from.Root.String(), At: p.from.At.UTC()}
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		w.mu.Lock()
		w.st.changed = true // try again at the next change
		w.mu.Unlock()
		return fmt.Errorf("write the audit witness %s: %w", w.path, err)
	}
	if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
		return fail(err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(w.path), ".audit-witness-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), w.path); err != nil {
		return fail(err)
	}
	return nil
}
