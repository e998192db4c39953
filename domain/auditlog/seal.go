package auditlog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Head is a tree head: the tree's size (how many events) and its root hash, and when it was
// seen (zero when not known).
type Head struct {
	Size int64
	Root tlog.Hash
	At   time.Time
}

// SealSize is a seal's length in bytes (HMAC-SHA-256).
const SealSize = sha256.Size

// Sealer seals tree heads: every event is written with the seal of the tree it ends (its
// leaf index + 1 leaves and the root hash over them), an HMAC-SHA-256 with a key derived
// from the audit key, which never enters the database. A seal binds every event up to its
// own, so whoever writes the database without the key cannot add, change, remove or
// reorder events, or their tree hashes, and seal the result; `apelora audit verify` checks
// every event's seal, the newest included, where checkpoints only cover the events up to
// the latest one (as Vault's audit devices HMAC with a key kept outside their storage).
type Sealer struct {
	key [32]byte
}

// sealKeyTag and sealTag name the key's derivation and the sealed text, so that neither can
// be confused with another use of the audit key.
const (
	sealKeyTag = "apelora audit seal key v1"
	sealTag    = "apelora audit seal v1\n"
)

// newSealer derives the seal key from the audit key's Ed25519 seed.
func newSealer(seed []byte) *Sealer {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(sealKeyTag))
	s := &Sealer{}
	copy(s.key[:], m.Sum(nil))
	return s
}

// Seal is the seal of the tree head h (its size and root; the time is not sealed).
func (s *Sealer) Seal(h Head) []byte {
	return s.sealWith(hmac.New(sha256.New, s.key[:]), h, nil)
}

func (s *Sealer) sealWith(m hash.Hash, h Head, out []byte) []byte {
	m.Reset()
	var buf [len(sealTag) + 8 + tlog.HashSize]byte
	n := copy(buf[:], sealTag)
	binary.BigEndian.PutUint64(buf[n:], uint64(h.Size))
	copy(buf[n+8:], h.Root[:])
	m.Write(buf[:])
	return m.Sum(out[:0])
}

// Checker returns a function that says whether seal is the seal of h: for one goroutine
// checking many seals (it reuses one HMAC state).
func (s *Sealer) Checker() func(h Head, seal []byte) bool {
	m := hmac.New(sha256.New, s.key[:])
	var out [SealSize]byte
	return func(h Head, seal []byte) bool {
		return len(seal) == SealSize && hmac.Equal(s.sealWith(m, h, out[:]), seal)
	}
}
