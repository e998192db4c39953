package auditlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/internal/apperr"
)

// Store is what the log needs of the database. Appending leaves is the store's own part
// of recording an audit event (in the event's transaction); these are the reads and the
// checkpoints.
type Store interface {
	// AuditTreeSize is the number of leaves committed.
	AuditTreeSize(ctx context.Context) (int64, error)
	// AuditTreeHashes reads stored hashes by storage index (a tlog.HashReader).
	AuditTreeHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error)
	// AuditLeaf is an event's leaf index and hash; found is false when there is no such
	// event.
	AuditLeaf(ctx context.Context, id int64) (index int64, hash tlog.Hash, found bool, err error)
	// AuditTip reads the tree's newest state in one consistent read. A stored tree that
	// cannot be read as one is a *Damage.
	AuditTip(ctx context.Context) (Tip, error)
	// AuditCheckpoints reads up to limit checkpoints whose tree size is from minSize to
	// maxSize, largest first when newestFirst, else smallest first.
	AuditCheckpoints(ctx context.Context, minSize, maxSize int64, limit int, newestFirst bool) ([]Checkpoint, error)
	// AddAuditCheckpoint keeps a checkpoint; the same one already kept (another
	// replica's) is not an error.
	AddAuditCheckpoint(ctx context.Context, c Checkpoint) error
	// AuditAppendable is nil when the next event can be appended, a *Damage when the
	// stored tree (or the missing audit key) stops every append.
	AuditAppendable(ctx context.Context) error
	// OpenAuditSnapshot opens one consistent view of the whole trail, for Verify.
	OpenAuditSnapshot(ctx context.Context) (ClosingSnapshot, error)
}

// ClosingSnapshot is a Snapshot to close after use.
type ClosingSnapshot interface {
	Snapshot
	Close()
}

// Tip is the newest state of the stored tree, as one read saw it.
type Tip struct {
	// Size is the number of leaves of the stored tree (from its hashes).
	Size int64
	// Frontier are the stored hashes at FrontierIndexes(Size).
	Frontier []tlog.Hash
	// LastLeaf is the stored hash of leaf Size-1 (when Size > 0).
	LastLeaf tlog.Hash
	// Newest is the event with the highest leaf index; nil when no event has one.
	Newest *StoredEvent
}

// Damage is a stored tree (or a process) that cannot take the next event: every append
// fails until it is repaired. Its message says what is wrong and what to run.
type Damage struct {
	Message string
}

func (d *Damage) Error() string { return d.Message }

// TreeDamage is a Damage of the stored tree hashes, described by detail.
func TreeDamage(format string, args ...any) *Damage {
	return &Damage{Message: "the audit tree hashes do not match the events (" + fmt.Sprintf(format, args...) + "): run `apelora audit verify`"}
}

// NoKeyDamage is a process without the audit key: it cannot seal an event.
var NoKeyDamage = &Damage{Message: "this process holds no audit key, so it cannot seal audit events and refuses every change: give it the servers' key file (APELORA_AUDIT_KEY_FILE)"}

// The kinds of problem a check finds: the metric's label.
const (
	KindAppend     = "append"     // the stored tree refuses the next event
	KindEvents     = "events"     // events do not fit the stored tree (changed, deleted, inserted, moved)
	KindSeal       = "seal"       // the newest event is not sealed for the tree it ends
	KindWitness    = "witness"    // the tree is smaller than, or forks from, a head witnessed outside the database
	KindCheckpoint = "checkpoint" // a checkpoint row is not ours, covers more than the tree, forks, or went missing
)

// Kinds are every kind of problem, for metrics made at start.
var Kinds = []string{KindAppend, KindEvents, KindSeal, KindWitness, KindCheckpoint}

// Observer is told each check's outcome: kind is "" when the check found nothing wrong.
type Observer interface {
	TrailChecked(kind string)
}

// Status is what the latest check of the trail found.
type Status struct {
	// Verified is true while the latest check found nothing wrong (and before the first).
	Verified bool
	// Since is when the trail stopped verifying (zero while it verifies).
	Since time.Time
	// Problem is what the check found; Kind its kind.
	Problem string
	Kind    string
	// CheckedAt is the latest check's time (zero before the first).
	CheckedAt time.Time
	// blocked: the problem stops checkpoints being signed.
	blocked bool
}

