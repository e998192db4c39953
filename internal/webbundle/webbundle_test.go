package webbundle

import (
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadCheckersCatchRemoteLoads(t *testing.T) {
	for _, js := range []string{
		`a=import("https://esm.sh/react")`,
		`s.src="https://cdn.example.com/x.js"`,
		`l.href="//static.example.com/graphiql.css"`,
		`x='<script src="https://example.com/a.js">'`,
		`importScripts("w.js")`,
	} {
		if len(ScriptProblems([]byte(js))) == 0 {
			t.Errorf("scriptProblems missed %s", js)
		}
	}
	if p := ScriptProblems([]byte(`a="https://react.dev/errors/";b="http://www.w3.org/2000/svg"`)); len(p) != 0 {
		t.Errorf("scriptProblems flags harmless strings: %v", p)
	}
	for _, css := range []string{
		`@import url(x.css);`,
		`@font-face{src:url(https://fonts.example.com/a.woff2)}`,
		`a{background:url( "//img.example.com/a.png")}`,
		`a{background:url(a.png)}`,
	} {
		if len(StylesheetProblems([]byte(css))) == 0 {
			t.Errorf("stylesheetProblems missed %s", css)
		}
	}
	if p := StylesheetProblems([]byte(`a{background:url("data:image/png;base64,AA")}`)); len(p) != 0 {
		t.Errorf("stylesheetProblems flags a data: URL: %v", p)
	}
}

func TestCSPLeavesOutOddHosts(t *testing.T) {
	h := http.Header{}
	SetSecurityHeaders(h, "evil;script-src *")
	csp := h.Get("Content-Security-Policy")
	if strings.Contains(csp, "evil") || !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("CSP %q copied an unsafe Host", csp)
	}
	SetSecurityHeaders(h, "[::1]:8443")
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' ws://[::1]:8443 wss://[::1]:8443;") {
		t.Errorf("CSP %q lacks the IPv6 host", csp)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for in, want := range map[string]bool{
		"":                    false,
		"gzip":                true,
		"GZIP":                true,
		"deflate, gzip;q=1.0": true,
		"gzip;q=0":            false,
		"gzip;q=0.000":        false,
		"*":                   true,
		"*;q=0":               false,
		"identity":            false,
		"br, *;q=0.1":         true,
		"gzip;q=0, *":         false,
	} {
		if got := AcceptsGzip(in); got != want {
			t.Errorf("AcceptsGzip(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestReadBundleRefusesStrayFiles(t *testing.T) {
	base := fstest.MapFS{
		"dist/index.html": {Data: []byte("<title>{{.Title}}</title>")},
		"dist/a-1.js":     {Data: []byte("1")},
		"dist/a-1.css":    {Data: []byte("1")},
	}
	if _, err := Read(base, "dist", "test", "build.sh"); err != nil {
		t.Fatalf("Read: %v", err)
	}
	for _, extra := range []string{"dist/a-2.js", "dist/a-2.css", "dist/a.js.map"} {
		fsys := fstest.MapFS{extra: {Data: []byte("x")}}
		for k, v := range base {
			fsys[k] = v
		}
		if _, err := Read(fsys, "dist", "test", "build.sh"); err == nil {
			t.Errorf("Read accepted a build with %s", extra)
		}
	}
}
