package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/identity"
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

// KeepSSOGrant keeps a session's sealed refresh token, due to be asked again after
// checkIn.
func (s *Store) KeepSSOGrant(ctx context.Context, consoleSession int64, keyID, sealed []byte, checkIn time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO sso_grants (console_session_id, key_id, sealed, next_check_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (console_session_id) DO UPDATE SET key_id = EXCLUDED.key_id, sealed = EXCLUDED.sealed,
			next_check_at = EXCLUDED.next_check_at, claimed_until = NULL`, consoleSession, keyID, sealed, checkIn.Seconds())
	return dbError(err)
}

// ClaimSSOGrants drops the grants of sessions that expired and of identities that may no
// longer authenticate, then claims up to limit grants sealed with keyID that are due (not
// claimed by another replica, or claimed longer ago than its hold), for hold.
func (s *Store) ClaimSSOGrants(ctx context.Context, keyID []byte, hold time.Duration, limit int) ([]identity.SSOGrant, error) {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sso_grants g USING console_sessions cs, identities i
		WHERE g.console_session_id = cs.id AND i.id = cs.identity_id
		  AND (cs.expires_at <= now() OR i.revoked_at IS NOT NULL OR i.expires_at <= now())`); err != nil {
		return nil, dbError(err)
	}
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT console_session_id FROM sso_grants
			WHERE key_id = $1 AND next_check_at <= now() AND (claimed_until IS NULL OR claimed_until <= now())
			ORDER BY next_check_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE sso_grants g SET claimed_until = now() + make_interval(secs => $2)
		FROM due, console_sessions cs
		WHERE g.console_session_id = due.console_session_id AND cs.id = g.console_session_id
		RETURNING g.console_session_id, g.sealed, cs.identity_id`, keyID, hold.Seconds(), limit)
	if err != nil {
		return nil, dbError(err)
	}
	type claimed struct {
		session, identity int64
		sealed            []byte
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		err := r.Scan(&c.session, &c.sealed, &c.identity)
		return c, err
	})
	if err != nil {
		return nil, dbError(err)
	}
	out := make([]identity.SSOGrant, 0, len(list))
	for _, c := range list {
		id, err := s.IdentityByID(ctx, c.identity)
		if err != nil {
			return nil, err
		}
		if id == nil {
			continue // deleted meanwhile: its sessions and grants went with it
		}
		out = append(out, identity.SSOGrant{ConsoleSession: c.session, Sealed: c.sealed, Identity: *id})
	}
	return out, nil
}

// ConfirmSSOGrant releases a claimed grant, due again after checkIn, with its new sealed
// refresh token (nil: the same one).
func (s *Store) ConfirmSSOGrant(ctx context.Context, consoleSession int64, sealed []byte, checkIn time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE sso_grants SET sealed = coalesce($2, sealed), claimed_until = NULL,
			next_check_at = now() + make_interval(secs => $3)
		WHERE console_session_id = $1`, consoleSession, sealed, checkIn.Seconds())
	return dbError(err)
}

// ConfirmSSOGroups moves the confirmation of an SSO identity's groups on when the
// provider named those it keeps (and so its permissions); false when it named others.
func (s *Store) ConfirmSSOGroups(ctx context.Context, identityID int64, groups []string, perms []identity.Permission, confirmedFor time.Duration) (bool, error) {
	if groups == nil {
		groups = []string{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE identities SET sso_confirmed_at = now(), sso_confirmed_until = now() + make_interval(secs => $4)
		WHERE id = $1 AND sso_subject IS NOT NULL
		  AND coalesce(sso_groups, '{}') @> $2::text[] AND coalesce(sso_groups, '{}') <@ $2::text[]
		  AND permissions @> $3::text[] AND permissions <@ $3::text[]`, identityID, groups, permissionTexts(perms), confirmedFor.Seconds())
	if err != nil {
		return false, dbError(err)
	}
	return tag.RowsAffected() == 1, nil
}
