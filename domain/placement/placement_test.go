package placement

import (
	"strings"
	"testing"
)

// TestJudgeKnowsOnlyItsOwnText: the guard is the exact text; anything else, even the
// guard with one line changed, is someone else's, quoted bounded and escaped.
func TestJudgeKnowsOnlyItsOwnText(t *testing.T) {
	if s := Judge(Scriptlet); s.State != On || s.Found != "" {
		t.Fatalf("the guard itself: %+v", s)
	}
	if s := Judge(""); s.State != Off {
		t.Fatalf("no scriptlet: %+v", s)
	}
	edited := strings.Replace(Scriptlet, "set_target(ok[0].server_name)", "set_target(candidate_members[0].server_name)", 1)
	if edited == Scriptlet {
		t.Fatal("the edit did not apply: the test no longer edits the guard")
	}
	huge := "def instance_placement(request, candidate_members):\n" + strings.Repeat("\x00# ", 1<<20)
	for _, foreign := range []string{edited, huge} {
		s := Judge(foreign)
		if s.State != Foreign || len(s.Found) > 200 || strings.ContainsRune(s.Found, 0) {
			t.Fatalf("foreign scriptlet judged %s, quoted as %q", s.State, s.Found)
		}
		if !strings.Contains(s.Message(), "did not write") || !strings.Contains(s.Message(), s.Found) {
			t.Fatalf("foreign message: %s", s.Message())
		}
	}
	if !strings.HasPrefix(Scriptlet, Header+"\n") {
		t.Fatal("the scriptlet does not begin with its header line")
	}
	// An earlier version's guard is still Apelora's: on, outdated, and said so.
	if s := Judge(scriptletV1); s.State != On || !s.Outdated || !strings.Contains(s.Message(), "earlier Apelora version") {
		t.Fatalf("version 1 of the guard: %+v %s", s, s.Message())
	}
	if s := Judge(Scriptlet); s.Outdated || strings.Contains(s.Message(), "earlier") {
		t.Fatalf("this version's guard reads as outdated: %+v", s)
	}
	if s := Judge(strings.Replace(scriptletV1, "name a target", "name one", 1)); s.State != Foreign {
		t.Fatalf("an edited version 1: %+v", s)
	}
	if on := (Status{State: On, MarksKnown: true, Marked: []string{}}); !on.Unplaceable() || !strings.Contains(on.Message(), "no member carries") {
		t.Fatalf("on with no marked member: %s", on.Message())
	}
	if on := (Status{State: On}); on.Unplaceable() {
		t.Fatal("marks unknown must not read as none marked")
	}
}
