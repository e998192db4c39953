package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/localpg"
)

// Database is an open, migrated database, and the local PostgreSQL behind it if Apelora
// started one.
type Database struct {
	Store *postgres.Store
	local *localpg.Server
}

// OpenDatabase connects to APELORA_DATABASE_URL, or starts (or reuses) the local
// PostgreSQL in the state folder when none is set, and applies the migrations.
func OpenDatabase(ctx context.Context, cfg Config, log *slog.Logger) (*Database, error) {
	db := &Database{}
	url := cfg.DatabaseURL
	if url == "" {
		local, err := localpg.New(filepath.Join(cfg.StateDir, "postgres"))
		if err != nil {
			return nil, err
		}
		if err := local.Start(ctx, "apelora"); err != nil {
			return nil, err
		}
		if local.Started() {
			db.local = local
		}
		log.Info("no APELORA_DATABASE_URL: using a local PostgreSQL from the system's binaries",
			"data", local.DataDir(), "socket", local.SocketDir(), "binaries", local.BinDir, "started_here", local.Started())
		url = local.URL("apelora")
	}
	store, err := postgres.Open(ctx, url, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Metrics != nil {
		store.Observe(cfg.Metrics)
	}
	db.Store = store
	applied, err := store.Migrate(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("apply database migrations: %w", err)
	}
	if len(applied) > 0 {
		log.Info("applied database migrations", "migrations", applied)
	}
	return db, nil
}

// Close closes the connections and stops the local PostgreSQL if this process started it.
func (d *Database) Close() {
	if d.Store != nil {
		d.Store.Close()
	}
	if d.local != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.local.Stop(ctx)
	}
}
