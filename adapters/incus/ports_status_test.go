package incus

import (
	"testing"

	"github.com/apelora/fabric/domain/membership"
)

// Every status Incus documents has a word of the domain's, and one Incus may add later is
// Unknown rather than taken for any of them (an unknown word must never read as Offline,
// which the fencing worker acts on, or as Online).
func TestIncusMemberStatusesMapToTheDomainsWords(t *testing.T) {
	for incusWord, want := range map[string]membership.Status{
		MemberOnline:    membership.StatusOnline,
		MemberOffline:   membership.StatusOffline,
		MemberEvacuated: membership.StatusEvacuated,
		MemberBlocked:   membership.StatusBlocked,
		"Evacuating":    membership.StatusUnknown,
		"offline":       membership.StatusUnknown,
		"":              membership.StatusUnknown,
	} {
		if got := memberStatus(incusWord); got != want {
			t.Errorf("Incus status %q became %q, want %q", incusWord, got, want)
		}
	}
}
