// Package console serves Fabric Console, the operators' web console, from files embedded
// in the binary: one page at every client-side route (no-cache, it names the current
// hashed files), the hashed script and stylesheet under /assets/ (immutable), all under a
// Content-Security-Policy that allows only the page's own origin. Nothing is loaded from
// anywhere else, so it works air-gapped.
//
// The console is a GraphQL client of this API like any other: HTTP POST to Endpoint,
// graphql-transport-ws to the same path, authenticated by the session cookie that
// Session (POST with a bearer token, once) sets.
//
// dist/ is built from src/ with the npm packages pinned in package-lock.json by
// build.sh; see README.md.
package console

import (
	"embed"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/internal/webbundle"
)

//go:embed dist
var dist embed.FS

// Options configure the page.
type Options struct {
	// Endpoint is the GraphQL endpoint's path on the same origin. Default "/graphql".
	Endpoint string
	// Session is the sign-in endpoint's path. Default "/api/v1/session".
	Session string
	// Title is shown in the browser tab. Default "Fabric Console".
	Title string
	// SSO is where the sign-in page asks for the identity provider's sign-in URL (POST);
	// "" when single sign-on is not configured, and the page offers none.
	SSO string
	// RequestTimeout is the server's bound on each upstream wait (APELORA_REQUEST_TIMEOUT),
	// told to the page (data-request-timeout, in milliseconds): the console waits for a
	// read that long and more (a hung MAAS answers UNAVAILABLE, or a partial answer, after
	// it) and says so meanwhile, instead of giving up first. Zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// DefaultRequestTimeout is the page's request timeout when Options gives none (the
// server's own default).
const DefaultRequestTimeout = 10 * time.Second

// AssetPrefix is where the hashed files are served.
const AssetPrefix = "/assets/"

var loadBundle = sync.OnceValues(func() (*webbundle.Bundle, error) {
	return webbundle.Read(dist, "dist", "console", "web/console/build.sh")
})

// Handler serves the console at "/". Mount it as the mux's catch-all for GET. It panics if
// an endpoint is not a path on the same origin or the embedded build is broken
// (programming errors, caught by this package's tests).
func Handler(opts Options) http.Handler {
	if opts.Endpoint == "" {
		opts.Endpoint = "/graphql"
	}
	if opts.Session == "" {
		opts.Session = "/api/v1/session"
	}
	if opts.Title == "" {
		opts.Title = "Fabric Console"
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	for _, p := range []string{opts.Endpoint, opts.Session, opts.SSO} {
		if p == opts.SSO && p == "" {
			continue
		}
		if err := webbundle.CheckPath(p); err != nil {
			panic("console.Handler: " + err.Error())
		}
	}
	b, err := loadBundle()
	if err != nil {
		panic("console.Handler: " + err.Error())
	}
	index, err := b.Page(map[string]string{
		"Title":      opts.Title,
		"Endpoint":   opts.Endpoint,
		"Session":    opts.Session,
		"SSO":        opts.SSO,
		"Timeout":    strconv.FormatInt(opts.RequestTimeout.Milliseconds(), 10),
		"Script":     AssetPrefix + b.Script,
		"Stylesheet": AssetPrefix + b.Stylesheet,
	})
	if err != nil {
		panic("console.Handler: " + err.Error())
	}
	return &handler{bundle: b, index: index}
}

type handler struct {
	bundle *webbundle.Bundle
	index  *webbundle.Asset
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	webbundle.SetSecurityHeaders(w.Header(), r.Host)
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, AssetPrefix):
		if a := h.bundle.Assets[strings.TrimPrefix(p, AssetPrefix)]; a != nil {
			a.Serve(w, r)
			return
		}
	case clientRoute(p):
		h.index.Serve(w, r)
		return
	}
	http.NotFound(w, r)
}

// clientRoute reports whether p is a page of the console (which routes in the browser)
// rather than a file or an API path: every path under / whose last segment has no dot,
// except the API's.
func clientRoute(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/api/") || p == "/graphql" || strings.HasPrefix(p, "/graphql/") {
		return false
	}
	return !strings.Contains(path.Base(p), ".") || p == "/"
}
