package incus

import (
	"errors"
	"fmt"

	"github.com/apelora/fabric/apperr"
)

// ValidMemberName checks a cluster member name, and the machine names that become member
// names, against one clear rule: a DNS label as Incus's own name validator
// (shared/validate.IsHostname, used for instance names) defines it.
//
//   - 1 to 63 characters;
//   - ASCII letters, digits and hyphens only;
//   - no hyphen first or last;
//   - not only digits (it would read as a number);
//   - not "none", which Incus uses internally for "not clustered".
//
// Incus 6.0.4 itself checks member names barely at all when issuing a join token (it
// accepts "" and "bad name!"), only refusing a leading "@" when joining; such names then
// break targeting (?target=), URLs, and the token decoder. So Apelora validates first.
func ValidMemberName(name string) error {
	if len(name) < 1 || len(name) > 63 {
		return fmt.Errorf("invalid member name %s: must be 1 to 63 characters long", apperr.Quote(name))
	}
	if name[0] == '-' || name[len(name)-1] == '-' {
		return fmt.Errorf("invalid member name %s: must not start or end with a hyphen", apperr.Quote(name))
	}
	digits := true
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= '0' && ch <= '9':
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch == '-':
			digits = false
		default:
			return fmt.Errorf("invalid member name %s: only letters a-z, A-Z, digits 0-9 and hyphens are allowed", apperr.Quote(name))
		}
	}
	if digits {
		return fmt.Errorf("invalid member name %s: must not be only digits", apperr.Quote(name))
	}
	if name == "none" {
		return errors.New(`invalid member name "none": Incus reserves it for an unclustered server`)
	}
	return nil
}
