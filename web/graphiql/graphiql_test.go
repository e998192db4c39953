package graphiql

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

// mounted serves the handler the way cmd/ is expected to: under /graphiql/.
func mounted(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/graphiql/", http.StripPrefix("/graphiql", Handler(opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

type response struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, srv *httptest.Server, path string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// A Transport that does not add or undo gzip by itself.
	client := &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: noRedirect,
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return response{res.StatusCode, res.Header, body}
}

func assertSecurityHeaders(t *testing.T, path string, h http.Header, host string) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{
		"default-src 'none'",
		"script-src 'self';",
		"style-src 'self';",
		"connect-src 'self' ws://" + host + " wss://" + host + ";",
		"frame-ancestors 'none'",
		"base-uri 'none'",
	} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-") || strings.Contains(csp, "*") || strings.Contains(csp, "http") {
		t.Errorf("%s: Content-Security-Policy %q allows more than the page's own origin", path, csp)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q, want nosniff", path, got)
	}
}

var srcAttr = regexp.MustCompile(`(?i)\b(src|href)\s*=\s*"([^"]*)"`)

// TestServesPageAndAssets loads the page as a browser would: index.html, then
// every script and stylesheet it names, checking types, caching and headers.
func TestServesPageAndAssets(t *testing.T) {
	srv := mounted(t, Options{Endpoint: "/api/graphql", Title: `Fabric <lab> "one"`})
	host := strings.TrimPrefix(srv.URL, "http://")

	page := get(t, srv, "/graphiql/", nil)
	if page.status != http.StatusOK {
		t.Fatalf("GET /graphiql/: status %d", page.status)
	}
	if ct := page.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("index Content-Type = %q", ct)
	}
	if cc := page.header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("index Cache-Control = %q, want no-cache (it names the current hashed assets)", cc)
	}
	assertSecurityHeaders(t, "index.html", page.header, host)
	html := string(page.body)
	for _, want := range []string{
		`data-endpoint="/api/graphql"`,
		`data-subscription-endpoint="/api/graphql"`,
		`<title>Fabric &lt;lab&gt; &#34;one&#34;</title>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("index.html lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, "<lab>") {
		t.Errorf("index.html carries the title unescaped:\n%s", html)
	}
	if regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(html) ||
		regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=`).MatchString(html) {
		t.Errorf("index.html has inline script or style, which the CSP forbids:\n%s", html)
	}

	var scripts, styles int
	for _, m := range srcAttr.FindAllStringSubmatch(html, -1) {
		ref := m[2]
		if strings.HasPrefix(ref, "data:") {
			continue
		}
		if strings.Contains(ref, ":") || strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
			t.Errorf("index.html loads %q: want a file beside the page (relative, same origin)", ref)
			continue
		}
		res := get(t, srv, "/graphiql/"+ref, nil)
		if res.status != http.StatusOK {
			t.Errorf("GET %s: status %d", ref, res.status)
			continue
		}
		assertSecurityHeaders(t, ref, res.header, host)
		if cc := res.header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control = %q, want long-lived immutable", ref, cc)
		}
		if res.header.Get("ETag") == "" {
			t.Errorf("%s: no ETag", ref)
		}
		switch ct := res.header.Get("Content-Type"); {
		case strings.HasSuffix(ref, ".js"):
			scripts++
			if ct != "text/javascript; charset=utf-8" {
				t.Errorf("%s: Content-Type = %q", ref, ct)
			}
			for _, p := range webbundle.ScriptProblems(res.body) {
				t.Errorf("%s %s", ref, p)
			}
			if !bytes.Contains(res.body, []byte("graphql-transport-ws")) {
				t.Errorf("%s lacks the graphql-ws client", ref)
			}
		case strings.HasSuffix(ref, ".css"):
			styles++
			if ct != "text/css; charset=utf-8" {
				t.Errorf("%s: Content-Type = %q", ref, ct)
			}
			for _, p := range webbundle.StylesheetProblems(res.body) {
				t.Errorf("%s %s", ref, p)
			}
			if !bytes.Contains(res.body, []byte("url(data:font/woff2")) {
				t.Errorf("%s lacks GraphiQL's inlined fonts", ref)
			}
		default:
			t.Errorf("index.html loads %s, neither script nor stylesheet", ref)
		}
	}
	if scripts != 1 || styles != 1 {
		t.Errorf("index.html loads %d scripts and %d stylesheets, want one of each", scripts, styles)
	}
}

