// Package graphiql serves GraphiQL, the in-browser GraphQL IDE, from files
// embedded in the binary. Nothing is loaded from another origin, so it works
// air-gapped, under a Content-Security-Policy that allows only the page's own
// origin.
//
// The page sends queries and mutations to the GraphQL endpoint over HTTP POST
// with the headers typed in GraphiQL's Headers editor, and subscriptions over
// graphql-transport-ws to the same path, with those headers as the
// connection_init payload. Administrators authenticate by pasting
// {"Authorization": "Bearer <token>"} there; the page never stores it.
//
// dist/ is built from the npm packages pinned in package-lock.json by
// build.sh; see README.md.
package graphiql

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed dist
var dist embed.FS

// Options configure the page.
type Options struct {
	// Endpoint is the path of the GraphQL endpoint on the same origin, used
	// for queries and mutations (HTTP POST). Default "/graphql".
	Endpoint string
	// SubscriptionEndpoint is the path of the graphql-transport-ws endpoint
	// on the same origin; the page connects to ws:// or wss:// as the page
	// itself was loaded. Default: Endpoint.
	SubscriptionEndpoint string
	// Title is shown in the browser tab and in GraphiQL's header.
	// Default "Apelora fabric".
	Title string
}

const (
	defaultEndpoint = "/graphql"
	defaultTitle    = "Apelora fabric"

	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// asset is one file served by the handler.
type asset struct {
	contentType string
	cache       string
	body        []byte
	etag        string

	gzipOnce sync.Once
	gzipBody []byte // nil when compression does not pay
	gzipETag string
}

func newAsset(contentType, cache string, body []byte) *asset {
	sum := sha256.Sum256(body)
	return &asset{
		contentType: contentType,
		cache:       cache,
		body:        body,
		etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
	}
}

// compressed returns the gzip form of the body, made on first use so that a
// binary that never serves GraphiQL never pays for it.
func (a *asset) compressed() ([]byte, string) {
	a.gzipOnce.Do(func() {
		if len(a.body) < 1024 {
			return
		}
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return
		}
		if _, err := zw.Write(a.body); err != nil {
			return
		}
		if err := zw.Close(); err != nil {
			return
		}
		if buf.Len() < len(a.body) {
			a.gzipBody = buf.Bytes()
			a.gzipETag = strings.TrimSuffix(a.etag, `"`) + `-gz"`
		}
	})
	return a.gzipBody, a.gzipETag
}

// bundle is the embedded build: the index template and the hashed assets.
type bundle struct {
	index      *template.Template
	script     string // file name of the JS bundle
	stylesheet string // file name of the CSS bundle
	assets     map[string]*asset
}

var loadBundle = sync.OnceValues(func() (*bundle, error) { return readBundle(dist) })

// readBundle reads dist/: index.html (an html/template) and exactly one
// .js and one .css file, whose names carry a content hash.
func readBundle(fsys fs.FS) (*bundle, error) {
	entries, err := fs.ReadDir(fsys, "dist")
	if err != nil {
		return nil, fmt.Errorf("read embedded GraphiQL build: %w", err)
	}
	b := &bundle{assets: map[string]*asset{}}
	for _, e := range entries {
		name := e.Name()
		var contentType string
		switch path.Ext(name) {
		case ".js":
			if b.script != "" {
				return nil, fmt.Errorf("embedded GraphiQL build has two scripts, %s and %s: rerun web/graphiql/build.sh", b.script, name)
			}
			b.script, contentType = name, "text/javascript; charset=utf-8"
		case ".css":
			if b.stylesheet != "" {
				return nil, fmt.Errorf("embedded GraphiQL build has two stylesheets, %s and %s: rerun web/graphiql/build.sh", b.stylesheet, name)
			}
			b.stylesheet, contentType = name, "text/css; charset=utf-8"
		case ".html":
			continue
		default:
			return nil, fmt.Errorf("embedded GraphiQL build has an unexpected file %s: rerun web/graphiql/build.sh", name)
		}
		body, err := fs.ReadFile(fsys, "dist/"+name)
		if err != nil {
			return nil, fmt.Errorf("read embedded GraphiQL file %s: %w", name, err)
		}
		b.assets[name] = newAsset(contentType, cacheImmutable, body)
	}
	if b.script == "" || b.stylesheet == "" {
		return nil, fmt.Errorf("embedded GraphiQL build lacks its script or stylesheet: rerun web/graphiql/build.sh")
	}
	src, err := fs.ReadFile(fsys, "dist/index.html")
	if err != nil {
		return nil, fmt.Errorf("read embedded GraphiQL index.html: %w", err)
	}
	b.index, err = template.New("index.html").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("parse embedded GraphiQL index.html: %w", err)
	}
	return b, nil
}

