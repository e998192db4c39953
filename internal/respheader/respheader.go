// Package respheader lets code deep in a request (a resolver) set HTTP response headers,
// such as `Cache-Control: no-store` on the response that carries a join token. The HTTP
// layer applies them when the response is written.
package respheader

import (
	"context"
	"net/http"
	"sync"
)

type holder struct {
	mu sync.Mutex
	h  http.Header
}

type ctxKey struct{}

// With returns ctx able to carry response headers.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, &holder{h: http.Header{}})
}

// Set sets a response header. It reports false when the request has no HTTP response to
// carry it (a websocket message), so callers know the header was not sent.
func Set(ctx context.Context, key, value string) bool {
	h, ok := ctx.Value(ctxKey{}).(*holder)
	if !ok {
		return false
	}
	h.mu.Lock()
	h.h.Set(key, value)
	h.mu.Unlock()
	return true
}

// Apply copies the headers set so far into dst.
func Apply(ctx context.Context, dst http.Header) {
	h, ok := ctx.Value(ctxKey{}).(*holder)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, v := range h.h {
		dst[k] = v
	}
}
