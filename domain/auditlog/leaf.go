// Package auditlog makes the audit trail verifiable: every audit event is a leaf of an
// append-only Merkle tree (RFC 6962 hashing, golang.org/x/mod/sumdb/tlog), and signed
// checkpoints (tree size and root hash, Ed25519, in the note format) pin what the trail
// held at a time. Anyone holding a checkpoint can then prove an event is in it (auditProof)
// and `apelora audit verify` can recompute the tree from the rows and find the first event
// a database superuser changed, removed, added or reordered.
//
// The store keeps, with each event, its leaf index and leaf hash, and the tree's stored
// hashes by storage index (tlog's layout), all written in the event's transaction, so an
// append costs O(log n).
package auditlog

import (
	"encoding/binary"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Record is an audit event as the tree sees it: every field that matters, as the database
// holds it. Parameters and Details are the database's own text of the JSON (PostgreSQL's
// jsonb output is canonical: equal values print the same), so the encoding never depends
// on how a client decoded the JSON.
type Record struct {
	ID         int64
	At         time.Time
	Actor      string
	Action     string
	Machine    string // "" when the event is about no machine
	Outcome    string
	Error      string // "" when there is none
	RequestID  string
	Parameters string
	Details    string
}

// leafTag names the encoding, so a later encoding can never be confused with this one.
const leafTag = "apelora audit event v1"

// Leaf is the record's canonical encoding, the tree's leaf content: the tag, then each
// field in a fixed order as an 8-byte big-endian length and its bytes. The time is its
// microseconds since the Unix epoch (the database keeps microseconds), in decimal.
func (r Record) Leaf() []byte {
	fields := [...]string{
		leafTag,
		strconv.FormatInt(r.ID, 10),
		strconv.FormatInt(r.At.UnixMicro(), 10),
		r.Actor, r.Action, r.Machine, r.Outcome, r.Error, r.RequestID, r.Parameters, r.Details,
	}
	size := 0
	for _, f := range fields {
		size += 8 + len(f)
	}
	out := make([]byte, 0, size)
	for _, f := range fields {
		out = binary.BigEndian.AppendUint64(out, uint64(len(f)))
		out = append(out, f...)
	}
	return out
}

// LeafHash is the record's leaf hash (RFC 6962: SHA-256 of 0x00 and the leaf).
func (r Record) LeafHash() tlog.Hash { return tlog.RecordHash(r.Leaf()) }
