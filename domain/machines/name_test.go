package machines

import (
	"bytes"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/apperr/apperrtest"
	"github.com/apelora/fabric/scripts"
)

// memberNames is the member-name rule's table: the cases the Go rule and enrol-member.sh's
// copy must both decide this way.
var memberNames = []struct {
	name string
	ok   bool
}{
	{"a", true},
	{"m1", true},
	{"node-2", true},
	{"x0-y", true},
	{"rack3-node07", true},
	{"a1b2", true},
	{"node--1", true},
	{strings.Repeat("a", 63), true},
	{"", false},
	{strings.Repeat("a", 64), false},
	{"-a", false},
	{"a-", false},
	{"-", false},
	{"123", false},
	{"0", false},
	{"123a", false}, // a letter first: never reads as a number
	{"0x12", false},
	{"1node", false},
	{"N1", false}, // lower case: two names never differ only by case
	{"Node", false},
	{"nodE", false},
	{"a_b", false},
	{"a.b", false},
	{"a/b", false},
	{"a b", false},
	{"bad name!", false},
	{"@grp", false},
	{"none", false}, // Incus's "not clustered"
	{"nöde", false},
	{"caf\xe9", false},
	{"a\nb", false},
	{"a*", false},
	{"[a]", false},
	{"$(id)", false},
	{"'a'", false},
}

func TestMemberNameRule(t *testing.T) {
	for _, c := range memberNames {
		err := ValidateName(c.name)
		if c.ok != (err == nil) {
			t.Errorf("ValidateName(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Code != apperr.InvalidInput || e.Field != "name" {
				t.Errorf("ValidateName(%q): %v, want INVALID_INPUT on name", c.name, err)
			}
		}
	}
}

// TestEnrolScriptAgreesWithTheMemberNameRule runs enrol-member.sh's valid_member_name with
// sh on every case of the table: the script refuses what the server would refuse.
func TestEnrolScriptAgreesWithTheMemberNameRule(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("sh is not in PATH")
	}
	fn := shellFunction(t, string(scripts.EnrolMember), "valid_member_name")
	for _, c := range memberNames {
		cmd := exec.Command(sh, "-c", fn+"\nvalid_member_name \"$1\"", "sh", c.name)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if _, exit := err.(*exec.ExitError); err != nil && !exit {
			t.Fatalf("run sh: %v", err)
		}
		if stderr.Len() > 0 {
			t.Errorf("valid_member_name %q wrote %q", c.name, stderr.String())
		}
		if got := err == nil; got != c.ok {
			t.Errorf("enrol-member.sh's valid_member_name %q: ok %v, the Go rule says %v", c.name, got, c.ok)
		}
	}
}

// shellFunction returns the text of the function name in script, from "name() {" to the
// closing brace at the start of a line.
func shellFunction(t *testing.T, script, name string) string {
	t.Helper()
	start := strings.Index(script, "\n"+name+"() {\n")
	if start < 0 {
		t.Fatalf("enrol-member.sh has no function %s", name)
	}
	end := strings.Index(script[start+1:], "\n}\n")
	if end < 0 {
		t.Fatalf("enrol-member.sh: function %s does not end", name)
	}
	return script[start+1 : start+1+end+2]
}

// FuzzMemberName: a member name Apelora accepts is a DNS label Incus can target and put in
// a URL; a refusal quotes at most a short prefix of the name.
func FuzzMemberName(f *testing.F) {
	f.Add("node-1")
	f.Add("none")
	f.Add("-a\x00\xff")
	f.Add(strings.Repeat("9", 5000))
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			apperrtest.CheckRefusal(t, err)
			return
		}
		if !memberNameSafe(name) {
			t.Fatalf("accepted member name %q", name)
		}
	})
}

// memberNameSafe is what Incus and URLs need of a member name.
func memberNameSafe(name string) bool {
	return len(name) > 0 && len(name) <= 63 && url.PathEscape(name) == name && strings.Trim(name, "-") == name && name != "none"
}
