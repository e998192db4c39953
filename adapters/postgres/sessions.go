package postgres

import (
	"context"
	"time"

	"github.com/apelora/fabric/identity"
)

var _ identity.SessionStore = (*Store)(nil)

// expiredSessionsKept is how long an expired session stays, so that the console can say
// "expired" rather than "unknown" to a browser that comes back after it.
const expiredSessionsKept = "1 day"

// CreateSession stores a console session for an identity, valid for ttl from the
// database's clock, and drops sessions that expired long ago.
func (s *Store) CreateSession(ctx context.Context, identityID int64, hash []byte, ttl time.Duration) (*identity.Session, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at < now() - $1::interval`, expiredSessionsKept); err != nil {
		return nil, dbError(err)
	}
	sess := &identity.Session{}
	err = tx.QueryRow(ctx, `INSERT INTO console_sessions (token_hash, identity_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING id, created_at, expires_at`,
		hash, identityID, ttl.Seconds()).Scan(&sess.ID, &sess.CreatedAt, &sess.ExpiresAt)
	if err != nil {
		return nil, dbError(err)
	}
	return sess, dbError(tx.Commit(ctx))
}

// IdentityBySessionHash returns a session and its identity. The session reaches its
// identity only through identities, read as for a bearer token: an identity that may not
// authenticate cannot be reached through its sessions either.
func (s *Store) IdentityBySessionHash(ctx context.Context, hash []byte) (*identity.Identity, *identity.Session, error) {
	sess := &identity.Session{}
	id, err := scanIdentity(s.pool.QueryRow(ctx, `SELECT `+identityColumns+`, session_id, session_created_at, session_expires_at, session_expired
		FROM (SELECT i.*, s.id AS session_id, s.created_at AS session_created_at, s.expires_at AS session_expires_at,
				s.expires_at <= now() AS session_expired
			FROM console_sessions s JOIN identities i ON i.id = s.identity_id
			WHERE s.token_hash = $1) AS identities`, hash), &sess.ID, &sess.CreatedAt, &sess.ExpiresAt, &sess.Expired)
	if err != nil || id == nil {
		return nil, nil, err
	}
	return id, sess, nil
}

// EndSession deletes a session (sign-out).
func (s *Store) EndSession(ctx context.Context, hash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, hash)
	return dbError(err)
}
