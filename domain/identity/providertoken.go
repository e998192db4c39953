package identity

import (
	"fmt"
	"log/slog"
)

// ProviderToken is a refresh token of the identity provider: what lets Apelora ask the
// provider again, without the user, whether a signed-in user's groups still hold. It is a
// secret, kept only sealed (TokenSealer) beside its session: it prints, logs and encodes
// as "[redacted]" whatever the verb or encoder, and only Reveal gives its value, for the
// provider and the sealer.
type ProviderToken struct{ value string }

// NewProviderToken wraps a refresh token the provider issued ("" for none).
func NewProviderToken(v string) ProviderToken { return ProviderToken{value: v} }

// Reveal is the token's value, for the provider and the sealer alone.
func (t ProviderToken) Reveal() string { return t.value }

// IsZero reports whether there is no token (the provider gave none).
func (t ProviderToken) IsZero() bool { return t.value == "" }

const redacted = "[redacted]"

// Every way of printing or encoding the token writes "[redacted]".
func (t ProviderToken) String() string               { return redacted }
func (t ProviderToken) GoString() string             { return redacted }
func (t ProviderToken) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(redacted)) }
func (t ProviderToken) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (t ProviderToken) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (t ProviderToken) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// TokenSealer keeps provider tokens at rest: sealed with a key that never enters the
// database, bound to the console session they belong to (a sealed token moved to another
// session does not open).
type TokenSealer interface {
	// KeyID names the key (a few bytes of its hash): rows sealed with another key are left
	// to a replica that has it.
	KeyID() []byte
	Seal(t ProviderToken, consoleSession int64) ([]byte, error)
	// Open returns the token sealed for consoleSession, or an error when the sealed bytes
	// were changed, moved or sealed with another key.
	Open(sealed []byte, consoleSession int64) (ProviderToken, error)
}
