package maas

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apelora/fabric/apperr"
)

// FuzzSystemIDAndScripts: a system id the client accepts stays one path segment under
// machines/ (no slash, query or escape can reach MAAS's URL), and testing script names it
// accepts stay one comma-separated value. Refusals quote a short prefix only.
func FuzzSystemIDAndScripts(f *testing.F) {
	f.Add("k7qpwx", "smartctl-validate")
	f.Add("../../users", "a,b")
	f.Add("a%2f..", "x y\x00")
	f.Add(strings.Repeat("z", 5000), strings.Repeat("s", 5000))
	f.Fuzz(func(t *testing.T, id, script string) {
		if err := checkSystemID(id); err != nil {
			checkMessage(t, err)
		} else {
			u, perr := url.Parse("https://maas.example/MAAS/api/2.0/" + machinePath(id))
			if perr != nil || u.Path != "/MAAS/api/2.0/machines/"+id+"/" || u.RawQuery != "" || u.Fragment != "" || url.PathEscape(id) != id || id == "." || id == ".." {
				t.Fatalf("accepted system id %q reaches %v", id, u)
			}
		}
		p := url.Values{}
		if err := setScripts(p, []string{script}); err != nil {
			checkMessage(t, err)
		} else if got := p.Get("testing_scripts"); got != script || strings.ContainsAny(got, ", ") {
			t.Fatalf("script %q sent as %q", script, got)
		}
	})
}

func checkMessage(t *testing.T, err error) {
	t.Helper()
	if m := err.Error(); len(m) > 4*apperr.QuoteLimit+200 || !utf8.ValidString(m) || strings.ContainsAny(m, "\x00\n") {
		t.Fatalf("refusal says %q", m)
	}
}
