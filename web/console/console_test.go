package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/webbundle"
)

// budget is the most gzipped JS+CSS the first load may cost.
const budget = 300 << 10

func serve(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(Options{}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, h map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

func TestFirstLoadFitsTheBudget(t *testing.T) {
	b, err := loadBundle()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range []string{b.Script, b.Stylesheet} {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b.Assets[name].Body())
		zw.Close()
		t.Logf("%s: %d KiB, %d KiB gzipped", name, kib(len(b.Assets[name].Body())), kib(buf.Len()))
		total += buf.Len()
	}
	// The sizes are printed here, not written in the README, so no document goes stale.
	t.Logf("first load: %d KiB gzipped of the %d KiB budget", kib(total), kib(budget))
	if total > budget {
		t.Fatalf("first load is %d KiB gzipped, over the %d KiB budget", kib(total), kib(budget))
	}
}

// kib rounds n bytes to the nearest KiB.
func kib(n int) int { return (n + 512) >> 10 }

var ref = regexp.MustCompile(`(?i)\b(?:src|href)="([^"]*)"`)

func TestServesThePageAtEveryClientRoute(t *testing.T) {
	srv := serve(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	var index []byte
	for _, p := range []string{"/", "/machines/node-1", "/audit", "/enrolment", "/fencing", "/identities", "/no/such/page"} {
		res, body := get(t, srv, p, nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s: %d %q %q", p, res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("Content-Type"))
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "connect-src 'self' ws://"+host) ||
			strings.Contains(csp, "unsafe-") || res.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: security headers %v", p, res.Header)
		}
		index = body
	}
	html := string(index)
	if regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(html) || regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=`).MatchString(html) {
		t.Errorf("the page has inline script or style, which the CSP forbids:\n%s", html)
	}
	if !strings.Contains(html, `data-endpoint="/graphql"`) || !strings.Contains(html, `data-session="/api/v1/session"`) {
		t.Errorf("the page does not name its endpoints:\n%s", html)
	}
	// The server's request timeout is told to the page (the default here; the product's own
	// is checked in Chromium by TestConsolePagesWhileMAASHangs).
	if !strings.Contains(html, `data-request-timeout="10000"`) {
		t.Errorf("the page is not told the request timeout:\n%s", html)
	}
	var assets int
	for _, m := range ref.FindAllStringSubmatch(html, -1) {
		u := m[1]
		if strings.HasPrefix(u, "data:") || u == "/graphiql/" {
			continue
		}
		if !strings.HasPrefix(u, AssetPrefix) {
			t.Errorf("the page loads %q: want a hashed file under %s", u, AssetPrefix)
			continue
		}
		assets++
		res, body := get(t, srv, u, nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != webbundle.CacheImmutable || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d %v", u, res.StatusCode, res.Header)
		}
		problems := webbundle.ScriptProblems(body)
		if strings.HasSuffix(u, ".css") {
			problems = webbundle.StylesheetProblems(body)
		}
		for _, p := range problems {
			t.Errorf("%s %s", u, p)
		}
		if res, _ := get(t, srv, u, map[string]string{"Accept-Encoding": "gzip"}); res.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s is not served gzipped on request", u)
		}
	}
	if assets != 2 {
		t.Errorf("the page loads %d hashed files, want one script and one stylesheet", assets)
	}
}

func TestFilesAndTheAPIAreNotThePage(t *testing.T) {
	srv := serve(t)
	for _, p := range []string{"/assets/nope.js", "/favicon.ico", "/console.go", "/api/v1/nothing", "/graphql", "/graphql/x", "/dist/index.html"} {
		if res, _ := get(t, srv, p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	res, err := http.Post(srv.URL+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", res.StatusCode)
	}
}

// TestDistMatchesSource catches an edit of src/index.html without a rebuild; the script
// and stylesheet are checked against src/ by build.sh --check, which scripts/test.sh runs.
func TestDistMatchesSource(t *testing.T) {
	src, err := os.ReadFile("src/index.html")
	if err != nil {
		t.Fatal(err)
	}
	built, err := dist.ReadFile("dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, built) {
		t.Error("dist/index.html differs from src/index.html: run web/console/build.sh")
	}
}