func TestDefaults(t *testing.T) {
	srv := mounted(t, Options{})
	page := get(t, srv, "/graphiql/", nil)
	for _, want := range []string{`data-endpoint="/graphql"`, `data-subscription-endpoint="/graphql"`, `<title>Apelora fabric</title>`} {
		if !strings.Contains(string(page.body), want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	srv = mounted(t, Options{SubscriptionEndpoint: "/graphql/ws"})
	page = get(t, srv, "/graphiql/index.html", nil)
	if !strings.Contains(string(page.body), `data-subscription-endpoint="/graphql/ws"`) {
		t.Errorf("index.html ignores SubscriptionEndpoint:\n%s", page.body)
	}
}

func TestRedirectsBarePrefix(t *testing.T) {
	h := http.StripPrefix("/graphiql", Handler(Options{}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res := get(t, srv, "/graphiql?x=1", nil)
	if res.status != http.StatusMovedPermanently || res.header.Get("Location") != "/graphiql/?x=1" {
		t.Errorf("GET /graphiql: %d Location %q, want 301 to /graphiql/?x=1", res.status, res.header.Get("Location"))
	}
}

func TestRedirectNeverLeavesSite(t *testing.T) {
	h := Handler(Options{})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.URL.Path = "" // as after StripPrefix
	req.RequestURI = "//evil.example"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if loc := rec.Header().Get("Location"); strings.HasPrefix(loc, "//") {
		t.Errorf("redirect to %q leaves the site", loc)
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	srv := mounted(t, Options{})
	for _, p := range []string{"/graphiql/nope.js", "/graphiql/dist/index.html", "/graphiql/graphiql.go", "/graphiql/package.json"} {
		if res := get(t, srv, p, nil); res.status != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, res.status)
		}
	}
	res, err := http.Post(srv.URL+"/graphiql/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /graphiql/: %d Allow %q, want 405 with Allow: GET, HEAD", res.StatusCode, res.Header.Get("Allow"))
	}
}

func TestGzipAndRevalidation(t *testing.T) {
	srv := mounted(t, Options{})
	b, err := loadBundle()
	if err != nil {
		t.Fatal(err)
	}
	p := "/graphiql/" + b.Script
	plain := get(t, srv, p, nil)
	if plain.header.Get("Content-Encoding") != "" {
		t.Fatalf("%s sent compressed to a client that did not ask", p)
	}
	zipped := get(t, srv, p, map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if zipped.header.Get("Content-Encoding") != "gzip" || !strings.Contains(zipped.header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("%s: Content-Encoding %q Vary %q, want gzip, Accept-Encoding", p,
			zipped.header.Get("Content-Encoding"), zipped.header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(unzipped, plain.body) {
		t.Errorf("%s: gzip body does not decompress to the plain body", p)
	}
	if zipped.header.Get("ETag") == plain.header.Get("ETag") {
		t.Errorf("%s: gzip and plain share ETag %s", p, plain.header.Get("ETag"))
	}
	if res := get(t, srv, p, map[string]string{"Accept-Encoding": "gzip;q=0"}); res.header.Get("Content-Encoding") != "" {
		t.Errorf("%s: compressed despite gzip;q=0", p)
	}
	again := get(t, srv, p, map[string]string{"If-None-Match": plain.header.Get("ETag")})
	if again.status != http.StatusNotModified || len(again.body) != 0 {
		t.Errorf("%s with If-None-Match: %d, %d bytes; want 304, empty", p, again.status, len(again.body))
	}
}

func TestRejectsForeignEndpoints(t *testing.T) {
	for _, ep := range []string{"https://elsewhere.example/graphql", "//elsewhere.example/graphql", "graphql", "ws://x/graphql"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handler accepted Endpoint %q", ep)
				}
			}()
			Handler(Options{Endpoint: ep})
		}()
	}
}

// TestDistMatchesSource catches an edit to src/index.html that was not
// followed by build.sh (the JS and CSS need node to check; build.sh is
// reproducible, so a rebuild on an unchanged lock leaves git clean).
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
		t.Error("dist/index.html differs from src/index.html: run web/graphiql/build.sh")
	}
}
