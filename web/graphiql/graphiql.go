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
	"embed"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/apelora/fabric/internal/webbundle"
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
)

var loadBundle = sync.OnceValues(func() (*webbundle.Bundle, error) {
	return webbundle.Read(dist, "dist", "GraphiQL", "web/graphiql/build.sh")
})

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
		if err := webbundle.CheckPath(p); err != nil {
			panic("graphiql.Handler: " + err.Error())
		}
	}
	b, err := loadBundle()
	if err != nil {
		panic("graphiql.Handler: " + err.Error())
	}
	index, err := b.Page(map[string]string{
		"Title":                opts.Title,
		"Endpoint":             opts.Endpoint,
		"SubscriptionEndpoint": opts.SubscriptionEndpoint,
		"Script":               b.Script,
		"Stylesheet":           b.Stylesheet,
	})
	if err != nil {
		panic("graphiql.Handler: " + err.Error())
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
	var a *webbundle.Asset
	switch {
	case p == "":
		// Mounted with http.StripPrefix and requested without the trailing
		// slash: the page's relative asset URLs need it.
		redirectToSlash(w, r)
		return
	case p == "/" || p == "/index.html":
		a = h.index
	case strings.HasPrefix(p, "/"):
		a = h.bundle.Assets[p[1:]]
	}
	if a == nil {
		http.NotFound(w, r)
		return
	}
	a.Serve(w, r)
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
