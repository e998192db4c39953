// Package publicurl carries the URL administrators reach Apelora at, so responses can
// tell a new server where to fetch enrol-member.sh.
package publicurl

import (
	"context"
	"net/http"
	"strings"
)

type ctxKey struct{}

// With returns ctx carrying base (for example "https://apelora.example:8080").
func With(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, ctxKey{}, strings.TrimSuffix(base, "/"))
}

// From returns the URL carried by ctx, or "http://APELORA-HOST:8080" as a placeholder.
func From(ctx context.Context) string {
	if s, ok := ctx.Value(ctxKey{}).(string); ok && s != "" {
		return s
	}
	return "http://APELORA-HOST:8080"
}

// FromRequest derives the URL from the request: configured wins; otherwise the Host the
// client used, with https when the connection is TLS.
func FromRequest(r *http.Request, configured string) string {
	if configured != "" {
		return configured
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
