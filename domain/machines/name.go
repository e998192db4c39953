package machines

import (
	"regexp"
	"unicode/utf8"

	"github.com/apelora/fabric/internal/apperr"
)

// The member-name rule, the one rule for every name that becomes an Incus member name.
//
// A machine's name is its Incus member name, so the rule is a DNS label (members are
// addressed by it, in URLs and ?target=) in lower case, so that two names never differ
// only by case, starting with a letter (so it never reads as a number), and not "none",
// which Incus uses for "not clustered". Incus 6.0.4 itself checks member names barely at
// all when issuing a join token (it accepts "" and "bad name!"), so the Incus adapter
// checks with this rule before asking (adapters/incus/tokens.go), and
// scripts/enrol-member.sh carries a copy in sh (valid_member_name) that name_test.go
// proves agrees with it.

const maxNameLength = 63

var namePattern = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

// NameRule is the rule in the administrator's words.
const NameRule = "1–63 characters: lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen"

// ValidateName checks that name can be a machine and Incus member name: INVALID_INPUT on
// field "name", quoting at most a short prefix of the name, when it cannot.
func ValidateName(name string) error { return ValidateMemberName("name", "machine name", name) }

// ValidateMemberName is ValidateName for a member name taken from another input field
// (field), called what in the refusal ("member name").
func ValidateMemberName(field, what, name string) error {
	if err := ValidateLabel(field, what, name); err != nil {
		return err
	}
	if name == "none" {
		return apperr.Invalid(field, `%s "none" is reserved by Incus (it means "not clustered"): choose another name`, what)
	}
	return nil
}

// ValidateLabel checks that name follows NameRule, for names that are no member names but
// take the same shape (hardware profile names); what names the name in the refusal.
func ValidateLabel(field, what, name string) error {
	switch {
	case name == "":
		return apperr.Invalid(field, "%s is empty: give a name of %s", what, NameRule)
	case len(name) > maxNameLength:
		return apperr.Invalid(field, "%s is %d characters long, more than the %d allowed (%s)", what, utf8.RuneCountInString(name), maxNameLength, NameRule)
	case !namePattern.MatchString(name):
		return apperr.Invalid(field, "%s %s is not valid: use %s", what, apperr.Quote(name), NameRule)
	}
	return nil
}