// Options are a Service's optional parts.
type Options struct {
	// Witness is this replica's witness (nil: one kept in memory only).
	Witness *Witness
	// Log is where problems are raised (nil: nowhere).
	Log *slog.Logger
	// Observer counts the checks (nil: none).
	Observer Observer
}

// Service signs checkpoints, proves events against them and checks the trail.
type Service struct {
	store   Store
	key     *Key
	witness *Witness
	log     *slog.Logger
	obs     Observer

	// checking serialises checks and signatures.
	checking sync.Mutex
	// Under checking: the largest checkpoint size whose rows were checked, the latest
	// full verification.
	checkedUpTo int64
	swept       sweep

	mu       sync.Mutex
	status   Status
	logged   string
	loggedAt time.Time
}

type sweep struct {
	at      time.Time
	took    time.Duration
	finding *finding
}

// NewService returns the log over store, signing and sealing with key.
func NewService(store Store, key *Key, o Options) *Service {
	s := &Service{store: store, key: key, witness: o.Witness, log: o.Log, obs: o.Observer, status: Status{Verified: true}}
	if s.witness == nil {
		s.witness, _ = OpenWitness("")
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return s
}

// VerifierKey is the public key checkpoints are signed with.
func (s *Service) VerifierKey() string { return s.key.VerifierKey }

// Witness is the service's witness.
func (s *Service) Witness() *Witness { return s.witness }

// Status is what the latest check found.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Service) reader(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return s.store.AuditTreeHashes(ctx, indexes)
	})
}

// finding is one problem a check found.
type finding struct {
	kind, msg string
	// blocks: the tree itself is not one the key wrote, or not the one witnessed or
	// signed before, so no checkpoint is signed while it lasts.
	blocks bool
}

// blocking marks f as one that stops signing.
func blocking(f *finding) *finding {
	if f != nil {
		f.blocks = true
	}
	return f
}

