package incus

import (
	"net/url"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperrtest"
)

// FuzzMemberName: a member name Apelora accepts is a DNS label Incus can target and put in
// a URL; a refusal quotes at most a short prefix of the name.
func FuzzMemberName(f *testing.F) {
	f.Add("node-1")
	f.Add("none")
	f.Add("-a\x00\xff")
	f.Add(strings.Repeat("9", 5000))
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidMemberName(name)
		if err != nil {
			apperrtest.CheckMessage(t, err.Error())
			return
		}
		if len(name) == 0 || len(name) > 63 || url.PathEscape(name) != name || strings.Trim(name, "-") != name || name == "none" {
			t.Fatalf("accepted member name %q", name)
		}
	})
}
