package server

import (
	"context"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/identity"
)

// Sessions ends a websocket's connection context when its identity is revoked, deleted or
// expires, or the console session it authenticated with ends (identity.Sessions), with an
// UNAUTHENTICATED *apperr.Error as the cause.
type Sessions interface {
	Watch(ctx context.Context, id *identity.Identity) (context.Context, error)
	WatchSession(ctx context.Context, id *identity.Identity, session int64) (context.Context, error)
}

// The contract with the websocket transport: websocketInit derives each socket's
// connection context; when that context ends with an *apperr.Error UNAUTHENTICATED cause,
// the socket closes with 4403 and the error's message as the reason. graphql-ws clients
// treat 4403 as final, so they stop instead of reconnecting with a dead token.
//
// gqlgen's transport closes every socket whose context ends with 1000 "terminated" and
// cannot be told otherwise, so closeOn4403 wraps its websocket implementation and rewrites
// that close. The connection context is made after the upgrade, in websocketInit; a
// socketEnd, put in the request's context before gqlgen sees it, carries it from there to
// the wrapped connection.

// closeCodeRevoked is the close code for a socket whose identity may no longer
// authenticate (the same as a socket refused at connection_init).
const closeCodeRevoked = 4403

type socketEndKey struct{}

// socketEnd is the connection context of one websocket, once websocketInit made it.
type socketEnd struct {
	mu  sync.Mutex
	ctx context.Context
}

// withSocketEnd gives each websocket upgrade request a socketEnd.
func withSocketEnd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), socketEndKey{}, &socketEnd{})))
	})
}

// setSocketContext records ctx as the socket's connection context.
func setSocketContext(ctx context.Context) {
	if e, ok := ctx.Value(socketEndKey{}).(*socketEnd); ok {
		e.mu.Lock()
		e.ctx = ctx
		e.mu.Unlock()
	}
}

// closing returns the close code and reason owed to the client when the connection
// context ended because its identity may no longer authenticate.
func (e *socketEnd) closing() (int, string, bool) {
	e.mu.Lock()
	ctx := e.ctx
	e.mu.Unlock()
	if ctx == nil || ctx.Err() == nil {
		return 0, "", false
	}
	ae, ok := apperr.As(context.Cause(ctx))
	if !ok || ae.Code != apperr.Unauthenticated {
		return 0, "", false
	}
	return closeCodeRevoked, closeReason(ae.Message), true
}

// closeReason fits a message into a close frame (at most 123 bytes), cut on a character
// boundary.
func closeReason(msg string) string {
	const max = 123
	if len(msg) <= max {
		return msg
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// closeOn4403 is a websocket implementation whose connections close with 4403 when their
// identity may no longer authenticate.
type closeOn4403 struct {
	transport.WebsocketImplementation
}

func (i closeOn4403) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	conn, err := i.WebsocketImplementation.Accept(w, r, o)
	if err != nil {
		return nil, err
	}
	end, ok := r.Context().Value(socketEndKey{}).(*socketEnd)
	if !ok {
		return conn, nil
	}
	return &endingConn{WebsocketConn: conn, end: end}, nil
}

type endingConn struct {
	transport.WebsocketConn
	end *socketEnd
}

func (c *endingConn) WriteClose(code int, reason string) error {
	if cc, r, ok := c.end.closing(); ok {
		code, reason = cc, r
	}
	return c.WebsocketConn.WriteClose(code, reason)
}

// The transport asks for these optional interfaces by type assertion: pass them on.

func (c *endingConn) SetReadLimit(limit int64) {
	if l, ok := c.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

func (c *endingConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}
