package auditlog

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The frontier that `audit verify` walks with gives the hashes and roots tlog stores
// and computes (what the store writes on every insert).
func TestFrontierMatchesTlog(t *testing.T) {
	var all []tlog.Hash
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = all[x]
		}
		return out, nil
	})
	var f Frontier
	var stored []tlog.Hash
	for n := range int64(600) {
		leaf := Record{ID: n + 1, Actor: fmt.Sprint(n)}.Leaf()
		want, err := tlog.StoredHashes(n, leaf, reader)
		if err != nil {
			t.Fatal(err)
		}
		stored = f.Add(tlog.RecordHash(leaf), stored)
		if fmt.Sprint(stored) != fmt.Sprint(want) {
			t.Fatalf("leaf %d: the frontier stores %v, tlog %v", n, stored, want)
		}
		all = append(all, want...)
		if g, err := FrontierOf(f.Size(), f.Hashes()); err != nil || g.Root() != f.Root() {
			t.Fatalf("tree of %d: the frontier does not restore from its hashes: %v", n+1, err)
		}
		root, err := tlog.TreeHash(n+1, reader)
		if err != nil || f.Root() != root {
			t.Fatalf("tree of %d: frontier root %v, tlog %v (%v)", n+1, f.Root(), root, err)
		}
	}
}

// Every field is in the leaf, and moving bytes from one field to the next changes it.
func TestLeafCoversEveryFieldUnambiguously(t *testing.T) {
	base := Record{ID: 7, At: time.UnixMicro(1700000000123456), Actor: "admin", Action: "registerMachine", Machine: "node-1",
		Outcome: "SUCCEEDED", Error: "", RequestID: "req", Parameters: `{"a": 1}`, Details: `{}`}
	changes := []func(*Record){
		func(r *Record) { r.ID++ },
		func(r *Record) { r.At = r.At.Add(time.Microsecond) },
		func(r *Record) { r.Actor = "admin2" },
		func(r *Record) { r.Action = "x" },
		func(r *Record) { r.Machine = "" },
		func(r *Record) { r.Outcome = "FAILED" },
		func(r *Record) { r.Error = "e" },
		func(r *Record) { r.RequestID = "r" },
		func(r *Record) { r.Parameters = `{"a": 2}` },
		func(r *Record) { r.Details = `{"x": 1}` },
		func(r *Record) { r.Actor, r.Action = "adminr", "egisterMachine" },
	}
	seen := map[tlog.Hash]int{base.LeafHash(): -1}
	for i, change := range changes {
		r := base
		change(&r)
		h := r.LeafHash()
		if j, ok := seen[h]; ok {
			t.Fatalf("change %d gives the leaf of %d", i, j)
		}
		seen[h] = i
	}
}

