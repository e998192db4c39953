package auditexport

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditlog"
)

func testKey(t *testing.T) *auditlog.Key {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, auditlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	k, err := auditlog.KeyFromText(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t *testing.T, k *auditlog.Key, hashes []tlog.Hash) *auditlog.Checkpoint {
	t.Helper()
	var f auditlog.Frontier
	for _, h := range hashes {
		f.Add(h, nil)
	}
	msg, err := note.Sign(&note.Note{Text: string(tlog.FormatTree(tlog.Tree{N: f.Size(), Hash: f.Root()}))}, k.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return &auditlog.Checkpoint{Size: f.Size(), Root: f.Root(), Signed: string(msg)}
}

// export makes the lines of n events as the exporter sends them: in batches of 4, each
// line carrying the checkpoint signed after its batch was read (it covers the batch).
func export(t *testing.T, k *auditlog.Key, n int) []string {
	t.Helper()
	var events []auditlog.StoredEvent
	var hashes []tlog.Hash
	for i := range n {
		r := auditlog.Record{ID: int64(100 + i), At: time.UnixMicro(1700000000000000 + int64(i)*1234567).UTC(), Actor: "admin",
			Action: "registerMachine", Machine: fmt.Sprintf("node-%d", i), Outcome: "SUCCEEDED", RequestID: fmt.Sprint("req-", i),
			Parameters: fmt.Sprintf(`{"name": "node-%d", "note": "é\n<&>"}`, i), Details: `{}`}
		e := auditlog.StoredEvent{Record: r, HasLeaf: true, LeafIndex: int64(i), LeafHash: r.LeafHash()}
		events, hashes = append(events, e), append(hashes, e.LeafHash)
	}
	var lines []string
	for start := 0; start < n; start += 4 {
		end := min(start+4, n)
		cp := sign(t, k, hashes[:end])
		for _, e := range events[start:end] {
			b, err := Encode(e, cp)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(b))
		}
	}
	return lines
}

func verify(t *testing.T, k *auditlog.Key, lines []string) ExportReport {
	t.Helper()
	rep, err := VerifyExport(strings.NewReader(strings.Join(lines, "\n")+"\n"), k.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestAnExportVerifiesAndRedeliveriesAreAccepted(t *testing.T) {
	k := testKey(t)
	lines := export(t, k, 10)
	rep := verify(t, k, lines)
	if rep.Problem != nil || rep.Events != 10 || rep.Verified != 10 || rep.Checkpoints != 3 || rep.Duplicates != 0 {
		t.Fatalf("a whole export: %+v %v", rep, rep.Problem)
	}
	// A syslog receiver's lines: a header before the JSON; a batch sent twice after a
	// broken connection.
	var syslog []string
	for i, l := range lines {
		syslog = append(syslog, "<110>1 2026-12-03T22:00:00.000000Z host apelora 42 audit - "+l)
		if i == 7 {
			syslog = append(syslog, "<110>1 2026-12-03T22:00:00.000000Z host apelora 42 audit - "+lines[4], "<110>1 x "+lines[5])
		}
	}
	rep = verify(t, k, syslog)
	if rep.Problem != nil || rep.Events != 10 || rep.Duplicates != 2 || rep.Verified != 10 {
		t.Fatalf("syslog lines with a redelivery: %+v %v", rep, rep.Problem)
	}
}

// Each way a SIEM's copy can be tampered with or lose events is named at its line.
func TestAnExportNamesTheFirstLineThatDoesNotFit(t *testing.T) {
	k := testKey(t)
	lines := export(t, k, 10)
	cases := map[string]struct {
		lines []string
		line  int64
		want  string
	}{
		"field changed": {replaceLine(lines, 3, strings.Replace(lines[3], `"actor":"admin"`, `"actor":"mallory"`, 1)), 4, "do not give its leaf hash"},
		"line deleted":  {append(append([]string{}, lines[:5]...), lines[6:]...), 6, "1 event(s) before it are missing"},
		"lines swapped": {swap(lines, 2, 3), 3, "leaf 3 where leaf 2 was expected"},
		"first lost":    {lines[1:], 1, "leaf 1 where leaf 0 was expected"},
		"rewritten redelivery": {append(append([]string{}, lines...), reHash(t, lines[2])), 11,
			"read before with other contents"},
		"another key's checkpoint": {export(t, testKey(t), 10), 1, "cannot be trusted"},
		"not an export":            {[]string{"hello"}, 1, "no JSON object"},
	}
	for name, c := range cases {
		rep := verify(t, k, c.lines)
		if rep.Problem == nil || rep.Problem.Line != c.line || !strings.Contains(rep.Problem.Message, c.want) {
			t.Errorf("%s: %+v; want line %d, %q", name, rep.Problem, c.line, c.want)
		}
	}
	// A line changed together with its leaf hash: the checkpoint over it no longer matches.
	rep := verify(t, k, replaceLine(lines, 1, reHash(t, lines[1])))
	if rep.Problem == nil || rep.Problem.Line != 4 || !strings.Contains(rep.Problem.Message, "does not match the exported leaves 0 to 3") {
		t.Errorf("rehashed line: %+v", rep.Problem)
	}
}

func replaceLine(lines []string, i int, l string) []string {
	out := append([]string{}, lines...)
	out[i] = l
	return out
}

func swap(lines []string, i, j int) []string {
	out := append([]string{}, lines...)
	out[i], out[j] = out[j], out[i]
	return out
}

// reHash changes a line's actor and gives it the leaf hash of its new fields, as someone
// who knows the encoding would.
func reHash(t *testing.T, line string) string {
	t.Helper()
	var l Line
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatal(err)
	}
	l.Event.Actor = "mallory"
	r, err := l.Record()
	if err != nil {
		t.Fatal(err)
	}
	l.LeafHash = r.LeafHash().String()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, []byte(line)) {
		t.Fatal("nothing changed")
	}
	return string(b)
}
