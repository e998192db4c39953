package auditlog

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Proof shows that an event is a leaf of the tree a checkpoint signs.
type Proof struct {
	EventID    int64
	LeafIndex  int64
	LeafHash   tlog.Hash
	Hashes     tlog.RecordProof
	Checkpoint Checkpoint
}

// maxProofHashes bounds a proof: a tree of at most 2^62 leaves has a path of at most 62.
const maxProofHashes = 62

// MaxTreeSize is the largest tree the log reads: tlog's maxpow2 never ends for a size above
// 2^62 (its shift overflows), so a larger size stated by a checkpoint or a caller is refused
// before it reaches tlog.
const MaxTreeSize = int64(1) << 62

// ParseProof reads a proof's hashes as the API gives them (standard base64, leaf side
// first).
func ParseProof(hashes []string) (tlog.RecordProof, error) {
	if len(hashes) > maxProofHashes {
		return nil, fmt.Errorf("the proof has %d hashes: a proof has at most %d", len(hashes), maxProofHashes)
	}
	out := make(tlog.RecordProof, len(hashes))
	for i, s := range hashes {
		h, err := tlog.ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("proof hash %d is not a base64 SHA-256 hash", i+1)
		}
		out[i] = h
	}
	return out, nil
}

// Check checks that the proof leads from the leaf hash to the root of the checkpoint's
// tree. (It does not check the checkpoint's signature: ParseCheckpoint does.)
func (p Proof) Check() error {
	if p.Checkpoint.Size > MaxTreeSize {
		return fmt.Errorf("the checkpoint states a tree of %d events: a tree holds at most %d", p.Checkpoint.Size, MaxTreeSize)
	}
	if p.LeafIndex < 0 || p.LeafIndex >= p.Checkpoint.Size {
		return fmt.Errorf("leaf %d is not in a tree of %d events", p.LeafIndex, p.Checkpoint.Size)
	}
	if err := tlog.CheckRecord(p.Hashes, p.Checkpoint.Size, p.Checkpoint.Root, p.LeafIndex, p.LeafHash); err != nil {
		return fmt.Errorf("the proof does not lead from event %d's leaf to the checkpoint's root: %w", p.EventID, err)
	}
	return nil
}
