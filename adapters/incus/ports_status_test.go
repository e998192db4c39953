package app

import (
	"testing"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/domain/membership"
)

// Every status Incus documents has a word of the domain's, and one Incus may add later is
// Unknown rather than taken for any of them (an unknown word must never read as Offline,
// which the fencing worker acts on, or as Online).
func TestIncusMemberStatusesMapToTheDomainsWords(t *testing.T) {
	for incusWord, want := range map[string]membership.Status{
		incus.MemberOnline:    membership.StatusOnline,
		incus.MemberOffline:   membership.StatusOffline,
		incus.MemberEvacuated: membership.StatusEvacuated,
		incus.MemberBlocked:   membership.StatusBlocked,
		"Evacuating":          membership.StatusUnknown,
		"offline":             membership.StatusUnknown,
		"":                    membership.StatusUnknown,
	} {
		if got := memberStatus(incusWord); got != want {
			t.Errorf("Incus status %q became %q, want %q", incusWord, got, want)
		}
	}
}
