package identity

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apelora/fabric/apperr"
)

// dbName is the identities table's CHECK (migrations/0001_foundation.sql).
var dbName = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,62}$`)

// FuzzIdentityInput: identity names, permissions and Authorization headers as an
// administrator or an attacker types them. What is accepted can be stored; what is
// refused says so in a short message.
func FuzzIdentityInput(f *testing.F) {
	f.Add("alice", "manage-infrastructure", "Bearer apl_abc")
	f.Add("Alice\x00", "hardware.delete ", "bearer  x ")
	f.Add(strings.Repeat("a", 5000), strings.Repeat("p", 5000), "Basic "+strings.Repeat("z", 5000))
	f.Fuzz(func(t *testing.T, name, permission, header string) {
		if err := ValidateName(name); err == nil {
			if !dbName.MatchString(name) {
				t.Fatalf("accepted name %q the database refuses", name)
			}
		} else {
			checkMessage(t, err)
		}
		if p, err := ParsePermission(permission); err == nil {
			if !slices.Contains(AllPermissions, p) {
				t.Fatalf("accepted permission %q", p)
			}
		} else {
			checkMessage(t, err)
		}
		if tok, ok := BearerToken(header); ok && (tok == "" || strings.TrimSpace(tok) != tok || !strings.Contains(header, tok)) {
			t.Fatalf("BearerToken(%q) = %q", header, tok)
		}
	})
}

func checkMessage(t *testing.T, err error) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.InvalidInput || e.Field == "" {
		t.Fatalf("refusal %v is not INVALID_INPUT with a field", err)
	}
	if len(e.Message) > 4*apperr.QuoteLimit+300 || !utf8.ValidString(e.Message) || strings.ContainsAny(e.Message, "\x00\r\n") {
		t.Fatalf("message %q is too long or unprintable", e.Message)
	}
}
