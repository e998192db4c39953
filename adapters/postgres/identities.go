package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/identity"
)

var _ identity.Store = (*Store)(nil)

// identityColumns are what every credential's lookup reads of its identity (`identities i`):
// bearer tokens here, console sessions in sessions.go. Whatever decides that an identity
// may authenticate is read here and judged in identity.usable, for both alike.
const identityColumns = `i.id, i.name, i.permissions, i.created_at`

// scanIdentity reads identityColumns, then extra.
func scanIdentity(row pgx.Row, extra ...any) (*identity.Identity, error) {
	var id identity.Identity
	var perms []string
	if err := row.Scan(append([]any{&id.ID, &id.Name, &perms, &id.CreatedAt}, extra...)...); err != nil {
		return nil, err
	}
	for _, p := range perms {
		id.Permissions = append(id.Permissions, identity.Permission(p))
	}
	return &id, nil
}

// IdentityByTokenHash returns the identity whose token hashes to hash, or nil.
func (s *Store) IdentityByTokenHash(ctx context.Context, hash []byte) (*identity.Identity, error) {
	id, err := scanIdentity(s.pool.QueryRow(ctx, `SELECT `+identityColumns+` FROM identities i WHERE i.token_hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return id, nil
}

// CreateIdentity stores a new identity with the hash of its token.
func (s *Store) CreateIdentity(ctx context.Context, name string, hash []byte, perms []identity.Permission) (*identity.Identity, error) {
	ps := make([]string, len(perms))
	for i, p := range perms {
		ps[i] = string(p)
	}
	id := identity.Identity{Name: name, Permissions: perms}
	err := s.pool.QueryRow(ctx, `INSERT INTO identities (name, token_hash, permissions) VALUES ($1, $2, $3) RETURNING id, created_at`,
		name, hash, ps).Scan(&id.ID, &id.CreatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "identities_name_key" {
		return nil, apperr.New(apperr.AlreadyExists, "an identity named %q already exists: choose another name", name)
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &id, nil
}
