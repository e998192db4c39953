package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
)

func TestStatementNameIsBoundedByTheSchema(t *testing.T) {
	for sql, want := range map[string]string{
		`INSERT INTO audit_events (actor) VALUES ($1) RETURNING id`:       "INSERT audit_events",
		"  select id, name\n\tFROM machine_records WHERE name = $1":       "SELECT machine_records",
		`SELECT pg_try_advisory_xact_lock($1, hashtext($2))`:              "SELECT pg_try_advisory_xact_lock",
		`WITH x AS (SELECT 1) UPDATE identities SET last_used_at = now()`: "WITH identities",
		`begin`:   "BEGIN",
		`-- ping`: "ping",
		`/* machine_records */ SELECT 'audit_events', $1 FROM fence_events`: "SELECT fence_events",
		`SELECT 'identities'`:                                                             "SELECT",
		`SELECT name FROM hostile_table_name_0123456789`:                                  "SELECT",
		`VACUUM machine_records`:                                                          "other",
		`CREATE TABLE IF NOT EXISTS schema_migrations (version int)`:                      "CREATE schema_migrations",
		`SELECT 'it''s machine_records' FROM console_sessions`:                            "SELECT console_sessions",
		`SELECT $1::text -- apl_0123456789abcdef0123456789abcdef0123456789a in a comment`: "SELECT",
	} {
		if got := postgres.StatementName(sql); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

type recorder struct {
	mu         sync.Mutex
	statements map[string]int
	failed     int
	audits     []error
}

func (r *recorder) Statement(name string, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statements == nil {
		r.statements = map[string]int{}
	}
	r.statements[name]++
	if err != nil {
		r.failed++
	}
}

func (r *recorder) AuditWrite(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.audits = append(r.audits, err)
}

// Every statement and every audit write reaches the observer, failures included.
func TestObserverSeesStatementsAndAuditWrites(t *testing.T) {
	db := pgtest.New(t)
	rec := &recorder{}
	db.Store.Observe(rec)
	ctx := audited("registerMachine")
	if err := db.Store.Audited(ctx, "node-1", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.RecordAudit(context.Background(), audit.Event{Actor: "a", Action: "x", Outcome: audit.Refused}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	if rec.statements["INSERT audit_events"] != 2 || rec.statements["BEGIN"] < 2 || rec.statements["COMMIT"] < 2 ||
		rec.statements["INSERT change_leases"] != 1 || rec.statements["UPDATE change_leases"] != 1 || len(rec.audits) != 2 || rec.audits[0] != nil || rec.audits[1] != nil {
		t.Fatalf("statements %v, audit writes %v", rec.statements, rec.audits)
	}
	for name := range rec.statements {
		if strings.ContainsAny(name, "$(),'") {
			t.Errorf("statement name %q carries SQL text", name)
		}
	}
	rec.mu.Unlock()

	// An audit insert the database refuses is a failed write.
	if _, err := db.Store.Pool().Exec(context.Background(), `ALTER TABLE audit_events ADD CONSTRAINT no_more_audit CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Audited(audited("registerMachine"), "node-2", func(context.Context) error { return nil }); err == nil {
		t.Fatal("a change whose audit event was refused succeeded")
	}
	if err := db.Store.RecordAudit(context.Background(), audit.Event{Actor: "a", Action: "x", Outcome: audit.Failed}); err == nil {
		t.Fatal("an audit event the database refused was written")
	}
	rec.mu.Lock()
	if len(rec.audits) != 4 || rec.audits[2] == nil || rec.audits[3] == nil || rec.failed < 2 {
		t.Fatalf("after refused inserts: audit writes %v, failed statements %d", rec.audits, rec.failed)
	}
	before := rec.statements["SELECT"]
	rec.mu.Unlock()

	db.Store.Observe(nil) // no observer: nothing is told
	if _, err := db.Store.Pool().Exec(context.Background(), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.statements["SELECT"] != before {
		t.Fatal("a removed observer was still told of a statement")
	}
}
