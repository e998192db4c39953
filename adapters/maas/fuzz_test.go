package maas

import (
	"net/url"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr/apperrtest"
)

// FuzzSystemIDAndScripts: a system id the client accepts stays one path segment under
// machines/ (no slash, query or escape can reach MAAS's URL), and testing script names it
// accepts stay one comma-separated value. Refusals quote a short prefix only. The client
// accepts exactly the system ids the domain accepts (machines.ValidateSystemID).
func FuzzSystemIDAndScripts(f *testing.F) {
	f.Add("k7qpwx", "smartctl-validate")
	f.Add("../../users", "a,b")
	f.Add("a%2f..", "x y\x00")
	f.Add(strings.Repeat("z", 5000), strings.Repeat("s", 5000))
	f.Add("AB-1", "")
	f.Add("abc", "")
	f.Fuzz(func(t *testing.T, id, script string) {
		if (checkSystemID(id) == nil) != (machines.ValidateSystemID("maasSystemId", id) == nil) {
			t.Fatalf("system id %q: client and domain disagree (client: %v; domain: %v)", id, checkSystemID(id), machines.ValidateSystemID("maasSystemId", id))
		}
		if err := checkSystemID(id); err != nil {
			apperrtest.CheckMessage(t, err.Error())
		} else {
			u, perr := url.Parse("https://maas.example/MAAS/api/2.0/" + machinePath(id))
			if perr != nil || u.Path != "/MAAS/api/2.0/machines/"+id+"/" || u.RawQuery != "" || u.Fragment != "" || url.PathEscape(id) != id || id == "." || id == ".." {
				t.Fatalf("accepted system id %q reaches %v", id, u)
			}
		}
		p := url.Values{}
		if err := setScripts(p, []string{script}); err != nil {
			apperrtest.CheckMessage(t, err.Error())
		} else if got := p.Get("testing_scripts"); got != script || strings.ContainsAny(got, ", ") {
			t.Fatalf("script %q sent as %q", script, got)
		}
	})
}
