package auditsink

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A line half-written when the process died was never acknowledged: opening the file
// again cuts it off, so the line sent again is whole and the file stays one JSON object a
// line.
func TestJSONLCutsAHalfWrittenLineBeforeAppending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte("{\"leafIndex\":0}\n{\"leafIndex\":1}\n{\"leafInd"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := &JSONL{Path: path}
	if err := j.Deliver(context.Background(), [][]byte{[]byte(`{"leafIndex":2}`)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := j.Deliver(context.Background(), [][]byte{[]byte(`{"leafIndex":3}`)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	b, _ := os.ReadFile(path)
	if want := "{\"leafIndex\":0}\n{\"leafIndex\":1}\n{\"leafIndex\":2}\n{\"leafIndex\":3}\n"; string(b) != want {
		t.Fatalf("file:\n%q\nwant\n%q", b, want)
	}
	// A file of one partial line is emptied.
	os.WriteFile(path, []byte(`{"leaf`), 0o600)
	if err := j.Deliver(context.Background(), [][]byte{[]byte(`{"leafIndex":0}`)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if b, _ := os.ReadFile(path); string(b) != "{\"leafIndex\":0}\n" {
		t.Fatalf("file: %q", b)
	}
}

// logrotate renames the file: the next batch goes to a new file at the path, and the two
// read one after the other are the whole export.
func TestJSONLFollowsARotatedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	j := &JSONL{Path: path}
	defer j.Close()
	if err := j.Deliver(context.Background(), [][]byte{[]byte(`{"leafIndex":0}`)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := j.Deliver(context.Background(), [][]byte{[]byte(`{"leafIndex":1}`)}); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if string(old) != "{\"leafIndex\":0}\n" || string(cur) != "{\"leafIndex\":1}\n" {
		t.Fatalf("rotated %q, new %q", old, cur)
	}
}
