// Package webbundle serves a browser build embedded in the binary (GraphiQL, the console):
// an index.html template and exactly one hashed script and one hashed stylesheet, with
// immutable caching for the hashed files, gzip on request, and a Content-Security-Policy
// that lets the page load and connect to its own origin only.
package webbundle

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// CacheImmutable is for files named by their content's hash.
	CacheImmutable = "public, max-age=31536000, immutable"
	// CacheRevalidate is for the page that names the current hashed files.
	CacheRevalidate = "no-cache"
)

// Asset is one file served from memory.
type Asset struct {
	contentType string
	cache       string
	body        []byte
	etag        string

	gzipOnce sync.Once
	gzipBody []byte // nil when compression does not pay
	gzipETag string
}

// NewAsset returns a file to serve with the given type and Cache-Control.
func NewAsset(contentType, cache string, body []byte) *Asset {
	sum := sha256.Sum256(body)
	return &Asset{
		contentType: contentType,
		cache:       cache,
		body:        body,
		etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
	}
}

// Body returns the file's bytes.
func (a *Asset) Body() []byte { return a.body }

// Compressed returns the gzip form of the body, made on first use so that a binary that
// never serves the page never pays for it; nil when compression does not pay.
func (a *Asset) Compressed() ([]byte, string) {
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

// Serve answers a GET or HEAD with the file (gzip when the client accepts it), and
// If-None-Match and Range as http.ServeContent does. Other methods get 405.
func (a *Asset) Serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the page's files are read with GET", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", a.cache)
	hdr.Add("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if AcceptsGzip(r.Header.Get("Accept-Encoding")) {
		if gz, gzTag := a.Compressed(); gz != nil {
			body, etag = gz, gzTag
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("ETag", etag)
	// ServeContent answers If-None-Match, Range and HEAD; a zero time leaves
	// Last-Modified out (the embedded files have none).
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// Bundle is an embedded build: the index template and the hashed assets.
type Bundle struct {
	Index      *template.Template
	Script     string // file name of the JS bundle
	Stylesheet string // file name of the CSS bundle
	Assets     map[string]*Asset
}

// Read reads dir in fsys: index.html (an html/template) and exactly one .js and one .css
// file, whose names carry a content hash. what names the build in errors, rebuild the
// command that makes it again.
func Read(fsys fs.FS, dir, what, rebuild string) (*Bundle, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded %s build: %w", what, err)
	}
	b := &Bundle{Assets: map[string]*Asset{}}
	for _, e := range entries {
		name := e.Name()
		var contentType string
		switch path.Ext(name) {
		case ".js":
			if b.Script != "" {
				return nil, fmt.Errorf("embedded %s build has two scripts, %s and %s: rerun %s", what, b.Script, name, rebuild)
			}
			b.Script, contentType = name, "text/javascript; charset=utf-8"
		case ".css":
			if b.Stylesheet != "" {
				return nil, fmt.Errorf("embedded %s build has two stylesheets, %s and %s: rerun %s", what, b.Stylesheet, name, rebuild)
			}
			b.Stylesheet, contentType = name, "text/css; charset=utf-8"
		case ".html":
			continue
		default:
			return nil, fmt.Errorf("embedded %s build has an unexpected file %s: rerun %s", what, name, rebuild)
		}
		body, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("read embedded %s file %s: %w", what, name, err)
		}
		b.Assets[name] = NewAsset(contentType, CacheImmutable, body)
	}
	if b.Script == "" || b.Stylesheet == "" {
		return nil, fmt.Errorf("embedded %s build lacks its script or stylesheet: rerun %s", what, rebuild)
	}
	src, err := fs.ReadFile(fsys, dir+"/index.html")
	if err != nil {
		return nil, fmt.Errorf("read embedded %s index.html: %w", what, err)
	}
	b.Index, err = template.New("index.html").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("parse embedded %s index.html: %w", what, err)
	}
	return b, nil
}

