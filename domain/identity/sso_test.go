package identity

import (
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr"
)

func TestParseGroupPermissions(t *testing.T) {
	m, err := ParseGroupPermissions(" ops-admins = manage-infrastructure, hardware.delete ; ops-viewers=view-infrastructure;;cn=ops,ou=x=view-infrastructure")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "cn=ops,ou=x=view-infrastructure;ops-admins=hardware.delete,manage-infrastructure;ops-viewers=view-infrastructure" {
		t.Fatalf("mapping read as %s", got)
	}
	for in, want := range map[string]string{
		"":                         "no group is mapped",
		"ops-admins":               "is not group=permission",
		"=view-infrastructure":     "is not group=permission",
		"ops=root":                 `unknown permission "root"`,
		"ops=hardware.delete":      "hardware.delete only widens manage-infrastructure",
		"ops=view-infrastructure,": `unknown permission ""`,
	} {
		if _, err := ParseGroupPermissions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}

// No mapped group, no access: the refusal names the groups that would grant it.
func TestGrantFromGroups(t *testing.T) {
	m, err := ParseGroupPermissions("ops-admins=manage-infrastructure,hardware.delete;ops-viewers=view-infrastructure")
	if err != nil {
		t.Fatal(err)
	}
	perms, err := m.Grant([]string{"staff", "ops-viewers", "ops-admins"})
	if err != nil || !slices.Equal(perms, []Permission{HardwareDelete, ManageInfrastructure, ViewInfrastructure}) {
		t.Fatalf("admins and viewers: %v %v", perms, err)
	}
	for _, groups := range [][]string{nil, {"staff", "OPS-ADMINS"}} {
		_, err := m.Grant(groups)
		if apperr.CodeOf(err) != apperr.Forbidden || !strings.Contains(err.Error(), "one of the groups ops-admins, ops-viewers") {
			t.Errorf("groups %v: %v", groups, err)
		}
	}
}

func TestSSONameFitsTheNameRule(t *testing.T) {
	for in, want := range map[string]string{
		"alice":                   "alice",
		"Alice.Smith@Example.COM": "alice.smith",
		"  jörg müller ":          "j-rg-m-ller",
		"42nd-user":               "nd-user",
		"":                        "sso-",
		"@@@":                     "sso-",
	} {
		got := SSOName(&SSOClaims{Issuer: "https://idp", Subject: "s-1", Username: in})
		if !strings.HasPrefix(got, want) || ValidateName(got) != nil {
			t.Errorf("%q: name %q, want %q… and a valid name", in, got, want)
		}
	}
	a, b := SubjectTag(&SSOClaims{Issuer: "i", Subject: "1"}), SubjectTag(&SSOClaims{Issuer: "i", Subject: "2"})
	if a == b || len(a) != 8 {
		t.Fatalf("subject tags %q %q", a, b)
	}
}
