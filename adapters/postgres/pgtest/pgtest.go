// Package pgtest gives each test its own fresh, migrated database on the real PostgreSQL
// named by APELORA_TEST_DATABASE_URL (scripts/test-deps.sh starts one and prints it).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/migrations"
)

// EnvVar names the admin connection string tests use to create their databases.
const EnvVar = "APELORA_TEST_DATABASE_URL"

// DB is a test's own database.
type DB struct {
	Name  string
	URL   string
	Store *postgres.Store
}

// AdminURL returns the admin connection string, skipping the test loudly when there is
// none (and failing it under CI, where a missing database is a broken set-up).
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvVar)
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set under CI: scripts/test-deps.sh must start PostgreSQL first", EnvVar)
		}
		t.Skipf("SKIPPED: no real PostgreSQL: set %s (run the tests with scripts/test.sh, which starts one)", EnvVar)
	}
	return u
}

// New creates a fresh database, applies the migrations and returns a store on it. The
// database is dropped when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	db := create(t)
	if _, err := db.Store.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return db
}

// NewBefore creates a fresh database with only the migrations numbered below version
// applied, as a previous release left it, and returns a store on it: a test writes what
// that release wrote, then calls Store.Migrate to apply the rest as an upgrade does. The
// database is dropped when the test ends.
func NewBefore(t testing.TB, version int) *DB {
	t.Helper()
	db := create(t)
	ctx := context.Background()
	names, err := fs.Glob(migrations.Files, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if _, err := db.Store.Pool().Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		num, _, _ := strings.Cut(n, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		if v >= version {
			break
		}
		sql, err := fs.ReadFile(migrations.Files, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Store.Pool().Exec(ctx, string(sql)); err != nil {
			t.Fatalf("apply migration %s: %v", n, err)
		}
		if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, v, n); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// create creates an empty database, dropped when the test ends, with a store on it.
func create(t testing.TB) *DB {
	t.Helper()
	admin := AdminURL(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "apelora_test_" + hex.EncodeToString(b[:])

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		t.Fatalf("create test database: %v", err)
	}
	conn.Close(ctx)

	url, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}

	store, err := postgres.Open(ctx, url, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	Seal(t, store)
	t.Cleanup(func() {
		store.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return &DB{Name: name, URL: url, Store: store}
}

// Seal has store seal audit events with the test process's key (auditlog.EphemeralKey),
// the one a product built in code without a state folder uses: as a server's store holds
// the audit key, every store a test opens on its database must.
func Seal(t testing.TB, store *postgres.Store) {
	t.Helper()
	k, err := auditlog.EphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	store.SealAuditWith(k.Sealer)
}

// WithDatabase returns the connection string connStr pointed at database db. It accepts
// both URL and key=value forms.
func WithDatabase(connStr, db string) (string, error) {
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := url.Parse(connStr)
		if err != nil {
			return "", err
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	// In key=value form a later key wins.
	return connStr + " dbname=" + db, nil
}

// Dump returns the whole database as pg_dump prints it (schema and data), so tests can
// prove that a secret is stored nowhere.
func (db *DB) Dump(t testing.TB) string {
	t.Helper()
	bin := "pg_dump"
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump"); len(dirs) > 0 {
		sort.Strings(dirs)
		bin = dirs[len(dirs)-1]
	}
	out, err := exec.Command(bin, "--no-owner", "--dbname", db.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PostgreSQL database dump") {
		t.Fatalf("pg_dump printed no dump:\n%s", out)
	}
	return string(out)
}

// EnvironmentCluster records the cluster APELORA_INCUS_* would name (adopted, through a
// socket no daemon answers on) and returns its id: what a store test needs before it
// writes a member table's row (admissions, fence events …) as the product's code of this
// release does, naming no cluster (migration 0040 puts such a row in the environment's
// cluster). The product adopts its own at start (clusters.Adopt).
func (db *DB) EnvironmentCluster(t testing.TB) int64 {
	t.Helper()
	var id int64
	if err := db.Store.Pool().QueryRow(context.Background(), `INSERT INTO clusters (name, socket, from_environment, registered_by)
		VALUES ('default', '/nonexistent/apelora-test/unix.socket', true, 'pgtest') RETURNING id`).Scan(&id); err != nil {
		t.Fatalf("record the environment's cluster: %v", err)
	}
	return id
}
