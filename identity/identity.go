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
	"time"

	"github.com/apelora/fabric/apperr"
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
	names := make([]string, len(AllPermissions))
	for i, p := range AllPermissions {
		names[i] = string(p)
	}
	return "", apperr.Invalid("permission", "unknown permission %q: use one of %s", s, strings.Join(names, ", "))
}

// Identity is an authenticated caller.
type Identity struct {
	ID          int64
	Name        string
	Permissions []Permission
	CreatedAt   time.Time
}

// Has reports whether the identity holds p. manage-infrastructure implies
// view-infrastructure.
func (i *Identity) Has(p Permission) bool {
	if i == nil {
		return false
	}
	if slices.Contains(i.Permissions, p) {
		return true
	}
	return p == ViewInfrastructure && slices.Contains(i.Permissions, ManageInfrastructure)
}

// Require returns a FORBIDDEN error naming the missing permission, or nil.
func (i *Identity) Require(p Permission) error {
	if i == nil {
		return apperr.New(apperr.Unauthenticated, "authentication required: send an Authorization: Bearer <token> header (create a token with `apelora identity create`)")
	}
	if !i.Has(p) {
		return apperr.New(apperr.Forbidden, "identity %q lacks the %s permission; ask an administrator to grant it", i.Name, p)
	}
	return nil
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,62}$`)

// ValidateName checks an identity name.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return apperr.Invalid("name", "identity name %q is not valid: use 1–63 characters, lower-case letters, digits, '.', '_' or '-', starting with a letter", name)
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

// Store reads and writes identities.
type Store interface {
	IdentityByTokenHash(ctx context.Context, hash []byte) (*Identity, error)
	CreateIdentity(ctx context.Context, name string, hash []byte, perms []Permission) (*Identity, error)
}

// Authenticate resolves an Authorization header value to an identity. A missing or
// unknown token is UNAUTHENTICATED; a database failure is UNAVAILABLE.
func Authenticate(ctx context.Context, s Store, header string) (*Identity, error) {
	token, ok := BearerToken(header)
	if !ok {
		return nil, apperr.New(apperr.Unauthenticated, "authentication required: send an Authorization: Bearer <token> header (create a token with `apelora identity create`)")
	}
	id, err := s.IdentityByTokenHash(ctx, HashToken(token))
	if err != nil {
		return nil, err
	}
	return usable(id, "the bearer token is not valid: check it was copied whole, or create a new one with `apelora identity create`")
}

// usable is the one place where an identity found by a credential (a bearer token or a
// console session) is accepted or refused; unknown is the message for none found.
func usable(id *Identity, unknown string) (*Identity, error) {
	if id == nil {
		return nil, apperr.New(apperr.Unauthenticated, "%s", unknown)
	}
	return id, nil
}

// Create makes a new identity and returns it with its token, which is shown once and
// never stored.
func Create(ctx context.Context, s Store, name string, perms []Permission) (*Identity, string, error) {
	if err := ValidateName(name); err != nil {
		return nil, "", err
	}
	if len(perms) == 0 {
		return nil, "", apperr.Invalid("permission", "give at least one --permission (for example manage-infrastructure)")
	}
	slices.Sort(perms)
	perms = slices.Compact(perms)
	token, hash, err := NewToken()
	if err != nil {
		return nil, "", err
	}
	id, err := s.CreateIdentity(ctx, name, hash, perms)
	if err != nil {
		return nil, "", err
	}
	return id, token, nil
}

type ctxKey struct{}

// WithIdentity returns ctx carrying the authenticated identity.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the authenticated identity, or nil.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}
