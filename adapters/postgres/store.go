// Package postgres is Apelora's PostgreSQL store: machine records, identities, the audit
// trail, and the LISTEN/NOTIFY fan-out that lets several API replicas serve the same
// subscriptions.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// notify sends NOTIFYs on connections of their own: a change publishes while its
	// transaction holds a connection of pool, and must never wait for another of them.
	notify *pgxpool.Pool
	log    *slog.Logger
	// tracer sees every statement on every connection (see Observe).
	tracer *tracer
	// noting holds the ids of identities whose last use is being written (see NoteUse).
	noting sync.Map
	// writes is the seam a change's SQL writes and every NOTIFY go through (see Writes).
	writes *plan.Writes
	// auditEdge is the audit tree's right edge as this process last appended to it.
	auditEdge auditEdge
	// sealer seals every audit event appended (nil: appends are refused).
	sealer atomic.Pointer[auditlog.Sealer]
	// appendDamage is what stopped the latest append or appendability check (nil: none).
	appendDamage atomic.Pointer[auditlog.Damage]
	// changeLease is the length of the leases changes hold (0: DefaultChangeLease).
	changeLease time.Duration
}

// Writes is the seam the store's changes go through: the writes of a change (Audited and
// the domain views' Change) and every NOTIFY. App's wiring hands the same one to the
// Incus and MAAS clients, so one set of hooks (metrics) sees every write of the process.
func (s *Store) Writes() *plan.Writes { return s.writes }

// Open connects to the database at url (a postgres:// URL or a libpq key=value string).
// It does not apply migrations; call Migrate.
func Open(ctx context.Context, url string, log *slog.Logger) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error can quote the URL, password included: do not wrap it.
		return nil, errors.New("APELORA_DATABASE_URL is not a valid PostgreSQL connection string (postgres://user@host:port/db?sslmode=… or host=… dbname=…)")
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.ConnConfig.RuntimeParams["application_name"] = "apelora"
	tr := &tracer{}
	cfg.ConnConfig.Tracer = tr // connections made from copies of this config carry it too
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	ncfg := cfg.Copy()
	ncfg.MaxConns, ncfg.MinConns = 2, 0
	notify, err := pgxpool.NewWithConfig(ctx, ncfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	s := &Store{pool: pool, notify: notify, log: log, tracer: tr, writes: &plan.Writes{}}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", describe(cfg.ConnConfig), err)
	}
	return s, nil
}

// describe names the database server without credentials.
func describe(c *pgx.ConnConfig) string {
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s", c.Host, c.Port, c.Database, c.User)
}

// Close closes every connection.
func (s *Store) Close() {
	s.pool.Close()
	s.notify.Close()
}

// Pool exposes the connection pool to tests in other packages.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks the database answers, for /readyz.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return unavailable(err)
	}
	return nil
}

// unavailable turns a failure to reach the database into an error the administrator can
// act on.
func unavailable(err error) error {
	return apperr.Wrap(err, apperr.Unavailable, "the database is unreachable; nothing was changed: check PostgreSQL is running and APELORA_DATABASE_URL points at it")
}

// dbError maps a database error to an administrator's error. Constraint violations that
// mean "bad input" are handled by the callers that know which input it was.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "23503" && strings.HasSuffix(pgErr.ConstraintName, "_cluster_id_fkey") {
			// A row written for a cluster removed while the step ran (its foreign key, or
			// migration 0042's check in its place). removeCluster's own refusals are its.
			return apperr.Wrap(err, apperr.NotFound, "the Incus cluster this step acts in was removed meanwhile (removeCluster): list the clusters (clusters) and run the step again in a registered one")
		}
		return apperr.Wrap(err, apperr.Internal, "database error")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return unavailable(err)
}
