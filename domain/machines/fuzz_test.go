package machines

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apelora/fabric/internal/apperr/apperrtest"
)

// What the domain accepts, the database must take: machine_records' name CHECK
// (migrations/0001_foundation.sql), and fence_mappings' system id CHECK
// (migrations/0002_fencing.sql). machine_records.maas_system_id has no CHECK: the domain's
// rule (ValidateSystemID) is the only thing that keeps it a system id.
var (
	dbName     = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	dbSystemID = regexp.MustCompile(`^[a-z0-9]{4,16}$`)
)

// FuzzRegistration: a registration the rules accept can be stored and become an Incus
// member name; one they refuse gets INVALID_INPUT naming a field, with a short message.
func FuzzRegistration(f *testing.F) {
	f.Add("node-1", "MAAS", "abc123", "rack 3\nslot 7")
	f.Add("Node_1", "MANUAL", "", "a\x00b")
	f.Add(strings.Repeat("a", 64), "MAAS", strings.Repeat("x", 5000), "caf\xe9")
	f.Add("none", "MANUAL", "", "")
	f.Fuzz(func(t *testing.T, name, provisioner, systemID, description string) {
		r := Registration{Name: name, Provisioner: Provisioner(provisioner), MAASSystemID: systemID, Description: description}
		err := r.Validate()
		if err == nil {
			if !dbName.MatchString(name) || !memberNameSafe(name) {
				t.Fatalf("accepted name %q the database or Incus refuses", name)
			}
			if r.Provisioner == MAAS && !dbSystemID.MatchString(systemID) {
				t.Fatalf("accepted system id %q the database refuses", systemID)
			}
			if !utf8.ValidString(description) || strings.ContainsRune(description, 0) || utf8.RuneCountInString(description) > 1024 {
				t.Fatalf("accepted description %q the database refuses", description)
			}
			return
		}
		apperrtest.CheckRefusal(t, err)
	})
}
