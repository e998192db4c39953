package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/mutations"
)

var (
	_ identity.Store     = (*Store)(nil)
	_ identity.Directory = (*Store)(nil)
	_ identity.ByID      = (*Store)(nil)
)

// IdentityChannel is the NOTIFY channel the identities triggers write to when an identity
// is revoked, deleted or gets another expiry; the payload is its id.
const IdentityChannel = "identities"

// identityColumns are what every credential's lookup reads of its identity: bearer tokens
// here, console sessions in sessions.go. identity.Identity.Usable judges what they read,
// for both alike. Its grants in one cluster (identity_grants) come in the same query, so
// authenticating stays one round trip.
const identityColumns = `id, name, permissions, created_at, expires_at, revoked_at, coalesce(revoked_by, ''), last_used_at,
	coalesce(sso_issuer, ''), coalesce(sso_subject, ''), coalesce(sso_groups, '{}'), sso_confirmed_at, sso_confirmed_until,
	ARRAY(SELECT g.permission || '@' || g.cluster_id || '@' || c.name FROM identity_grants g JOIN clusters c ON c.id = g.cluster_id
		WHERE g.identity_id = identities.id ORDER BY 1)`

// scanIdentity reads identityColumns, then extra; nil when there is no row.
func scanIdentity(row pgx.Row, extra ...any) (*identity.Identity, error) {
	var id identity.Identity
	var perms []string
	var sso identity.SSOAccount
	var confirmedAt, confirmedUntil *time.Time
	var grants []string
	err := row.Scan(append([]any{&id.ID, &id.Name, &perms, &id.CreatedAt, &id.ExpiresAt, &id.RevokedAt, &id.RevokedBy, &id.LastUsedAt,
		&sso.Issuer, &sso.Subject, &sso.Groups, &confirmedAt, &confirmedUntil, &grants}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	for _, p := range perms {
		id.Permissions = append(id.Permissions, identity.Permission(p))
	}
	for _, g := range grants {
		// permission@cluster id@cluster name: neither a permission nor a name holds an '@'.
		parts := strings.SplitN(g, "@", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("identity %d: unreadable grant %q", id.ID, g)
		}
		cid, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("identity %d: unreadable grant %q", id.ID, g)
		}
		id.Grants = append(id.Grants, identity.ClusterGrant{Permission: identity.Permission(parts[0]), Cluster: cid, ClusterName: parts[2]})
	}
	if sso.Subject != "" {
		if confirmedAt != nil {
			sso.ConfirmedAt = *confirmedAt
		}
		if confirmedUntil != nil {
			sso.ConfirmedUntil = *confirmedUntil
		}
		id.SSO = &sso
	}
	return &id, nil
}

// permissionTexts are permissions as the table keeps them.
func permissionTexts(perms []identity.Permission) []string {
	ps := make([]string, len(perms))
	for i, p := range perms {
		ps[i] = string(p)
	}
	return ps
}

// sameSet reports whether a and b hold the same values, whatever their order.
func sameSet[T comparable](a, b []T) bool {
	in := func(x, y []T) bool {
		for _, v := range x {
			if !slices.Contains(y, v) {
				return false
			}
		}
		return true
	}
	return in(a, b) && in(b, a)
}

// IdentityByTokenHash returns the identity whose token hashes to hash, active or not, or
// nil: one query on the token_hash unique index.
func (s *Store) IdentityByTokenHash(ctx context.Context, hash []byte) (*identity.Identity, error) {
	return scanIdentity(s.pool.QueryRow(ctx, `SELECT `+identityColumns+` FROM identities WHERE token_hash = $1`, hash))
}

// IdentityByID returns the identity with that id, or nil.
func (s *Store) IdentityByID(ctx context.Context, id int64) (*identity.Identity, error) {
	return scanIdentity(s.q(ctx).QueryRow(ctx, `SELECT `+identityColumns+` FROM identities WHERE id = $1`, id))
}

// Identities returns every identity, oldest first.
func (s *Store) Identities(ctx context.Context) ([]identity.Identity, error) {
	return collectIdentities(s.q(ctx).Query(ctx, `SELECT `+identityColumns+` FROM identities ORDER BY id`))
}

func collectIdentities(rows pgx.Rows, err error) ([]identity.Identity, error) {
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (identity.Identity, error) {
		id, err := scanIdentity(row)
		if err != nil {
			return identity.Identity{}, err
		}
		return *id, nil
	})
	return out, dbError(err)
}

