package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/respheader"
)

// withRequest gives every request an id (X-Request-Id, echoed back), a place for response
// headers set by resolvers, and an access log line at accessLevel (health checks at DEBUG)
// naming the TCP peer and the client the limits key on (not the same behind a proxy).
func withRequest(log *slog.Logger, accessLevel slog.Level, proxies TrustedProxies, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := logging.AcceptRequestID(r.Header.Get("X-Request-Id"))
		ctx := respheader.With(logging.WithRequestID(r.Context(), id))
		w.Header().Set("X-Request-Id", id)
		rec := &recorder{ResponseWriter: w, ctx: ctx, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		level := accessLevel
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			level = slog.LevelDebug
		}
		actor := ""
		if rec.identity != nil {
			actor = rec.identity.Name
		}
		log.Log(ctx, level, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"bytes", rec.bytes, "duration_ms", time.Since(start).Milliseconds(), "identity", actor,
			"remote", r.RemoteAddr, "client", proxies.clientAddress(r))
	})
}

// recorder applies resolver-set headers before the first byte and notes what was sent. It
// keeps http.Hijacker and Flusher reachable for the websocket upgrade.
type recorder struct {
	http.ResponseWriter
	ctx         context.Context
	status      int
	bytes       int
	wroteHeader bool
	identity    *identity.Identity
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.wroteHeader = true
		r.status = code
		respheader.Apply(r.ctx, r.ResponseWriter.Header())
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response writer cannot be hijacked")
	}
	r.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// withIdentity authenticates the bearer token, if any, or else the console's session
// cookie. A request without a valid one goes on without an identity, and the GraphQL gate
// refuses (and audits) what it tries.
func withIdentity(store credentials, origins []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var id *identity.Identity
		if h := r.Header.Get("Authorization"); h != "" {
			var err error
			var sess *identity.ConsoleSession
			if id, sess, err = identity.AuthenticateHeader(ctx, store, h); err != nil {
				ctx = withAuthError(ctx, err)
			} else {
				ctx = identity.WithIdentity(ctx, id)
				if sess != nil {
					ctx = context.WithValue(ctx, sessionKey{}, sess)
				}
			}
		} else {
			ctx, id = fromSession(ctx, store, origins, r)
		}
		if rec, ok := w.(*recorder); ok && id != nil {
			rec.identity = id
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
