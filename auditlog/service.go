package auditlog

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/apperr"
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
	// LatestAuditCheckpoint is the checkpoint of the largest tree, or nil.
	LatestAuditCheckpoint(ctx context.Context) (*Checkpoint, error)
	// AddAuditCheckpoint keeps a checkpoint; one of the same size already kept (another
	// replica's) is not an error.
	AddAuditCheckpoint(ctx context.Context, c Checkpoint) error
}

// Service signs checkpoints and proves events against them.
type Service struct {
	store Store
	key   *Key
}

// NewService returns the log over store, signing with key.
func NewService(store Store, key *Key) *Service { return &Service{store: store, key: key} }

// VerifierKey is the public key checkpoints are signed with.
func (s *Service) VerifierKey() string { return s.key.VerifierKey }

func (s *Service) reader(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return s.store.AuditTreeHashes(ctx, indexes)
	})
}

// Checkpoint signs the tree as it is now when it grew since the latest checkpoint, and
// returns the latest checkpoint (nil while the trail is empty) and whether it is new.
func (s *Service) Checkpoint(ctx context.Context) (*Checkpoint, bool, error) {
	latest, err := s.store.LatestAuditCheckpoint(ctx)
	if err != nil {
		return nil, false, err
	}
	n, err := s.store.AuditTreeSize(ctx)
	if err != nil {
		return nil, false, err
	}
	if n == 0 || (latest != nil && latest.Size >= n) {
		return latest, false, nil
	}
	root, err := tlog.TreeHash(n, s.reader(ctx))
	if err != nil {
		return nil, false, apperr.Wrap(err, apperr.Internal, "compute the audit tree's root at %d events: run `apelora audit verify` to find what is wrong", n)
	}
	signed, err := signCheckpoint(s.key.Signer, n, root)
	if err != nil {
		return nil, false, err
	}
	c := Checkpoint{Size: n, Root: root, Signed: signed, At: time.Now()}
	if err := s.store.AddAuditCheckpoint(ctx, c); err != nil {
		return nil, false, err
	}
	return &c, true, nil
}

// Latest is the latest checkpoint, or nil when none was signed yet.
func (s *Service) Latest(ctx context.Context) (*Checkpoint, error) {
	return s.store.LatestAuditCheckpoint(ctx)
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
	cp, err := s.store.LatestAuditCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if cp == nil || index >= cp.Size {
		return nil, apperr.New(apperr.FailedPrecondition, "audit event %d is newer than the latest checkpoint: ask again after the next one (APELORA_AUDIT_CHECKPOINT_INTERVAL), or sign one now with `apelora audit checkpoint` on the server", id)
	}
	hashes, err := tlog.ProveRecord(cp.Size, index, s.reader(ctx))
	if err != nil {
		return nil, apperr.Wrap(err, apperr.Internal, "prove audit event %d: run `apelora audit verify` to find what is wrong", id)
	}
	p := &Proof{EventID: id, LeafIndex: index, LeafHash: leaf, Hashes: hashes, Checkpoint: *cp}
	if err := p.Check(); err != nil {
		return nil, apperr.Wrap(err, apperr.Internal, "the stored audit tree does not prove event %d against checkpoint %d: run `apelora audit verify` to find what was changed", id, cp.Size)
	}
	return p, nil
}

// DefaultCheckpointInterval is how often a checkpoint is signed when the trail grew.
const DefaultCheckpointInterval = time.Minute

// RunCheckpoints signs a checkpoint every interval when the trail grew, until ctx ends.
// Several replicas may run it: a checkpoint of a size already kept is kept once.
func (s *Service) RunCheckpoints(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if c, made, err := s.Checkpoint(ctx); err != nil {
			if ctx.Err() == nil {
				log.Warn("could not sign an audit checkpoint; trying again at the next interval", "error", apperr.Text(err))
			}
		} else if made {
			log.Info("signed an audit checkpoint", "events", c.Size, "root", c.Root.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
