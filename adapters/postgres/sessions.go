package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/identity"
)

var _ identity.ConsoleSessionStore = (*Store)(nil)

// expiredSessionsKept is how long an expired session stays, so that the console can say
// "expired" rather than "unknown" to a browser that comes back after it.
const expiredSessionsKept = "1 day"

// CreateConsoleSession stores a console session for an identity, valid for ttl from the
// database's clock, and drops sessions that expired long ago.
func (s *Store) CreateConsoleSession(ctx context.Context, identityID int64, hash []byte, ttl time.Duration) (*identity.ConsoleSession, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at < now() - $1::interval`, expiredSessionsKept); err != nil {
		return nil, dbError(err)
	}
	sess := &identity.ConsoleSession{}
	err = tx.QueryRow(ctx, `INSERT INTO console_sessions (token_hash, identity_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING id, created_at, expires_at`,
		hash, identityID, ttl.Seconds()).Scan(&sess.ID, &sess.CreatedAt, &sess.ExpiresAt)
	if err != nil {
		return nil, dbError(err)
	}
	return sess, dbError(tx.Commit(ctx))
}

// IdentityByConsoleSessionHash returns a session and its identity. The session reaches its
// identity only through identities, read as for a bearer token: an identity that may not
// authenticate cannot be reached through its sessions either.
func (s *Store) IdentityByConsoleSessionHash(ctx context.Context, hash []byte) (*identity.Identity, *identity.ConsoleSession, error) {
	sess := &identity.ConsoleSession{}
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

// ConsoleSessionChannel carries the id of each console session ended by sign-out, so
// every replica closes its websockets (identity.SocketRegistry.ConsoleSessionEnded).
const ConsoleSessionChannel = "console_sessions"

// EndConsoleSession deletes a session (sign-out) and, at its commit, tells every replica.
func (s *Store) EndConsoleSession(ctx context.Context, hash []byte) error {
	_, err := s.pool.Exec(ctx, `WITH ended AS (DELETE FROM console_sessions WHERE token_hash = $1 RETURNING id)
		SELECT pg_notify('`+ConsoleSessionChannel+`', id::text) FROM ended`, hash)
	return dbError(err)
}

// ConsoleSessionByID returns a console session by its id, or nil when it was ended.
func (s *Store) ConsoleSessionByID(ctx context.Context, id int64) (*identity.ConsoleSession, error) {
	sess := &identity.ConsoleSession{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT created_at, expires_at, expires_at <= now() FROM console_sessions WHERE id = $1`, id).
		Scan(&sess.CreatedAt, &sess.ExpiresAt, &sess.Expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return sess, nil
}

// WatchConsoleSessions tells w of every console session ended on any replica, until ctx
// ends; when notifications may have been lost it has w check every session it watches.
func (l *Listener) WatchConsoleSessions(ctx context.Context, w interface {
	ConsoleSessionEnded(ctx context.Context, id int64)
	CheckAll(ctx context.Context)
}) {
	sub := l.Subscribe(ConsoleSessionChannel, 256)
	defer func() { sub.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-sub.C:
			switch {
			case !ok:
				sub = l.Subscribe(ConsoleSessionChannel, 256)
				w.CheckAll(ctx)
			case n.Resync:
				w.CheckAll(ctx)
			default:
				if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
					w.ConsoleSessionEnded(ctx, id)
				}
			}
		}
	}
}

var _ identity.SSOStore = (*Store)(nil)

// BeginSSOSignIn keeps a sign-in in progress for ttl, and drops those that expired.
func (s *Store) BeginSSOSignIn(ctx context.Context, stateHash []byte, nonce, verifier string, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM sso_sign_ins WHERE expires_at < now())
		INSERT INTO sso_sign_ins (state_hash, nonce, verifier, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))`,
		stateHash, nonce, verifier, ttl.Seconds())
	return dbError(err)
}

// TakeSSOSignIn deletes a sign-in in progress and returns its nonce and verifier: a second
// take of the same state finds nothing, whichever replica it reaches.
func (s *Store) TakeSSOSignIn(ctx context.Context, stateHash []byte) (nonce, verifier string, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `DELETE FROM sso_sign_ins WHERE state_hash = $1 AND expires_at > now() RETURNING nonce, verifier`, stateHash).
		Scan(&nonce, &verifier)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, dbError(err)
	}
	return nonce, verifier, true, nil
}
