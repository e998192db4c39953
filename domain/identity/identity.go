// Package identity is who may call the API and what they may do: identities with
// permissions, authenticated by a bearer token of which only a hash is ever stored.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// Permission is what an identity may do. The values are the administrator's words, used
// on the command line and stored as they are.
type Permission string

const (
	ViewInfrastructure   Permission = "view-infrastructure"
	ManageInfrastructure Permission = "manage-infrastructure"
	HardwareDelete       Permission = "hardware.delete"
)

// AllPermissions lists every permission, in the order they are shown.
var AllPermissions = []Permission{ViewInfrastructure, ManageInfrastructure, HardwareDelete}

// ParsePermission accepts a permission's name as an administrator types it.
func ParsePermission(s string) (Permission, error) {
	p := Permission(strings.TrimSpace(s))
	if slices.Contains(AllPermissions, p) {
		return p, nil
	}
	return "", invalidPermission(s)
}

// Identity is a caller Apelora knows. It authenticates while it is active: not revoked
// and not past its expiry.
type Identity struct {
	ID   int64
	Name string
	// Permissions are its unscoped grants: they hold in every cluster.
	Permissions []Permission
	// Grants are the permissions it holds in some clusters only (ClusterGrant).
	Grants    []ClusterGrant
	CreatedAt time.Time
	// ExpiresAt is when the identity stops working; nil means never.
	ExpiresAt *time.Time
	// RevokedAt and RevokedBy say when and by whom it was revoked; nil while it was not.
	RevokedAt *time.Time
	RevokedBy string
	// LastUsedAt is its last successful authentication, to within UseResolution; nil
	// when it was never used.
	LastUsedAt *time.Time
	// SSO is who the identity is at the identity provider when it signs in through it
	// (single sign-on); nil for an identity an administrator made, with a bearer token.
	SSO *SSOAccount
}

// UseResolution is how precisely LastUsedAt is kept: it is written at most once per
// period per identity, so authenticating costs no database write per request.
const UseResolution = time.Minute

