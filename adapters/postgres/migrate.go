package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/apelora/fabric/migrations"
)

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		num, _, ok := strings.Cut(n, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q is not named NNNN_what.sql", n)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: n, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations have version %d", out[i].version)
		}
	}
	return out, nil
}

// Migrate applies the embedded migrations that the database lacks, each in its own
// transaction. Several processes may call it at once: a session advisory lock makes them
// take turns. It returns the names of the migrations it applied.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	ms, err := loadMigrations(migrations.Files)
	if err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, 0)`, lockNamespace); err != nil {
		return nil, dbError(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, 0)`, lockNamespace)

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", dbError(err))
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, dbError(err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, dbError(err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}
	var done []string
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return done, dbError(err)
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			tx.Rollback(ctx)
			return done, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if step := afterMigration[m.version]; step != nil {
			if err := step(ctx, tx); err != nil {
				tx.Rollback(ctx)
				return done, fmt.Errorf("apply migration %s: %w", m.name, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			tx.Rollback(ctx)
			return done, fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return done, fmt.Errorf("commit migration %s: %w", m.name, err)
		}
		done = append(done, m.name)
	}
	return done, nil
}
