package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Audited runs fn holding the machine's lock and, when fn succeeds, writes the audit
// event of the mutation in progress, for steps whose change happens outside the database
// (in Incus or MAAS).
func (s *Store) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return s.change(ctx, machine, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
}