// Page renders the index template with data into a no-cache asset.
func (b *Bundle) Page(data map[string]string) (*Asset, error) {
	var page bytes.Buffer
	if err := b.Index.Execute(&page, data); err != nil {
		return nil, fmt.Errorf("render index.html: %w", err)
	}
	return NewAsset("text/html; charset=utf-8", CacheRevalidate, page.Bytes()), nil
}

// CheckPath accepts an absolute path on the page's own origin: the CSP allows connections
// to nothing else.
func CheckPath(p string) error {
	if strings.Contains(p, "://") || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return fmt.Errorf("endpoint %q must be an absolute path on the same origin, like /graphql", p)
	}
	return nil
}

// SetSecurityHeaders sets the headers every response of a page carries. The CSP lets the
// page load and connect only to its own origin. Browsers that implement CSP level 3 match
// ws: and wss: to the page's host under 'self'; for older ones the host is named
// explicitly, when it is a plain host[:port].
func SetSecurityHeaders(h http.Header, host string) {
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

// plainHost reports whether host is safe to copy into a CSP source expression: letters,
// digits, dots, hyphens, an optional port and IPv6 brackets. Anything else (a ';' would
// start a new directive) is left out.
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

// AcceptsGzip reports whether an Accept-Encoding value allows gzip (explicitly or through
// "*"), honouring q=0.
func AcceptsGzip(accept string) bool {
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

var (
	cssURL   = regexp.MustCompile(`(?i)url\(\s*['"]?([^'")]*)`)
	cssAtImp = regexp.MustCompile(`(?i)@import`)
)

// StylesheetProblems lists what would make a stylesheet load something: an @import, or a
// url() that is not a data: URL. Builds' tests use it.
func StylesheetProblems(css []byte) []string {
	var problems []string
	if cssAtImp.Match(css) {
		problems = append(problems, "uses @import")
	}
	for _, m := range cssURL.FindAllSubmatch(css, -1) {
		if !bytes.HasPrefix(bytes.TrimSpace(m[1]), []byte("data:")) {
			problems = append(problems, fmt.Sprintf("loads url(%.80s): want only data: URLs", m[1]))
		}
	}
	return problems
}

// ScriptProblems lists the CDNs and remote loaders a script names. Library code keeps
// harmless URLs in strings (documentation links, XML namespaces, licence comments), so
// this looks for the hosts and patterns that load code or styles.
func ScriptProblems(js []byte) []string {
	var problems []string
	lower := bytes.ToLower(js)
	for _, bad := range []string{
		"unpkg.com", "jsdelivr", "esm.sh", "cdnjs", "cdn.skypack", "googleapis.com",
		"gstatic.com", "jspm.io", "esm.run", "//cdn.",
	} {
		if i := bytes.Index(lower, []byte(bad)); i >= 0 {
			problems = append(problems, fmt.Sprintf("mentions %q: %q", bad, excerpt(js, i)))
		}
	}
	for _, re := range remoteLoads {
		if loc := re.FindIndex(js); loc != nil {
			problems = append(problems, fmt.Sprintf("loads remote code: %q", excerpt(js, loc[0])))
		}
	}
	return problems
}

var remoteLoads = []*regexp.Regexp{
	regexp.MustCompile(`import\(\s*["'\x60](https?:)?//`),
	regexp.MustCompile(`importScripts\(`),
	regexp.MustCompile(`(?i)\.src\s*=\s*["'\x60](https?:)?//`),
	regexp.MustCompile(`(?i)\.href\s*=\s*["'\x60](https?:)?//[^"'\x60]*\.(css|js|woff2?)`),
	regexp.MustCompile(`(?i)<(script|link)[^>]+(src|href)=\\?["'](https?:)?//`),
}

func excerpt(b []byte, i int) string {
	lo, hi := max(0, i-60), min(len(b), i+80)
	return string(b[lo:hi])
}