// NoteUse writes an identity's last use in the background: the request neither waits for
// it nor fails with it. While one write for an identity is in flight others are dropped,
// and the row's own last_used_at (read by every authentication) keeps the writes to about
// one per identity per identity.UseResolution.
func (s *Store) NoteUse(ctx context.Context, id int64, at time.Time) {
	if _, busy := s.noting.LoadOrStore(id, true); busy {
		return
	}
	go func() {
		defer s.noting.Delete(id)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := s.pool.Exec(wctx, `UPDATE identities SET last_used_at = $2
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, id, at); err != nil {
			s.log.WarnContext(wctx, "could not record an identity's last use", "identity_id", id, "error", err)
		}
	}()
}

// ChangeIdentities runs fn in a transaction that writes the audit event of the mutation
// in progress. It takes no machine lock: revocations serialise on the rows they read.
func (s *Store) ChangeIdentities(ctx context.Context, fn func(identity.Tx) error) error {
	return s.changeHolding(ctx, mutations.LockIdentities, "", func(ctx context.Context, tx pgx.Tx) error { return fn(identityTx{tx}) })
}

type identityTx struct{ tx pgx.Tx }

func (t identityTx) InsertIdentity(ctx context.Context, name string, hash []byte, perms []identity.Permission, expiresAt *time.Time) (*identity.Identity, error) {
	ps := make([]string, len(perms))
	for i, p := range perms {
		ps[i] = string(p)
	}
	// Asked first, so a dry run (whose INSERT is a step, not sent) is refused as the real
	// call is; the unique constraint still holds against a concurrent change.
	var taken bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM identities WHERE name = $1)`, name).Scan(&taken); err != nil {
		return nil, dbError(err)
	}
	if taken {
		return nil, identityTaken(name)
	}
	// In a dry run the INSERT answers no row: no identity was created, none is answered.
	id, err := scanIdentity(t.tx.QueryRow(ctx, `INSERT INTO identities (name, token_hash, permissions, expires_at) VALUES ($1, $2, $3, $4)
		RETURNING `+identityColumns, name, hash, ps, expiresAt))
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "identities_name_key":
		return nil, identityTaken(name)
	case errors.As(err, &pgErr) && pgErr.ConstraintName == "identities_expiry_after_creation":
		// The expiry was in the server's future but not in the database's: clocks apart.
		return nil, apperr.Invalid("expiresIn", "the expiry is already past by the database's clock: give a longer time, and check the clocks of the server and the database agree")
	}
	return id, err
}

// ClusterIDs returns the ids of the registered clusters among names.
func (t identityTx) ClusterIDs(ctx context.Context, names []string) (map[string]int64, error) {
	rows, err := t.tx.Query(ctx, `SELECT name, id FROM clusters WHERE name = ANY ($1)`, names)
	if err != nil {
		return nil, dbError(err)
	}
	out := map[string]int64{}
	var name string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error { out[name] = id; return nil })
	return out, dbError(err)
}

// SetClusterGrants replaces the identity's grants in one cluster with grants (NOTIFY
// identities, by the table's trigger, narrows its open websockets on every replica).
func (t identityTx) SetClusterGrants(ctx context.Context, id int64, grants []identity.ClusterGrant) error {
	perms := make([]string, len(grants))
	clusters := make([]int64, len(grants))
	for k, g := range grants {
		perms[k], clusters[k] = string(g.Permission), g.Cluster
	}
	_, err := t.tx.Exec(ctx, `WITH gone AS (DELETE FROM identity_grants WHERE identity_id = $1
			AND (permission, cluster_id) NOT IN (SELECT * FROM unnest($2::text[], $3::bigint[])))
		INSERT INTO identity_grants (identity_id, permission, cluster_id)
		SELECT $1, p, c FROM unnest($2::text[], $3::bigint[]) AS g (p, c)
		ON CONFLICT DO NOTHING`, id, perms, clusters)
	return dbError(err)
}

func identityTaken(name string) error {
	return &apperr.Error{Code: apperr.AlreadyExists, Field: "name", Message: fmt.Sprintf(
		"an identity named %q already exists (revoked ones keep their name): choose another name", name)}
}

func (t identityTx) IdentityByName(ctx context.Context, name string) (*identity.Identity, error) {
	return scanIdentity(t.tx.QueryRow(ctx, `SELECT `+identityColumns+` FROM identities WHERE name = $1 FOR UPDATE`, name))
}

func (t identityTx) Managers(ctx context.Context) ([]identity.Identity, error) {
	return collectIdentities(t.tx.Query(ctx, `SELECT `+identityColumns+` FROM identities
		WHERE revoked_at IS NULL AND 'manage-infrastructure' = ANY (permissions) ORDER BY id FOR UPDATE`))
}

