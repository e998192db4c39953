package fencing

import (
	"regexp"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr/apperrtest"
)

// The fence_mappings CHECK constraints (migrations/0002_fencing.sql).
var (
	dbMember = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	dbUUID   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	dbSysID  = regexp.MustCompile(`^[a-z0-9]{4,16}$`)
)

// FuzzMappingInput: a fence mapping's member, system id and hardware UUID as the rules
// accept them can be stored; refusals are INVALID_INPUT with a short message.
func FuzzMappingInput(f *testing.F) {
	f.Add("node-1", "abc123", "0D5B6E3C-1111-2222-3333-444455556666")
	f.Add("Node\x00", "../x", " 0d5b6e3c-1111-2222-3333-44445555666g ")
	f.Add(strings.Repeat("m", 5000), strings.Repeat("s", 5000), strings.Repeat("u", 5000))
	f.Fuzz(func(t *testing.T, member, systemID, uuid string) {
		if err := ValidateMember(member); err == nil {
			if !dbMember.MatchString(member) {
				t.Fatalf("accepted member %q", member)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
		if err := machines.ValidateSystemID("maasSystemId", systemID); err == nil {
			if !dbSysID.MatchString(systemID) {
				t.Fatalf("accepted system id %q", systemID)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
		if u, err := NormalizeUUID(uuid); err == nil {
			if !dbUUID.MatchString(u) || !SameUUID(u, uuid) {
				t.Fatalf("NormalizeUUID(%q) = %q", uuid, u)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
	})
}
