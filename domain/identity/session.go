package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// ConsoleSession is a Fabric Console sign-in: the administrator pastes a bearer token
// once and the browser keeps a random session value in an HttpOnly cookie instead. Only a
// hash of the value is stored.
type ConsoleSession struct {
	ID        int64
	CreatedAt time.Time
	ExpiresAt time.Time
	// Expired is the database's verdict at the lookup (its clock, as for every other time).
	Expired bool
}

// ConsoleSessionStore keeps console sessions.
type ConsoleSessionStore interface {
	// CreateConsoleSession stores a session for the identity, valid for ttl.
	CreateConsoleSession(ctx context.Context, identityID int64, hash []byte, ttl time.Duration) (*ConsoleSession, error)
	// IdentityByConsoleSessionHash returns the session whose value hashes to hash and its
	// identity, read as IdentityByTokenHash reads one; nil, nil when there is none.
	IdentityByConsoleSessionHash(ctx context.Context, hash []byte) (*Identity, *ConsoleSession, error)
	// EndConsoleSession deletes the session; ending one that does not exist is no error.
	EndConsoleSession(ctx context.Context, hash []byte) error
}

// Credentials is a store of identities and their console sessions.
type Credentials interface {
	Store
	ConsoleSessionStore
}

// sessionPrefix tells a session value from a bearer token at a glance.
const sessionPrefix = "aps_"

// StartConsoleSession exchanges a bearer token for a console session. It returns the
// identity, the session and the session value for the cookie; the value is never stored.
func StartConsoleSession(ctx context.Context, s Credentials, token string, ttl time.Duration) (*Identity, *ConsoleSession, string, error) {
	id, err := Authenticate(ctx, s, "Bearer "+token)
	if err != nil {
		return nil, nil, "", err
	}
	sess, value, err := newConsoleSession(ctx, s, id, ttl)
	if err != nil {
		return nil, nil, "", err
	}
	return id, sess, value, nil
}

// newConsoleSession starts a session for id, however it signed in (a bearer token, SSO).
func newConsoleSession(ctx context.Context, s ConsoleSessionStore, id *Identity, ttl time.Duration) (*ConsoleSession, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", fmt.Errorf("generate session: %w", err)
	}
	value := sessionPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	sess, err := s.CreateConsoleSession(ctx, id.ID, HashToken(value), ttl)
	if err != nil {
		return nil, "", err
	}
	return sess, value, nil
}

// IsSessionValue tells a session's value (aps_…) from a bearer token (apl_…).
func IsSessionValue(token string) bool { return strings.HasPrefix(token, sessionPrefix) }

// AuthenticateHeader resolves an Authorization header: a bearer token, or the value of a
// session (aps_…) that `apeloractl login` keeps, which authenticates as a console session
// does (and is returned, so a socket ends with it).
func AuthenticateHeader(ctx context.Context, s Credentials, header string) (*Identity, *ConsoleSession, error) {
	if token, ok := BearerToken(header); ok && IsSessionValue(token) {
		return AuthenticateConsoleSession(ctx, s, token)
	}
	id, err := Authenticate(ctx, s, header)
	return id, nil, err
}

// AuthenticateConsoleSession resolves a session cookie's value to its identity. An unknown,
// ended or expired session is UNAUTHENTICATED with a message that says why, which the
// console shows on its sign-in page.
func AuthenticateConsoleSession(ctx context.Context, s Credentials, value string) (*Identity, *ConsoleSession, error) {
	if len(value) > 200 {
		return nil, nil, apperr.New(apperr.Unauthenticated, "the console session cookie is not valid: sign in again")
	}
	id, sess, err := s.IdentityByConsoleSessionHash(ctx, HashToken(value))
	if err != nil {
		return nil, nil, err
	}
	if sess == nil {
		return nil, nil, ErrConsoleSessionEnded()
	}
	if sess.Expired {
		return nil, nil, apperr.New(apperr.Unauthenticated, "your console session expired at %s: sign in again", sess.ExpiresAt.UTC().Format(time.RFC3339))
	}
	id, err = usable(ctx, s, id, "the identity of this console session can no longer sign in: sign in again")
	if err != nil {
		return nil, nil, err
	}
	return id, sess, nil
}