// Handler returns an http.Handler that serves the GraphiQL page at "/" of
// wherever it is mounted, and its script and stylesheet beside it. Mount it
// under a prefix with http.StripPrefix:
//
//	mux.Handle("/graphiql/", http.StripPrefix("/graphiql", graphiql.Handler(graphiql.Options{})))
//
// A request for the bare prefix ("/graphiql") is redirected to "/graphiql/"
// so that the page's relative asset URLs resolve.
//
// Handler panics if Endpoint or SubscriptionEndpoint is not an absolute path
// on the same origin, or if the embedded build is broken (both are
// programming errors, caught by this package's tests).
func Handler(opts Options) http.Handler {
	if opts.Endpoint == "" {
		opts.Endpoint = defaultEndpoint
	}
	if opts.SubscriptionEndpoint == "" {
		opts.SubscriptionEndpoint = opts.Endpoint
	}
	if opts.Title == "" {
		opts.Title = defaultTitle
	}
	for _, p := range []string{opts.Endpoint, opts.SubscriptionEndpoint} {
		if err := checkPath(p); err != nil {
			panic("graphiql.Handler: " + err.Error())
		}
	}
	b, err := loadBundle()
	if err != nil {
		panic("graphiql.Handler: " + err.Error())
	}
	var page bytes.Buffer
	err = b.index.Execute(&page, map[string]string{
		"Title":                opts.Title,
		"Endpoint":             opts.Endpoint,
		"SubscriptionEndpoint": opts.SubscriptionEndpoint,
		"Script":               b.script,
		"Stylesheet":           b.stylesheet,
	})
	if err != nil {
		panic("graphiql.Handler: render index.html: " + err.Error())
	}
	return &handler{
		bundle: b,
		index:  newAsset("text/html; charset=utf-8", cacheRevalidate, page.Bytes()),
	}
}

// checkPath accepts an absolute path on the page's own origin: the CSP
// allows connections to nothing else.
func checkPath(p string) error {
	u, err := url.Parse(p)
	if err != nil {
		return fmt.Errorf("endpoint %q: %w", p, err)
	}
	if u.Scheme != "" || u.Host != "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return fmt.Errorf("endpoint %q must be an absolute path on the same origin, like /graphql", p)
	}
	return nil
}

type handler struct {
	bundle *bundle
	index  *asset
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header(), r.Host)

	p := r.URL.Path
	var a *asset
	switch {
	case p == "":
		// Mounted with http.StripPrefix and requested without the trailing
		// slash: the page's relative asset URLs need it.
		redirectToSlash(w, r)
		return
	case p == "/" || p == "/index.html":
		a = h.index
	case strings.HasPrefix(p, "/"):
		a = h.bundle.assets[p[1:]]
	}
	if a == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: GraphiQL's files are read with GET", http.StatusMethodNotAllowed)
		return
	}

	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", a.cache)
	hdr.Add("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		if gz, gzTag := a.compressed(); gz != nil {
			body, etag = gz, gzTag
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("ETag", etag)
	// ServeContent answers If-None-Match, Range and HEAD; a zero time
	// leaves Last-Modified out (the embedded files have none).
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// redirectToSlash sends the client to the request's own path plus "/". The
// request URI is the one the client sent, before any StripPrefix.
func redirectToSlash(w http.ResponseWriter, r *http.Request) {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || u.Path == "" {
		http.NotFound(w, r)
		return
	}
	// Never a scheme-relative "//host/" location: that would leave the site.
	target := "/" + strings.TrimLeft(u.Path, "/") + "/"
	if target == "//" {
		target = "/"
	}
	if u.RawQuery != "" {
		target += "?" + u.RawQuery
	}
	http.Redirect(w, r, target, http.StatusMovedPermanently)
}

// setSecurityHeaders sets the headers every response carries. The CSP lets
// the page load and connect only to its own origin. Browsers that implement
// CSP level 3 match ws: and wss: to the page's host under 'self'; for older
// ones the host is named explicitly, when it is a plain host[:port].
func setSecurityHeaders(h http.Header, host string) {
	connect := "'self'"
	if plainHost(host) {
		connect += " ws://" + host + " wss://" + host
	}
	h.Set("Content-Security-Policy", strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; "))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// plainHost reports whether host is safe to copy into a CSP source
// expression: letters, digits, dots, hyphens, an optional port and IPv6
// brackets. Anything else (a ';' would start a new directive) is left out.
func plainHost(host string) bool {
	if host == "" || len(host) > 262 {
		return false
	}
	for _, c := range host {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip
// (explicitly or through "*"), honouring q=0.
func acceptsGzip(accept string) bool {
	ok := false
	for _, part := range strings.Split(accept, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		refused := false
		for _, param := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				refused = err == nil && q == 0
			}
		}
		if coding == "gzip" {
			return !refused
		}
		ok = !refused
	}
	return ok
}