func (t identityTx) SetRevoked(ctx context.Context, id int64, by string, at time.Time) (*identity.Identity, error) {
	return scanIdentity(t.tx.QueryRow(ctx, `UPDATE identities SET revoked_at = $2, revoked_by = $3 WHERE id = $1 RETURNING `+identityColumns, id, at, by))
}

// SignInSSO finds the SSO user's identity by issuer and subject (locked) and sets the
// groups and permissions of this sign-in, or makes it: named name, or name and the
// subject's tag when another identity has that name.
func (t identityTx) SignInSSO(ctx context.Context, name string, c identity.SSOClaims, perms []identity.Permission, confirmedFor time.Duration) (*identity.Identity, error) {
	ps := permissionTexts(perms)
	groups := c.Groups
	if groups == nil {
		groups = []string{}
	}
	id, err := scanIdentity(t.tx.QueryRow(ctx, `UPDATE identities SET sso_groups = $3, permissions = $4,
			sso_confirmed_at = now(), sso_confirmed_until = now() + make_interval(secs => $5)
		WHERE sso_issuer = $1 AND sso_subject = $2 RETURNING `+identityColumns, c.Issuer, c.Subject, groups, ps, confirmedFor.Seconds()))
	if err != nil || id != nil {
		return id, err
	}
	var taken bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM identities WHERE name = $1)`, name).Scan(&taken); err != nil {
		return nil, dbError(err)
	}
	if taken {
		name = name[:min(len(name), 54)] + "-" + identity.SubjectTag(&c)
	}
	id, err = scanIdentity(t.tx.QueryRow(ctx, `INSERT INTO identities (name, permissions, sso_issuer, sso_subject, sso_groups, sso_confirmed_at, sso_confirmed_until)
		VALUES ($1, $2, $3, $4, $5, now(), now() + make_interval(secs => $6)) RETURNING `+identityColumns, name, ps, c.Issuer, c.Subject, groups, confirmedFor.Seconds()))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// Another replica made it (the same user signing in twice at once), or took the name.
		return nil, apperr.New(apperr.Busy, "your identity was being made by another sign-in at the same moment: sign in again")
	}
	return id, err
}

// SetSSOGroups sets an SSO identity's groups and permissions as the provider named them
// again (confirmed for confirmedFor) and returns it as it was; nil when they were those.
func (t identityTx) SetSSOGroups(ctx context.Context, id int64, groups []string, perms []identity.Permission, confirmedFor time.Duration) (*identity.Identity, error) {
	before, err := scanIdentity(t.tx.QueryRow(ctx, `SELECT `+identityColumns+` FROM identities WHERE id = $1 AND sso_subject IS NOT NULL FOR UPDATE`, id))
	if err != nil || before == nil {
		return nil, err
	}
	if groups == nil {
		groups = []string{}
	}
	if sameSet(before.SSO.Groups, groups) && sameSet(before.Permissions, perms) {
		return nil, nil
	}
	_, err = t.tx.Exec(ctx, `UPDATE identities SET sso_groups = $2, permissions = $3,
			sso_confirmed_at = now(), sso_confirmed_until = now() + make_interval(secs => $4)
		WHERE id = $1`, id, groups, permissionTexts(perms), confirmedFor.Seconds())
	if err != nil {
		return nil, dbError(err)
	}
	return before, nil
}

// EndConsoleSessions ends the identity's console sessions (only the one with id only,
// when not zero) and NOTIFYs each at commit, as sign-out does.
func (t identityTx) EndConsoleSessions(ctx context.Context, identityID, only int64) (int, error) {
	var n int
	err := t.tx.QueryRow(ctx, `WITH ended AS (DELETE FROM console_sessions WHERE identity_id = $1 AND ($2 = 0 OR id = $2) RETURNING id)
		SELECT count(*) FROM (SELECT pg_notify('`+ConsoleSessionChannel+`', id::text) FROM ended) notified`, identityID, only).Scan(&n)
	return n, dbError(err)
}

// WatchIdentities tells w of every identity revoked, deleted or given another expiry on
// any replica, until ctx ends; when notifications may have been lost (the listener
// reconnected, or w fell behind) it has w check every identity it watches.
func (l *Listener) WatchIdentities(ctx context.Context, w interface {
	Changed(ctx context.Context, id int64)
	CheckAll(ctx context.Context)
}) {
	sub := l.Subscribe(IdentityChannel, 256)
	defer func() { sub.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-sub.C:
			switch {
			case !ok:
				sub = l.Subscribe(IdentityChannel, 256)
				w.CheckAll(ctx)
			case n.Resync:
				w.CheckAll(ctx)
			default:
				if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
					w.Changed(ctx, id)
				}
			}
		}
	}
}