func found(kind, format string, args ...any) *finding {
	return &finding{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// sealedHead reads the stored tree's head and checks its newest event against it: the
// leaf it ends, its contents and its seal. A seal binds the root over every leaf, so a
// head whose newest event is sealed for it is a tree a holder of the audit key wrote.
func (s *Service) sealedHead(ctx context.Context) (Head, *finding, error) {
	tip, err := s.store.AuditTip(ctx)
	var d *Damage
	if errors.As(err, &d) {
		return Head{}, &finding{kind: KindAppend, msg: d.Message}, nil
	}
	if err != nil {
		return Head{}, nil, err
	}
	e := tip.Newest
	if tip.Size == 0 {
		if e != nil {
			return Head{}, found(KindEvents, "event %d is leaf %d but the stored tree is empty: the tree hashes were deleted", e.ID, e.LeafIndex), nil
		}
		return Head{}, nil, nil
	}
	fr, err := FrontierOf(tip.Size, tip.Frontier)
	if err != nil {
		return Head{}, &finding{kind: KindAppend, msg: TreeDamage("%v", err).Message}, nil
	}
	head := Head{Size: tip.Size, Root: fr.Root(), At: time.Now()}
	n := tip.Size
	switch {
	case e == nil:
		return head, found(KindEvents, "the stored tree holds %d events but there is no event: every event was deleted, or audit_events was emptied", n), nil
	case e.LeafIndex < n-1:
		return head, found(KindEvents, "the stored tree holds %d events but the newest event, %d, is leaf %d: the %d event(s) after it were deleted", n, e.ID, e.LeafIndex, n-1-e.LeafIndex), nil
	case e.LeafIndex > n-1:
		return head, found(KindEvents, "event %d is leaf %d, outside the stored tree of %d events: it was inserted in the database", e.ID, e.LeafIndex, n), nil
	case e.Record.LeafHash() != e.LeafHash:
		return head, found(KindEvents, "the newest event, %d, does not match the leaf hash recorded with it: the row was changed after it was recorded", e.ID), nil
	case e.LeafHash != tip.LastLeaf:
		return head, found(KindEvents, "the newest event, %d, is not the stored tree's last leaf: the event or the tree hashes were changed", e.ID), nil
	case e.Seal == nil:
		return head, found(KindSeal, "the newest event, %d, has no seal: it was inserted in the database by someone without the audit key", e.ID), nil
	case !s.key.Sealer.Checker()(head, e.Seal):
		return head, found(KindSeal, "the newest event, %d, is not sealed for the stored tree of %d events it ends: events or tree hashes were written in the database by someone without the audit key (an insert with computed hashes, a change or a swap)", e.ID, n), nil
	}
	return head, nil, nil
}

// extends checks that the tree at head holds old as a prefix (RFC 6962 consistency proof
// from the stored hashes); what says how old was seen, for the message.
func (s *Service) extends(ctx context.Context, head Head, old Head, kind, what string) (*finding, error) {
	switch {
	case old.Size == 0:
		return nil, nil
	case old.Size > head.Size:
		return found(kind, "the stored tree holds %d events, fewer than the %d of %s (at %s): the newest %d were deleted with their tree hashes, or the audit tables were emptied",
			head.Size, old.Size, what, old.At.UTC().Format(timeText), old.Size-head.Size), nil
	case old.Size == head.Size:
		if old.Root != head.Root {
			return found(kind, "the stored tree of %d events is not the one of %s (at %s): it was cut short and grown again (a fork)", head.Size, what, old.At.UTC().Format(timeText)), nil
		}
		return nil, nil
	}
	proof, err := tlog.ProveTree(head.Size, old.Size, s.reader(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &finding{kind: KindAppend, msg: TreeDamage("the stored tree cannot prove it holds the tree of %d events of %s: %v", old.Size, what, err).Message}, nil
	}
	if err := tlog.CheckTree(proof, head.Size, head.Root, old.Size, old.Root); err != nil {
		return found(kind, "the stored tree of %d events does not start with the tree of %d events of %s (at %s): events up to it were replaced (the tree was cut short and grown again, a fork)",
			head.Size, old.Size, what, old.At.UTC().Format(timeText)), nil
	}
	return nil, nil
}

// witnessed checks the head against every head this replica witnessed.
func (s *Service) witnessed(ctx context.Context, head Head, heads []Witnessed) (*finding, error) {
	for _, w := range heads {
		if f, err := s.extends(ctx, head, w.Head, KindWitness, w.By); f != nil || err != nil {
			return f, err
		}
	}
	return nil, nil
}

// checkRow says why a checkpoint row cannot be trusted (nil: it is signed by the audit
// key and states what its columns say).
func (s *Service) checkRow(c Checkpoint) error {
	tree, err := ParseCheckpoint([]byte(c.Signed), s.key.Verifier)
	if err != nil {
		return err
	}
	if tree.N != c.Size || tree.Hash != c.Root {
		return fmt.Errorf("its size or root (%d, %s) differ from what its signed text states (%d, %s)", c.Size, c.Root, tree.N, tree.Hash)
	}
	return nil
}

// latestSigned is the checkpoint of the largest tree among those the audit key signed
// (rows it does not verify are skipped), or nil.
func (s *Service) latestSigned(ctx context.Context) (*Checkpoint, error) {
	max := MaxTreeSize
	for {
		rows, err := s.store.AuditCheckpoints(ctx, 1, max, 256, true)
		if err != nil {
			return nil, err
		}
		for _, c := range rows {
			if s.checkRow(c) == nil {
				return &c, nil
			}
		}
		if len(rows) < 256 {
			return nil, nil
		}
		max = rows[len(rows)-1].Size - 1
	}
}

// latestGood is the checkpoint of the largest tree, at most n events, that the audit key
// signed and whose root the stored tree gives: the one served and proven against.
func (s *Service) latestGood(ctx context.Context, n int64) (*Checkpoint, error) {
	max := n
	for max > 0 {
		rows, err := s.store.AuditCheckpoints(ctx, 1, max, 64, true)
		if err != nil {
			return nil, err
		}
		for _, c := range rows {
			if s.checkRow(c) != nil {
				continue
			}
			root, err := tlog.TreeHash(c.Size, s.reader(ctx))
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == nil && root == c.Root {
				return &c, nil
			}
		}
		if len(rows) < 64 {
			break
		}
		max = rows[len(rows)-1].Size - 1
	}
	return nil, nil
}

// checkCheckpoints checks the checkpoint rows against the stored tree at head: none above
// it (largest: the largest row, read before the tree), the ones added since the last check
// signed by the audit key and held by the tree, and the latest one this replica signed
// still there.
func (s *Service) checkCheckpoints(ctx context.Context, head Head, largest []Checkpoint) (*finding, error) {
	// largest was read before the tree: a row above the tree is one put there, or one
	// whose events were cut off since, never one signed meanwhile.
	if len(largest) > 0 && largest[0].Size > head.Size {
		c := largest[0]
		if why := s.checkRow(c); why != nil {
			return found(KindCheckpoint, "a checkpoint of %d events (at %s) that the audit key does not verify is in the database (%v): it was inserted there, and is not served", c.Size, c.At.UTC().Format(timeText), why), nil
		}
		return found(KindCheckpoint, "the checkpoint of %d events signed at %s covers more events than the stored tree holds (%d): the newest events were deleted with their tree hashes", c.Size, c.At.UTC().Format(timeText), head.Size), nil
	}
	rows, err := s.store.AuditCheckpoints(ctx, s.checkedUpTo+1, head.Size, 256, false)
	if err != nil {
		return nil, err
	}
	for _, c := range rows {
		if why := s.checkRow(c); why != nil {
			return found(KindCheckpoint, "a checkpoint of %d events (at %s) that the audit key does not verify is in the database (%v): it was inserted there, and is not served", c.Size, c.At.UTC().Format(timeText), why), nil
		}
		if f, err := s.extends(ctx, head, Head{Size: c.Size, Root: c.Root, At: c.At}, KindCheckpoint, "the checkpoint signed at "+c.At.UTC().Format(timeText)); f != nil || err != nil {
			return f, err
		}
	}
	if len(rows) > 0 {
		s.checkedUpTo = rows[len(rows)-1].Size
	}
	if mine := s.witness.Signed(); mine.Size > 0 && mine.Size <= head.Size {
		rows, err := s.store.AuditCheckpoints(ctx, mine.Size, mine.Size, 16, true)
		if err != nil {
			return nil, err
		}
		there := false
		for _, c := range rows {
			there = there || (c.Root == mine.Root && s.checkRow(c) == nil)
		}
		if !there {
			return found(KindCheckpoint, "the checkpoint of %d events this replica signed at %s is no longer in the database: checkpoints were deleted", mine.Size, mine.At.UTC().Format(timeText)), nil
		}
	}
	return nil, nil
}

// sweepSpacing: a full verification starts at most every this many times its own length,
// so it takes at most a tenth of a core however long the trail.
const sweepSpacing = 10

// fullCheck verifies the whole trail (Verify, the same walk as `apelora audit verify`)
// when one is due, else repeats the latest one's finding.
func (s *Service) fullCheck(ctx context.Context, heads []Witnessed) (*finding, error) {
	now := time.Now()
	if !s.swept.at.IsZero() && now.Sub(s.swept.at) < sweepSpacing*s.swept.took {
		return s.swept.finding, nil
	}
	snap, err := s.store.OpenAuditSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	rep, err := Verify(ctx, snap, VerifyOptions{Verifier: s.key.Verifier, Sealer: s.key.Sealer, Witnessed: heads})
	if err != nil {
		return nil, err
	}
	s.swept = sweep{at: now, took: time.Since(now)}
	if rep.Problem != nil {
		s.swept.finding = &finding{kind: KindEvents, msg: rep.Problem.Message}
	}
	return s.swept.finding, nil
}

// Check looks at the trail once: whether the next event can be appended, the newest
// event's seal, the tree against every head this replica witnessed, the checkpoint rows,
// and (when due) every event. It raises what it finds (Status, the log, the observer) and
// returns the status; the error is for a failure to read.
func (s *Service) Check(ctx context.Context) (Status, error) {
	s.checking.Lock()
	defer s.checking.Unlock()
	f, err := s.check(ctx)
	if err != nil {
		return s.Status(), err
	}
	s.settle(f)
	return s.Status(), nil
}

func (s *Service) check(ctx context.Context) (*finding, error) {
	if err := s.store.AuditAppendable(ctx); err != nil {
		var d *Damage
		if errors.As(err, &d) {
			return &finding{kind: KindAppend, msg: d.Message, blocks: true}, nil
		}
		return nil, err
	}
	// The witnessed heads are read before the tree: every head they hold was committed
	// before the read, so the tree read next holds it unless it was cut short.
	heads := s.witness.Heads()
	largest, err := s.store.AuditCheckpoints(ctx, 1, MaxTreeSize, 1, true)
	if err != nil {
		return nil, err
	}
	head, _, f, err := s.trustedHead(ctx, heads)
	if f != nil || err != nil {
		return f, err
	}
	if head.Size > 0 {
		s.witness.Saw(head)
	}
	if f, err := s.checkCheckpoints(ctx, head, largest); f != nil || err != nil {
		return f, err
	}
	return s.fullCheck(ctx, heads)
}

// trustedHead is the stored tree's head when its newest event is sealed for it and it
// extends every head witnessed and the latest checkpoint the key signed: a tree that may
// be signed. Any other finding blocks signing. The heads and the checkpoints are read
// before the tree: each was of a tree committed before the read, so the tree read next
// holds it unless it was cut short (another replica signing meanwhile is no false alarm).
func (s *Service) trustedHead(ctx context.Context, heads []Witnessed) (Head, *Checkpoint, *finding, error) {
	latest, err := s.latestSigned(ctx)
	if err != nil {
		return Head{}, nil, nil, err
	}
	head, f, err := s.sealedHead(ctx)
	if f != nil || err != nil {
		return head, latest, blocking(f), err
	}
	if f, err := s.witnessed(ctx, head, heads); f != nil || err != nil {
		return head, latest, blocking(f), err
	}
	if latest != nil {
		f, err := s.extends(ctx, head, Head{Size: latest.Size, Root: latest.Root, At: latest.At}, KindCheckpoint, "the latest checkpoint the audit key signed")
		if f != nil || err != nil {
			return head, latest, blocking(f), err
		}
	}
	return head, latest, nil, nil
}

// reminder is how often a problem that lasts is logged again.
const reminder = 10 * time.Minute

// settle makes f (nil: nothing wrong) the trail's status, and raises it.
func (s *Service) settle(f *finding) {
	now := time.Now()
	s.mu.Lock()
	prev := s.status
	st := Status{Verified: f == nil, CheckedAt: now}
	if f != nil {
		st.Kind, st.Problem, st.Since, st.blocked = f.kind, f.msg, prev.Since, f.blocks
		if st.Since.IsZero() {
			st.Since = now
		}
	}
	s.status = st
	logIt := f != nil && (f.msg != s.logged || now.Sub(s.loggedAt) >= reminder)
	if logIt {
		s.logged, s.loggedAt = f.msg, now
	}
	if f == nil {
		s.logged = ""
	}
	s.mu.Unlock()
	if logIt {
		s.log.Error("the audit trail does not verify: run `apelora audit verify` on a server to see what was changed", "problem", f.msg, "kind", f.kind, "since", st.Since.UTC().Format(time.RFC3339))
	} else if f == nil && !prev.Verified {
		s.log.Info("the audit trail verifies again", "since", prev.Since.UTC().Format(time.RFC3339))
	}
	if s.obs != nil {
		kind := ""
		if f != nil {
			kind = f.kind
		}
		s.obs.TrailChecked(kind)
	}
}

// Appendable is nil when the next event can be appended, else an UNAVAILABLE error that
// says what is wrong and what to run (a failure to read says so).
func (s *Service) Appendable(ctx context.Context) error {
	err := s.store.AuditAppendable(ctx)
	var d *Damage
	if errors.As(err, &d) {
		return apperr.New(apperr.Unavailable, "%s", d.Message)
	}
	return err
}

// Checkpoint signs the tree as it is now when it grew since the latest checkpoint, and
// returns the latest checkpoint (nil while the trail is empty) and whether it is new. It
// never signs a tree whose newest event is not sealed for it, nor one that does not extend
// the latest checkpoint the key signed and every head this replica witnessed (an RFC 6962
// consistency proof from each, its own last signed head included): it refuses with
// FAILED_PRECONDITION saying why.
func (s *Service) Checkpoint(ctx context.Context) (*Checkpoint, bool, error) {
	s.checking.Lock()
	defer s.checking.Unlock()
	head, latest, f, err := s.trustedHead(ctx, s.witness.Heads())
	if err != nil {
		return nil, false, err
	}
	if f != nil {
		return nil, false, apperr.New(apperr.FailedPrecondition, "no audit checkpoint was signed: %s; run `apelora audit verify` on a server", f.msg)
	}
	// A tree this replica signed already is not signed again, even when its row went
	// missing: the check keeps naming the deleted row until a larger tree is signed.
	if head.Size == 0 || (latest != nil && latest.Size >= head.Size) || s.witness.Signed().Size >= head.Size {
		return latest, false, nil
	}
	signed, err := signCheckpoint(s.key.Signer, head.Size, head.Root)
	if err != nil {
		return nil, false, err
	}
	c := Checkpoint{Size: head.Size, Root: head.Root, Signed: signed, At: time.Now()}
	if err := s.store.AddAuditCheckpoint(ctx, c); err != nil {
		return nil, false, err
	}
	head.At = c.At
	s.witness.SignedHead(head)
	s.witness.Saw(head)
	if err := s.witness.Save(); err != nil {
		s.log.Error("could not keep the signed audit checkpoint in this replica's witness", "error", err)
	}
	return &c, true, nil
}

// Latest is the checkpoint of the largest tree the audit key signed and the stored tree
// holds, or nil: a row the key does not verify, or whose tree is not the stored one, is
// never served.
func (s *Service) Latest(ctx context.Context) (*Checkpoint, error) {
	n, err := s.treeSize(ctx)
	if err != nil {
		return nil, err
	}
	return s.latestGood(ctx, n)
}

// treeSize is the stored tree's size; a damaged tree is FAILED_PRECONDITION with its
// message.
func (s *Service) treeSize(ctx context.Context) (int64, error) {
	n, err := s.store.AuditTreeSize(ctx)
	var d *Damage
	if errors.As(err, &d) {
		return 0, apperr.New(apperr.FailedPrecondition, "%s", d.Message)
	}
	return n, err
}

// Prove returns the proof that event id is in the latest checkpoint's tree.
func (s *Service) Prove(ctx context.Context, id int64) (*Proof, error) {
	index, leaf, found, err := s.store.AuditLeaf(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, apperr.New(apperr.NotFound, "there is no audit event %d: take an id from auditEvents", id)
	}
	cp, err := s.Latest(ctx)
	if err != nil {
		return nil, err
	}
	if cp == nil || index >= cp.Size {
		return nil, apperr.New(apperr.FailedPrecondition, "audit event %d is newer than the latest checkpoint: ask again after the next one (APELORA_AUDIT_CHECKPOINT_INTERVAL), or sign one now with `apelora audit checkpoint` on the server", id)
	}
	hashes, err := tlog.ProveRecord(cp.Size, index, s.reader(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, apperr.Wrap(err, apperr.FailedPrecondition, "the stored audit tree cannot prove event %d against checkpoint %d: its tree hashes were changed in the database; run `apelora audit verify` on a server", id, cp.Size)
	}
	p := &Proof{EventID: id, LeafIndex: index, LeafHash: leaf, Hashes: hashes, Checkpoint: *cp}
	if err := p.Check(); err != nil {
		return nil, apperr.Wrap(err, apperr.FailedPrecondition, "the stored audit tree does not prove event %d against checkpoint %d: the event or the tree was changed in the database; run `apelora audit verify` on a server", id, cp.Size)
	}
	return p, nil
}

// DefaultCheckpointInterval is how often the trail is checked and a checkpoint is signed
// when the trail grew.
const DefaultCheckpointInterval = time.Minute

// RunCheckpoints checks the trail (Check) and then signs a checkpoint when it grew, every
// interval until ctx ends. Several replicas may run it: a checkpoint already kept is kept
// once.
func (s *Service) RunCheckpoints(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := s.Check(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("could not check the audit trail; trying again at the next interval", "error", apperr.Text(err))
			}
		case !st.Verified && st.blocked:
			// The tree itself is not one the key wrote, or not the one witnessed: nothing
			// is signed (Check raised it).
		default:
			if c, made, err := s.Checkpoint(ctx); err != nil {
				if ctx.Err() == nil {
					if apperr.Is(err, apperr.FailedPrecondition) {
						s.log.Error("refused to sign an audit checkpoint", "error", apperr.Text(err))
					} else {
						s.log.Warn("could not sign an audit checkpoint; trying again at the next interval", "error", apperr.Text(err))
					}
				}
			} else if made {
				s.log.Info("signed an audit checkpoint", "events", c.Size, "root", c.Root.String())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SignCheckpoint signs the tree head h with key, as the checkpointer does: for tools and
// tests that need a checkpoint's text.
func SignCheckpoint(key *Key, h Head) (string, error) {
	return signCheckpoint(key.Signer, h.Size, h.Root)
}
