package auditlog

import (
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// Frontier is the right edge of a Merkle tree being built leaf by leaf: the roots of its
// complete subtrees, largest first. It holds O(log n) hashes, which is what lets
// `audit verify` walk any number of events in constant memory.
type Frontier struct {
	n     int64
	nodes []node
}

// Size is the number of leaves added.
func (f *Frontier) Size() int64 { return f.n }

type node struct {
	level int
	hash  tlog.Hash
}

// Add appends a leaf hash and returns the hashes the tree stores for it, in storage order
// (the leaf's, then each subtree it completes): the same as tlog.StoredHashes. It reuses stored's array.
func (f *Frontier) Add(h tlog.Hash, stored []tlog.Hash) []tlog.Hash {
	stored = append(stored[:0], h)
	f.nodes = append(f.nodes, node{0, h})
	for k := len(f.nodes); k >= 2 && f.nodes[k-2].level == f.nodes[k-1].level; k = len(f.nodes) {
		up := node{f.nodes[k-1].level + 1, tlog.NodeHash(f.nodes[k-2].hash, f.nodes[k-1].hash)}
		f.nodes = append(f.nodes[:k-2], up)
		stored = append(stored, up.hash)
	}
	f.n++
	return stored
}

// Root is the tree hash of the leaves added so far (tlog.TreeHash of n).
func (f *Frontier) Root() tlog.Hash {
	if len(f.nodes) == 0 {
		return tlog.Hash{}
	}
	h := f.nodes[len(f.nodes)-1].hash
	for i := len(f.nodes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(f.nodes[i].hash, h)
	}
	return h
}

// Hashes are the roots of the complete subtrees, largest first: with Size, all a store
// needs to keep to append the next leaf without reading the tree.
func (f *Frontier) Hashes() []tlog.Hash {
	out := make([]tlog.Hash, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.hash
	}
	return out
}

// FrontierOf restores the frontier of a tree of n leaves from its Hashes.
func FrontierOf(n int64, hashes []tlog.Hash) (*Frontier, error) {
	if n < 0 || bits.OnesCount64(uint64(n)) != len(hashes) {
		return nil, fmt.Errorf("a tree of %d leaves has %d complete subtrees, not %d", n, bits.OnesCount64(uint64(max(n, 0))), len(hashes))
	}
	f := &Frontier{n: n}
	i := 0
	for level := 62; level >= 0; level-- {
		if n&(1<<level) != 0 {
			f.nodes = append(f.nodes, node{level, hashes[i]})
			i++
		}
	}
	return f, nil
}

// FrontierIndexes are the storage indexes (tlog's layout) of the roots of a tree of n
// leaves' complete subtrees, largest first: what FrontierOf takes, read from a store of
// the tree's hashes.
func FrontierIndexes(n int64) []int64 {
	var out []int64
	var start int64
	for level := 62; level >= 0; level-- {
		if n&(1<<level) != 0 {
			out = append(out, tlog.StoredHashIndex(level, start>>level))
			start += 1 << level
		}
	}
	return out
}

// SizeOfStoredHashes is the number of leaves of the tree whose stored hashes (tlog's
// layout) are the first count: the size an append continues from when the tree hashes
// are all it reads. A count no tree of whole leaves stores (hashes were removed) is an
// error.
func SizeOfStoredHashes(count int64) (int64, error) {
	if count == 0 {
		return 0, nil
	}
	if count < 0 || count > tlog.StoredHashCount(MaxTreeSize) {
		return 0, fmt.Errorf("%d stored hashes is out of range", count)
	}
	// The last hash an append stores is the root of the largest complete subtree its leaf
	// ends: at level l, index k, after the (k+1)<<l-th leaf.
	level, k := tlog.SplitStoredHashIndex(count - 1)
	n := (k + 1) << level
	if tlog.StoredHashCount(n) != count {
		return 0, fmt.Errorf("%d stored hashes end inside an append (the tree hashes up to leaf %d take %d)", count, n, tlog.StoredHashCount(n))
	}
	return n, nil
}
