package rolling

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

func member(name string, status membership.Status, roles ...string) membership.Member {
	return membership.Member{Name: name, Status: status, Roles: roles, FailureDomain: "default", Groups: []string{"default"}}
}

// Check is the rule before the start and before each member: every other member up and
// not in maintenance, the member itself up, and the quorum projection of taking it down.
func TestCheck(t *testing.T) {
	on, off, evac := membership.StatusOnline, membership.StatusOffline, membership.StatusEvacuated
	three := func(s2, s3 membership.Status) []membership.Member {
		return []membership.Member{member("m1", on, quorum.RoleLeader, quorum.RoleVoter), member("m2", s2, quorum.RoleVoter), member("m3", s3, quorum.RoleVoter)}
	}
	cases := []struct {
		name    string
		members []membership.Member
		member  string
		code    apperr.Code // "" for no refusal
		says    string
	}{
		{"all online", three(on, on), "m1", "", ""},
		{"the member itself evacuated (a resumed operation)", three(evac, on), "m2", "", ""},
		{"another evacuated", three(evac, on), "m1", apperr.FailedPrecondition, `m2 (Evacuated)`},
		{"another offline", three(on, off), "m1", apperr.FailedPrecondition, `m3 (Offline)`},
		{"the member offline", three(off, on), "m2", apperr.FailedPrecondition, "is offline"},
		{"unknown member", three(on, on), "m9", apperr.NotFound, "not a member"},
		{"the only member: the quorum projection refuses", []membership.Member{member("m1", on, quorum.RoleLeader, quorum.RoleVoter)}, "m1", apperr.FailedPrecondition, "cannot be rebooted"},
		{"two voters: taking one down loses the majority", []membership.Member{member("m1", on, quorum.RoleLeader, quorum.RoleVoter), member("m2", on, quorum.RoleVoter)}, "m2", apperr.FailedPrecondition, "cannot be rebooted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.members, c.member)
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := apperr.As(err)
			if !ok || e.Code != c.code || !strings.Contains(e.Message, c.says) {
				t.Fatalf("got %v, want %s saying %q", err, c.code, c.says)
			}
		})
	}
}

func TestParseID(t *testing.T) {
	for _, bad := range []string{"", "0", "-1", "x", "1.5", "9999999999999999999999"} {
		if _, err := ParseID("id", bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if e, _ := apperr.As(err); e.Code != apperr.InvalidInput {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if n, err := ParseID("id", " 42 "); err != nil || n != 42 {
		t.Fatalf("42: %d %v", n, err)
	}
}