func testSigner(t testing.TB) *Key {
	skey, _, err := note.GenerateKey(rand.Reader, KeyName)
	if err != nil {
		t.Fatal(err)
	}
	k, err := KeyFromText(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestCheckpointsOfAnotherKeyAreRefused(t *testing.T) {
	k, other := testSigner(t), testSigner(t)
	signed, err := signCheckpoint(other.Signer, 3, tlog.Hash{1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCheckpoint([]byte(signed), k.Verifier); err == nil || !strings.Contains(err.Error(), "does not verify with the audit key") {
		t.Fatalf("another key's checkpoint: %v", err)
	}
	good, _ := signCheckpoint(k.Signer, 3, tlog.Hash{1})
	if tree, err := ParseCheckpoint([]byte(good), k.Verifier); err != nil || tree.N != 3 || tree.Hash != (tlog.Hash{1}) {
		t.Fatalf("own checkpoint: %+v %v", tree, err)
	}
	forged := strings.Replace(good, "\n3\n", "\n4\n", 1)
	if _, err := ParseCheckpoint([]byte(forged), k.Verifier); err == nil {
		t.Fatal("a checkpoint whose size was edited verifies")
	}
}

// FuzzParseCheckpoint: any text is refused or read as exactly the tree it signs; never a
// panic.
func FuzzParseCheckpoint(f *testing.F) {
	k := testSigner(f)
	for _, n := range []int64{1, 2, 1 << 40} {
		s, _ := signCheckpoint(k.Signer, n, tlog.RecordHash([]byte{byte(n)}))
		f.Add([]byte(s))
		f.Add([]byte(strings.Replace(s, "go.sum", "go.mod", 1)))
	}
	f.Add([]byte("go.sum database tree\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— apelora-audit AAAA\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, text []byte) {
		tree, err := ParseCheckpoint(text, k.Verifier)
		if err != nil {
			return
		}
		if tree.N < 0 || !bytes.HasPrefix(text, tlog.FormatTree(tree)) {
			t.Fatalf("read %+v from a checkpoint that does not state it:\n%s", tree, text)
		}
	})
}

// FuzzParseProof: any list of hashes is refused or read as at most 62 hashes, and checking
// the proof at any index and size never panics and never proves a leaf outside the tree.
func FuzzParseProof(f *testing.F) {
	leaf := tlog.RecordHash([]byte("leaf"))
	f.Add(leaf.String()+"\n"+tlog.RecordHash([]byte("x")).String(), int64(0), int64(2))
	f.Add("", int64(0), int64(1))
	f.Add("not base64", int64(-1), int64(-1))
	f.Add(strings.Repeat(leaf.String()+"\n", 70), int64(5), int64(1<<62))
	f.Fuzz(func(t *testing.T, text string, index, size int64) {
		var hashes []string
		if text != "" {
			hashes = strings.Split(text, "\n")
		}
		p, err := ParseProof(hashes)
		if err != nil {
			return
		}
		if len(p) > maxProofHashes {
			t.Fatalf("accepted a proof of %d hashes", len(p))
		}
		proof := Proof{LeafIndex: index, LeafHash: leaf, Hashes: p, Checkpoint: Checkpoint{Size: size, Root: leaf}}
		if proof.Check() == nil && (index < 0 || index >= size) {
			t.Fatalf("proved leaf %d in a tree of %d", index, size)
		}
	})
}

// A frontier read back from a store of the tree's hashes at FrontierIndexes is the one
// built leaf by leaf: what an append restores when its kept edge is not the database's.
func TestFrontierIndexesRestoreTheFrontier(t *testing.T) {
	store := map[int64]tlog.Hash{}
	var f Frontier
	for n := int64(0); n <= 300; n++ {
		idx := FrontierIndexes(n)
		hashes := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok := store[x]
			if !ok {
				t.Fatalf("size %d: storage index %d is not stored yet", n, x)
			}
			hashes[i] = h
		}
		back, err := FrontierOf(n, hashes)
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if back.Root() != f.Root() || fmt.Sprint(back.Hashes()) != fmt.Sprint(f.Hashes()) {
			t.Fatalf("size %d: restored frontier differs", n)
		}
		leaf := tlog.RecordHash([]byte(fmt.Sprint("leaf ", n)))
		for i, h := range f.Add(leaf, nil) {
			store[tlog.StoredHashIndex(0, n)+int64(i)] = h
		}
	}
}

// The tree's size read back from how many hashes it stores is the size that stored them;
// a count that ends inside an append is refused.
func TestSizeOfStoredHashes(t *testing.T) {
	counts := map[int64]int64{}
	for n := int64(0); n <= 1030; n++ {
		counts[tlog.StoredHashCount(n)] = n
	}
	for c := int64(0); c <= tlog.StoredHashCount(1030); c++ {
		n, err := SizeOfStoredHashes(c)
		if want, ok := counts[c]; ok {
			if err != nil || n != want {
				t.Fatalf("%d hashes: %d, %v; want %d", c, n, err, want)
			}
		} else if err == nil {
			t.Fatalf("%d hashes end inside an append, yet gave size %d", c, n)
		}
	}
	if n, err := SizeOfStoredHashes(tlog.StoredHashCount(MaxTreeSize)); err != nil || n != MaxTreeSize {
		t.Fatalf("the largest tree's hashes: %d, %v", n, err)
	}
	for _, c := range []int64{-1, tlog.StoredHashCount(MaxTreeSize) - 1} {
		if n, err := SizeOfStoredHashes(c); err == nil {
			t.Fatalf("%d hashes gave %d", c, n)
		}
	}
}

// BenchmarkSealAtAppend is what sealing adds to an append in Go: the root of the tree the
// leaf ends (from the frontier an append holds anyway) and its HMAC, at a million events.
func BenchmarkSealAtAppend(b *testing.B) {
	k, err := EphemeralKey()
	if err != nil {
		b.Fatal(err)
	}
	var f Frontier
	var stored []tlog.Hash
	for i := range 1 << 20 {
		stored = f.Add(tlog.RecordHash([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), stored)
	}
	b.ResetTimer()
	for i := range b.N {
		g, _ := FrontierOf(f.Size(), f.Hashes())
		g.Add(tlog.RecordHash([]byte{byte(i)}), nil)
		_ = k.Sealer.Seal(Head{Size: g.Size(), Root: g.Root()})
	}
}

// A replica's witness keeps only growing heads, survives a restart (its file), and a file
// changed into something else is refused, saying what to do.
func TestWitnessKeepsTheNewestHeadsAcrossARestart(t *testing.T) {
	path := t.TempDir() + "/" + WitnessFile
	w, err := OpenWitness(path)
	if err != nil || len(w.Heads()) != 0 {
		t.Fatalf("a new witness: %v %v", w.Heads(), err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w.Appended(Head{Size: 5, Root: tlog.Hash{5}, At: at})
	w.Appended(Head{Size: 4, Root: tlog.Hash{4}, At: at}) // smaller: ignored
	w.Saw(Head{Size: 3, Root: tlog.Hash{3}, At: at})
	w.SignedHead(Head{Size: 3, Root: tlog.Hash{3}, At: at})
	if err := w.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenWitness(path)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(again.Heads())
	want := fmt.Sprint([]Witnessed{
		{Head{3, tlog.Hash{3}, at}, "the checkpoint this replica signed", true},
		{Head{3, tlog.Hash{3}, at}, "this replica's last check", false},
		{Head{5, tlog.Hash{5}, at}, "this replica's last append", false},
	})
	if got != want {
		t.Fatalf("read back %s, want %s", got, want)
	}
	if err := os.WriteFile(path, []byte(`{"appended": {"size": 5, "root": "not a hash"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWitness(path); err == nil || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("a changed witness: %v", err)
	}
}

// A seal binds the size and the root: any other head, or another key, does not match.
func TestSealsBindTheTreeHead(t *testing.T) {
	k, err := EphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	other := testSigner(t)
	h := Head{Size: 7, Root: tlog.Hash{7}}
	seal := k.Sealer.Seal(h)
	check := k.Sealer.Checker()
	if !check(h, seal) || check(Head{Size: 8, Root: h.Root}, seal) || check(Head{Size: 7, Root: tlog.Hash{8}}, seal) ||
		other.Sealer.Checker()(h, seal) || check(h, seal[:31]) || check(h, nil) {
		t.Fatal("a seal matches a head, key or length it was not made for")
	}
}