// Usable returns nil while the identity may authenticate at now, or else an
// UNAUTHENTICATED error that says why not and what to do. It is the one rule for HTTP
// requests, websockets and the identities list.
func (i *Identity) Usable(now time.Time) error {
	switch {
	case i.RevokedAt != nil:
		return apperr.New(apperr.Unauthenticated, "identity %q was revoked: its token no longer works; ask an administrator for a new identity", i.Name)
	case i.ExpiresAt != nil && !now.Before(*i.ExpiresAt):
		return apperr.New(apperr.Unauthenticated, "identity %q expired at %s: ask an administrator for a new identity", i.Name, i.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Active reports whether the identity may authenticate at now.
func (i *Identity) Active(now time.Time) bool { return i.Usable(now) == nil }

// Granted returns the permissions the identity holds at now: its own, except for an SSO
// identity whose groups the identity provider has not confirmed within the re-check
// interval (SSOAccount.Confirmed), which holds view-infrastructure alone (when its groups
// granted anything) until the provider confirms them again. It is the one rule of what an
// identity may do; Has and the API's lists read it.
func (i *Identity) Granted(now time.Time) []Permission {
	if i == nil {
		return nil
	}
	if i.SSO == nil || i.SSO.Confirmed(now) || (len(i.Permissions) == 0 && len(i.Grants) == 0) {
		return i.Permissions
	}
	if !i.ReadScope().All() {
		return nil // it reads some clusters only (ReadScope), not every one
	}
	return []Permission{ViewInfrastructure}
}

// Has reports whether the identity holds p now (Granted) unscoped: in every cluster.
// manage-infrastructure implies view-infrastructure, and so does manage-infrastructure in
// any one cluster unless view-infrastructure is granted in some clusters (ReadScope): Has
// of view-infrastructure is reading every cluster.
func (i *Identity) Has(p Permission) bool {
	return i.mayHold(p, time.Now())
}

// mayHold is Has at now.
func (i *Identity) mayHold(p Permission, now time.Time) bool {
	if p == ViewInfrastructure {
		return i.ReadScope().All() // manage-infrastructure in some clusters reads all, unless view is scoped
	}
	return holds(i.Granted(now), p)
}

func holds(perms []Permission, p Permission) bool {
	if slices.Contains(perms, p) {
		return true
	}
	return p == ViewInfrastructure && slices.Contains(perms, ManageInfrastructure)
}

// Require returns a FORBIDDEN error naming the missing permission, or nil.
func (i *Identity) Require(p Permission) error {
	if i == nil {
		return errNoBearer()
	}
	if i.Has(p) {
		return nil
	}
	if holds(i.Permissions, p) && i.SSO != nil {
		since := "since before this server asked it again (sign in again)"
		if !i.SSO.ConfirmedAt.IsZero() {
			since = "since " + i.SSO.ConfirmedAt.UTC().Format(time.RFC3339)
		}
		return apperr.New(apperr.Forbidden, "identity %s has %s through its groups at the identity provider, but the provider has not confirmed those groups %s: it could not be asked, so the identity has view-only access until it answers; try again shortly, or sign in again",
			apperr.Quote(i.Name), p, since)
	}
	return apperr.New(apperr.Forbidden, "identity %s lacks the %s permission; ask an administrator to grant it", apperr.Quote(i.Name), p)
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,62}$`)

// ValidateName checks an identity name.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return apperr.Invalid("name", "identity name %s is not valid: use 1–63 characters, lower-case letters, digits, '.', '_' or '-', starting with a letter", apperr.Quote(name))
	}
	return nil
}

// tokenPrefix makes tokens recognisable in a secret scanner and in a leaked file.
const tokenPrefix = "apl_"

// NewToken returns a fresh bearer token and the hash to store.
func NewToken() (token string, hash []byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("generate token: %w", err)
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken returns the stored form of a token. Tokens are 256 random bits, so a plain
// SHA-256 is enough: there is nothing to brute-force.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// BearerToken extracts the token from an Authorization header value ("Bearer <token>").
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Store is what authentication needs from the database.
type Store interface {
	// IdentityByTokenHash returns the identity (active or not) whose token hashes to
	// hash, or nil. It is the one query per authenticated request.
	IdentityByTokenHash(ctx context.Context, hash []byte) (*Identity, error)
	// NoteUse records that the identity authenticated at at. It must not make the
	// request wait or fail: the store writes in the background and drops what it cannot.
	NoteUse(ctx context.Context, id int64, at time.Time)
}

// errNoBearer is a fresh error each time: callers may add to it.
func errNoBearer() *apperr.Error {
	return apperr.New(apperr.Unauthenticated, "authentication required: send an Authorization: Bearer <token> header (create a token with `apelora identity create`)")
}

// Authenticate resolves an Authorization header value to an active identity. A missing,
// unknown, revoked or expired token is UNAUTHENTICATED; a database failure is UNAVAILABLE.
func Authenticate(ctx context.Context, s Store, header string) (*Identity, error) {
	token, ok := BearerToken(header)
	if !ok {
		return nil, errNoBearer()
	}
	id, err := s.IdentityByTokenHash(ctx, HashToken(token))
	if err != nil {
		return nil, err
	}
	return usable(ctx, s, id, "the bearer token is not valid: check it was copied whole, or create a new one with `apelora identity create`")
}

// usable is the one place where an identity found by a credential (a bearer token or a
// console session) is accepted or refused (unknown, revoked, expired), and its use noted;
// unknown is the message for none found.
func usable(ctx context.Context, s Store, id *Identity, unknown string) (*Identity, error) {
	if id == nil {
		return nil, apperr.New(apperr.Unauthenticated, "%s", unknown)
	}
	now := time.Now()
	if err := id.Usable(now); err != nil {
		return nil, err
	}
	if id.LastUsedAt == nil || now.Sub(*id.LastUsedAt) >= UseResolution {
		s.NoteUse(ctx, id.ID, now)
	}
	return id, nil
}

type ctxKey struct{}

// WithIdentity returns ctx carrying the authenticated identity.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// Live is an identity that is replaced while the context carrying it lives: an open
// websocket's, which SocketRegistry re-authorises when the identity changes (a demotion
// at the identity provider takes effect on the socket's next operation).
type Live struct{ p atomic.Pointer[Identity] }

// NewLive returns id, replaceable.
func NewLive(id *Identity) *Live {
	l := &Live{}
	l.p.Store(id)
	return l
}

// Set replaces the identity.
func (l *Live) Set(id *Identity) { l.p.Store(id) }

// WithLive returns ctx carrying l: FromContext answers l's identity of the moment.
func WithLive(ctx context.Context, l *Live) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the authenticated identity, or nil.
func FromContext(ctx context.Context) *Identity {
	switch v := ctx.Value(ctxKey{}).(type) {
	case *Identity:
		return v
	case *Live:
		return v.p.Load()
	}
	return nil
}
