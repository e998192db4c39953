package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditexport"
	"github.com/apelora/fabric/domain/auditlog"
)

// auditTrail is a test database with 25 events, the first 20 under a signed checkpoint,
// and the environment `apelora audit` reads.
type auditTrail struct {
	db    *pgtest.DB
	ids   []int64
	state string
	key   *auditlog.Key
}

func newAuditTrail(t *testing.T) *auditTrail {
	t.Helper()
	db := pgtest.New(t)
	a := &auditTrail{db: db, state: t.TempDir()}
	t.Setenv("APELORA_DATABASE_URL", db.URL)
	t.Setenv("APELORA_STATE_DIR", a.state)
	t.Setenv("APELORA_AUDIT_KEY_FILE", "")
	// The events are recorded as a server records them: sealed with its audit key.
	k, _, err := auditlog.LoadOrCreateKey(filepath.Join(a.state, auditlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	db.Store.SealAuditWith(k.Sealer)
	a.key = k
	ctx := context.Background()
	record := func(from, to int) {
		for i := from; i < to; i++ {
			e := audit.Event{Actor: fmt.Sprintf("admin-%d", i%3), Action: "registerMachine", Machine: fmt.Sprintf("node-%d", i),
				Outcome: audit.Succeeded, RequestID: fmt.Sprintf("req-%d", i), Parameters: map[string]any{"name": fmt.Sprintf("node-%d", i)}}
			if err := db.Store.RecordAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(0, 20)
	if out, log, err := a.run("audit", "checkpoint"); err != nil || !strings.Contains(out, "signed a checkpoint of 20 events") {
		t.Fatalf("audit checkpoint: %v\n%s\n%s", err, out, log)
	}
	record(20, 25)
	rows, err := db.Store.Pool().Query(ctx, `SELECT id FROM audit_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		a.ids = append(a.ids, id)
	}
	if rows.Err() != nil || len(a.ids) != 25 {
		t.Fatalf("read the ids: %v, %d", rows.Err(), len(a.ids))
	}
	return a
}

func otherKey(t *testing.T) *auditlog.Key {
	t.Helper()
	k, _, err := auditlog.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// root is the stored tree's root hash at n events.
func (a *auditTrail) root(t *testing.T, n int64) tlog.Hash {
	t.Helper()
	ctx := context.Background()
	h, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return a.db.Store.AuditTreeHashes(ctx, idx) }))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkpointRow inserts, as a superuser would, a checkpoint row of size rowSize whose
// text k signed for the tree of n events.
func (a *auditTrail) checkpointRow(t *testing.T, k *auditlog.Key, n, rowSize int64) {
	t.Helper()
	root := a.root(t, n)
	signed, err := auditlog.SignCheckpoint(k, auditlog.Head{Size: n, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.db.Store.Pool().Exec(context.Background(), `INSERT INTO audit_checkpoints (tree_size, root_hash, signed) VALUES ($1, $2, $3)`,
		rowSize, root[:], signed); err != nil {
		t.Fatal(err)
	}
}

// forge inserts an event after the others as someone who knows RFC 6962 but not the audit
// key would: its leaf hash, leaf index and the tree hashes it completes computed, and
// sealed with k (nil: no seal). It returns the event's id.
func (a *auditTrail) forge(t *testing.T, k *auditlog.Key) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	if err := a.db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	a.sql(t, `SELECT 1`)
	var r auditlog.Record
	err := a.db.Store.Pool().QueryRow(ctx, `INSERT INTO audit_events (actor, action, outcome, request_id) VALUES ('mallory', 'createIdentity', 'SUCCEEDED', 'forged')
		RETURNING id, at, actor, action, coalesce(machine, ''), outcome, coalesce(error, ''), request_id, parameters::text, details::text`).
		Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Machine, &r.Outcome, &r.Error, &r.RequestID, &r.Parameters, &r.Details)
	if err != nil {
		t.Fatal(err)
	}
	leaf := r.LeafHash()
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return a.db.Store.AuditTreeHashes(ctx, idx) })
	hashes, err := tlog.StoredHashes(n, r.Leaf(), reader)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hashes {
		if _, err := a.db.Store.Pool().Exec(ctx, `INSERT INTO audit_tree_hashes (storage_index, hash) VALUES ($1, $2)`, tlog.StoredHashIndex(0, n)+int64(i), h[:]); err != nil {
			t.Fatal(err)
		}
	}
	var seal []byte
	if k != nil {
		seal = k.Sealer.Seal(auditlog.Head{Size: n + 1, Root: a.root(t, n+1)})
	}
	a.sql(t, fmt.Sprintf(`UPDATE audit_events SET leaf_index = %d, leaf_hash = '\x%x', seal = %s WHERE id = %d`, n, leaf[:], sqlBytes(seal), r.ID))
	return r.ID
}

func sqlBytes(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return fmt.Sprintf(`'\x%x'`, b)
}

func (a *auditTrail) run(args ...string) (string, string, error) {
	var out, log bytes.Buffer
	err := run(context.Background(), args, &out, &log)
	return out.String(), log.String(), err
}

// sql runs statements as the test database's superuser, the append-only trigger
// disabled and the rule that every new event is sealed dropped, as a superuser would.
func (a *auditTrail) sql(t *testing.T, stmts string) {
	t.Helper()
	_, err := a.db.Store.Pool().Exec(context.Background(), `ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only;
		ALTER TABLE audit_events DROP CONSTRAINT IF EXISTS audit_events_sealed; `+stmts)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func TestAuditVerifyPassesAnUntouchedLog(t *testing.T) {
	a := newAuditTrail(t)
	out, log, err := a.run("audit", "verify")
	if err != nil || !strings.Contains(out, "the audit log verifies: 25 events, 1 checkpoints") {
		t.Fatalf("audit verify: %v\n%s\n%s", err, out, log)
	}
	k, err := auditlog.LoadKey(filepath.Join(a.state, auditlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := a.run("audit", "verify", "--verifier-key", k.VerifierKey); err != nil || !strings.Contains(out, "verifies") {
		t.Fatalf("audit verify --verifier-key: %v %s", err, out)
	}
}

// Each tampering a database superuser can do makes `apelora audit verify` fail, naming
// the first event it affects.
func TestAuditVerifyNamesTheFirstTamperedEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, a *auditTrail) (want string)
	}{
		{"an updated row", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`UPDATE audit_events SET actor = 'mallory' WHERE id = %d`, a.ids[7]))
			return fmt.Sprintf("event %d: its contents do not match", a.ids[7])
		}},
		{"an updated row with its leaf hash recomputed", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`UPDATE audit_events SET outcome = 'FAILED' WHERE id = %d`, a.ids[3]))
			var r auditlog.Record
			err := a.db.Store.Pool().QueryRow(context.Background(), `SELECT id, at, actor, action, coalesce(machine, ''), outcome,
				coalesce(error, ''), request_id, parameters::text, details::text FROM audit_events WHERE id = $1`, a.ids[3]).
				Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Machine, &r.Outcome, &r.Error, &r.RequestID, &r.Parameters, &r.Details)
			if err != nil {
				t.Fatal(err)
			}
			h := r.LeafHash()
			if _, err := a.db.Store.Pool().Exec(context.Background(), `UPDATE audit_events SET leaf_hash = $1 WHERE id = $2`, h[:], a.ids[3]); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("event %d: the stored tree's hash differs", a.ids[3])
		}},
		{"a deleted row", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, a.ids[12]))
			return fmt.Sprintf("event %d: it is leaf 13 where leaf 12 was expected: 1 event(s) before it were deleted", a.ids[13])
		}},
		{"the last row deleted", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, a.ids[24]))
			return fmt.Sprintf("events after event %d were deleted", a.ids[23])
		}},
		{"the checkpointed rows deleted from the end", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id >= %d; ALTER TABLE audit_tree_hashes DISABLE TRIGGER ALL;
				DELETE FROM audit_tree_hashes WHERE storage_index >= %d`, a.ids[15], 2*15-1))
			return "the checkpoint of 20 events (signed at"
		}},
		{"an inserted row", func(t *testing.T, a *auditTrail) string {
			a.sql(t, `SELECT 1`)
			var id int64
			if err := a.db.Store.Pool().QueryRow(context.Background(), `INSERT INTO audit_events (actor, action, outcome, request_id)
				VALUES ('mallory', 'registerMachine', 'SUCCEEDED', 'forged') RETURNING id`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("event %d: it has no leaf in the audit log", id)
		}},
		{"a row inserted before the others", func(t *testing.T, a *auditTrail) string {
			a.sql(t, `INSERT INTO audit_events (id, actor, action, outcome, request_id) VALUES (0, 'mallory', 'registerMachine', 'SUCCEEDED', 'forged')`)
			return "event 0: it has no leaf in the audit log"
		}},
		{"a row inserted with a copied leaf", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`ALTER TABLE audit_events DROP CONSTRAINT audit_events_leaf_index_key;
				INSERT INTO audit_events (id, at, actor, action, machine, parameters, outcome, error, request_id, details, leaf_index, leaf_hash)
				SELECT 1000, at, actor, action, machine, parameters, outcome, error, request_id, details, leaf_index, leaf_hash FROM audit_events WHERE id = %d`, a.ids[24]))
			return "event 1000: its contents do not match"
		}},
		{"two rows swapped", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`UPDATE audit_events e SET at = o.at, actor = o.actor, action = o.action, machine = o.machine,
				parameters = o.parameters, outcome = o.outcome, error = o.error, request_id = o.request_id, details = o.details
				FROM audit_events o WHERE (e.id, o.id) IN ((%[1]d, %[2]d), (%[2]d, %[1]d))`, a.ids[5], a.ids[9]))
			return fmt.Sprintf("event %d: its contents do not match", a.ids[5])
		}},
		{"two rows swapped with their leaves", func(t *testing.T, a *auditTrail) string {
			a.sql(t, fmt.Sprintf(`ALTER TABLE audit_events DROP CONSTRAINT audit_events_leaf_index_key;
				UPDATE audit_events e SET leaf_index = o.leaf_index, leaf_hash = o.leaf_hash, at = o.at, actor = o.actor, action = o.action,
				machine = o.machine, parameters = o.parameters, outcome = o.outcome, error = o.error, request_id = o.request_id, details = o.details
				FROM audit_events o WHERE (e.id, o.id) IN ((%[1]d, %[2]d), (%[2]d, %[1]d))`, a.ids[5], a.ids[9]))
			return fmt.Sprintf("event %d: its contents do not match", a.ids[5])
		}},
		{"a checkpoint signed with another key", func(t *testing.T, a *auditTrail) string {
			a.checkpointRow(t, otherKey(t), 25, 25)
			return fmt.Sprintf("event %d: the checkpoint of 25 events (signed at", a.ids[24])
		}},
		{"a checkpoint claiming 1,000,000 events", func(t *testing.T, a *auditTrail) string {
			a.checkpointRow(t, otherKey(t), 25, 1000000)
			return "the checkpoint of 1000000 events (signed at"
		}},
		{"an event inserted after the checkpoint with its leaf and tree hashes computed", func(t *testing.T, a *auditTrail) string {
			return fmt.Sprintf("event %d: it has no seal", a.forge(t, nil))
		}},
		{"an event inserted with its hashes computed and a seal of another key", func(t *testing.T, a *auditTrail) string {
			return fmt.Sprintf("event %d: its seal does not match the tree of 26 events", a.forge(t, otherKey(t)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAuditTrail(t)
			want := c.tamper(t, a)
			out, log, err := a.run("audit", "verify")
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("audit verify after %s: %v, want an error with %q\n%s\n%s", c.name, err, want, out, log)
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}

// The signing key is made on first use as a file only its owner reads, and is in no table,
// no output and no log; a verifier key that is not the audit key's refuses the checkpoints.
func TestAuditSigningKeyStaysInItsFile(t *testing.T) {
	a := newAuditTrail(t)
	path := filepath.Join(a.state, auditlog.KeyFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(path)
	secret := strings.TrimSpace(string(raw))
	secret = secret[strings.LastIndex(secret[:len(secret)-45], "+")+1:] // the key's base64 (which may hold '+')
	if len(secret) < 40 {
		t.Fatalf("the key's secret part is %q", secret)
	}
	var all strings.Builder
	for _, args := range [][]string{{"audit", "checkpoint"}, {"audit", "verify"}} {
		out, log, err := a.run(args...)
		all.WriteString(out + log + fmt.Sprint(err))
	}
	os.WriteFile(path, []byte("PRIVATE+KEY+broken"), 0o600)
	_, log, err := a.run("audit", "checkpoint")
	all.WriteString(log + fmt.Sprint(err))
	if err == nil || !strings.Contains(err.Error(), "is not a note signing key") {
		t.Fatalf("a broken key file: %v", err)
	}
	if strings.Contains(all.String(), secret) || strings.Contains(all.String(), "PRIVATE+KEY+broken") {
		t.Fatal("the signing key is in the output or the log")
	}
	if strings.Contains(a.db.Dump(t), secret) {
		t.Fatal("the signing key is in the database")
	}
	other, _, err := auditlog.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.run("audit", "verify", "--verifier-key", other.VerifierKey); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("event %d: the checkpoint of 20 events", a.ids[19])) {
		t.Fatalf("verify with another key: %v", err)
	}
}

// `apelora audit verify --export FILE` checks what a sink received, without the database:
// the export of the 25 events verifies up to the checkpoint of 20 (the last 5 chained but
// not yet covered), and a line changed in the SIEM's copy is named.
func TestAuditVerifyChecksAnExport(t *testing.T) {
	a := newAuditTrail(t)
	ctx := context.Background()
	events, err := a.db.Store.AuditLeavesFrom(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := a.db.Store.LatestAuditCheckpoint(ctx)
	if err != nil || cp == nil {
		t.Fatalf("latest checkpoint: %v %v", cp, err)
	}
	var lines []string
	for _, e := range events {
		b, err := auditexport.Encode(e, cp)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	write := func(lines []string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(lines)
	// No database needed: point it at none.
	t.Setenv("APELORA_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
	out, _, err := a.run("audit", "verify", "--export", file)
	if err != nil || !strings.Contains(out, "the export verifies: 25 events") || !strings.Contains(out, "verified up to checkpoint 20") ||
		!strings.Contains(out, "the last 5 events are chained") {
		t.Fatalf("an untouched export: %v\n%s", err, out)
	}
	// Rotated: the older file first, then the current one, read as one export.
	rotated := filepath.Join(t.TempDir(), "audit.jsonl.1")
	if err := os.WriteFile(rotated, []byte(strings.Join(lines[:12], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(lines[12:])
	if out, _, err := a.run("audit", "verify", "--export", rotated, file); err != nil || !strings.Contains(out, "the export verifies: 25 events") {
		t.Fatalf("a rotated export: %v\n%s", err, out)
	}
	if _, _, err := a.run("audit", "verify", "--export", file); err == nil || !strings.Contains(err.Error(), "leaf 12 where leaf 0 was expected") {
		t.Fatalf("the current file alone: %v", err)
	}
	lines[7] = strings.Replace(lines[7], `"actor":"admin-1"`, `"actor":"admin-0"`, 1)
	write(lines)
	out, _, err = a.run("audit", "verify", "--export", file)
	if err == nil || !strings.Contains(err.Error(), "line 8: event") || !strings.Contains(err.Error(), "changed after Apelora exported it") {
		t.Fatalf("a changed line: %v\n%s", err, out)
	}
}

// A SIEM export witnesses the trail outside the database: after the newest events were
// deleted with their tree hashes (a trail that is whole, only shorter, and longer than the
// checkpoint this host signed and witnessed), verify over the database passes, and names
// the cut against the export (--witness-export); an export that does not verify witnesses
// nothing.
func TestAuditVerifyAgainstAnExportNamesAShortenedTrail(t *testing.T) {
	a := newAuditTrail(t)
	ctx := context.Background()
	events, err := a.db.Store.AuditLeavesFrom(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := a.db.Store.LatestAuditCheckpoint(ctx)
	if err != nil || cp == nil {
		t.Fatalf("latest checkpoint: %v %v", cp, err)
	}
	var lines []string
	for _, e := range events {
		b, err := auditexport.Encode(e, cp)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := a.run("audit", "verify", "--witness-export", file); err != nil || !strings.Contains(out, "the trail holds the 3 tree heads witnessed outside the database") {
		t.Fatalf("verify against an export of the whole trail: %v\n%s", err, out)
	}
	// The newest three events, with their tree hashes: what is left is a whole tree of 22.
	a.sql(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id >= %d; ALTER TABLE audit_tree_hashes DISABLE TRIGGER audit_tree_hashes_append_only;
		DELETE FROM audit_tree_hashes WHERE storage_index >= %d`, a.ids[22], tlog.StoredHashIndex(0, 22)))
	if out, _, err := a.run("audit", "verify"); err != nil || !strings.Contains(out, "the trail holds the 2 tree heads witnessed outside the database") {
		t.Fatalf("verify with this host's witness (the checkpoint of 20 it signed): %v\n%s", err, out)
	}
	_, _, err = a.run("audit", "verify", "--witness-export", file)
	if err == nil || !strings.Contains(err.Error(), "the export "+file+" witnessed a tree of 25 events") || !strings.Contains(err.Error(), "but the trail has 22: the newest 3 were deleted") {
		t.Fatalf("verify against the export after the cut: %v", err)
	}
	lines[3] = strings.Replace(lines[3], `"actor":"admin-0"`, `"actor":"admin-1"`, 1)
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.run("audit", "verify", "--witness-export", file); err == nil || !strings.Contains(err.Error(), "does not verify, so it cannot witness the trail") {
		t.Fatalf("verify against a changed export: %v", err)
	}
}
