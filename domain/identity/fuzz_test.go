package identity

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr/apperrtest"
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
			apperrtest.CheckMessage(t, err.Error())
		}
		if p, err := ParsePermission(permission); err == nil {
			if !slices.Contains(AllPermissions, p) {
				t.Fatalf("accepted permission %q", p)
			}
		} else {
			apperrtest.CheckMessage(t, err.Error())
		}
		if tok, ok := BearerToken(header); ok && (tok == "" || strings.TrimSpace(tok) != tok || !strings.Contains(header, tok)) {
			t.Fatalf("BearerToken(%q) = %q", header, tok)
		}
	})
}
