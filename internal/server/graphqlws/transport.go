// Package graphqlws serves GraphQL over websockets for gqlgen with the graphql-transport-ws
// protocol (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), built to hold
// many idle subscribers cheaply and to push each event to all of them quickly.
//
// How:
//   - One goroutine per socket, which reads; the HTTP handler hands the socket to it and
//     returns. Writes go through a short per-socket queue drained by a goroutine that
//     exists only while there is something to write. Keep-alive pings and the init
//     timeout are a timer, not goroutines.
//   - Subscriptions to a shared stream (Options.Shared) with the same query, operation name
//     and variables run one gqlgen execution for all their subscribers: each event is
//     resolved and JSON-encoded once, and every subscriber's `next` message is written from
//     that one payload with only its own id around it.
//   - A socket that falls behind (its queue full) is closed with 1013, not waited for; the
//     others go on.
//
// Sharing is only correct for streams that do not depend on who subscribed or when: the
// shared execution runs with the context of the subscriber that started it, and a
// subscriber that joins later gets the events from then on. Options.Shared names those
// fields and the arguments that only filter them; a subscription that gives any other
// argument (a replay point such as fenceProgress's `after`) runs on its own. Each
// subscriber is authorised on its own socket (Options.Authorize) before it joins.
//
// Chosen on measurements with cmd/apelora-bench (2 cores shared by bench and server;
// subscribers on admissionChecks; RSS and live heap per idle subscriber, verdict delivery
// p99, server CPU per admission report):
//
//	                                            1,000 subscribers           10,000 subscribers
//	gqlgen transport.Websocket, coder (before)  93 KiB (30)  173 ms  138 ms  94 KiB (31)  1841 ms  2248 ms
//	this, no sharing                            41 KiB (13)  333 ms  186 ms  40 KiB (14)  2336 ms  2114 ms
//	this, reading on the HTTP handler           57 KiB (21)   26 ms   24 ms  47 KiB (18)  1269 ms   549 ms
//	this, on coder/websocket                    44 KiB (16)   36 ms   38 ms  41 KiB (16)  1925 ms   701 ms
//	this, on gorilla (chosen)                   20 KiB  (7)   30 ms   26 ms  19 KiB  (6)   538 ms   200 ms
//
// Sharing is what cuts the CPU and the delivery times; handing the socket off the HTTP
// handler and gorilla's small read buffer and pooled write buffers are what cut the
// memory (net/http keeps the request, its two 4 KiB buffers and the handler's stack while
// the handler runs; coder keeps both buffers for the socket's life). At 10,000 the rest is
// a write system call per subscriber and event, on the same two cores as the bench's
// reads.
package graphqlws

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Subprotocol is the only websocket subprotocol served.
const Subprotocol = "graphql-transport-ws"

// MaxMessageBytes is the largest message a client may send; a larger one closes the
// socket with 1009 (Message Too Big).
const MaxMessageBytes = readLimit

// Limits of one socket.
const (
	// readLimit is the largest message a client may send.
	readLimit = 1 << 20
	// maxQueued is how many messages may wait to be written to a socket before it counts
	// as fallen behind and is closed.
	maxQueued = 128
	// maxOperations is how many operations one socket may have running at once.
	maxOperations = 100
	// writeTimeout bounds one write; a socket that takes longer is closed.
	writeTimeout = 10 * time.Second
	// closeWait is how long a closing socket waits for the client's close frame.
	closeWait = 2 * time.Second
)

// Options configure a Transport.
type Options struct {
	// Init authenticates a socket from its connection_init payload and returns the
	// socket's context, from which every operation's context derives. An error closes the
	// socket with 4403. When the returned context ends with a cause that is an
	// *apperr.Error coded UNAUTHENTICATED or FORBIDDEN (an identity revoked or expired),
	// the socket is closed with 4403 and the error's message as the reason.
	Init func(ctx context.Context, payload InitPayload) (context.Context, error)
	// InitTimeout is how long a socket may take to send connection_init (4408 after). Zero
	// means 10 s.
	InitTimeout time.Duration
	// PingInterval is how often the server pings; a client that answers none of the pings
	// of two periods is disconnected. Zero means DefaultPingInterval.
	PingInterval time.Duration
	// AllowedOrigins are host patterns (path.Match, case-insensitive; with "://" they
	// match scheme://host) of browser origins allowed besides the server's own.
	AllowedOrigins []string
	// Shared maps the subscription fields whose events are the same for every subscriber
	// to the arguments that only filter them. See the package documentation.
	Shared map[string][]string
	// Authorize says whether the caller (an operation's context) may read; it is asked
	// for every subscriber of a shared stream. A subscriber it refuses runs its operation
	// on its own, where the operation's own checks answer. Nil disables sharing.
	Authorize func(ctx context.Context) error
	// AdmitSubscription, when set, is asked for each subscriber's subscription once its
	// operation is read, before it runs: a refusal ends that subscription alone with an
	// `error` message carrying the refusal; otherwise release is called once the
	// subscription is done. The server bounds the subscriptions of each identity with it.
	AdmitSubscription func(ctx context.Context) (release func(), refusal *gqlerror.Error)
	// Subscribed, when set, is told of each subscriber's subscription once its operation
	// is read (shared or not: one call per subscribe message), and the ended it returns
	// once that subscription is done (completed, stopped, failed, or its socket closed).
	// Metrics count open subscriptions with it.
	Subscribed func(ctx context.Context, rc *graphql.OperationContext) (ended func())
	// Log receives what the transport itself has to say.
	Log *slog.Logger
}

// InitPayload is the connection_init payload.
type InitPayload map[string]any

// Authorization returns the payload's Authorization (or authorization) string, which
// clients send in place of the HTTP header.
func (p InitPayload) Authorization() string {
	for _, k := range []string{"Authorization", "authorization"} {
		if s, ok := p[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

var writeBuffers sync.Pool

// Transport is a graphql.Transport for graphql-transport-ws.
type Transport struct {
	opts     Options
	upgrader websocket.Upgrader
	streams  streams
}

var _ graphql.Transport = (*Transport)(nil)

// DefaultPingInterval is the keep-alive period when Options.PingInterval is zero; it is
// also APELORA_WS_PING_INTERVAL's default (app.Variables), so there is one 25 s.
const DefaultPingInterval = 25 * time.Second

// New returns a transport with opts.
func New(opts Options) *Transport {
	if opts.InitTimeout == 0 {
		opts.InitTimeout = 10 * time.Second
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	t := &Transport{opts: opts}
	t.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		Subprotocols:     []string{Subprotocol},
		// Small reads (clients send short messages; longer ones are read past the
		// buffer), and write buffers shared by all sockets: a socket holds one only
		// while writing.
		ReadBufferSize:  512,
		WriteBufferSize: 4 << 10,
		WriteBufferPool: &writeBuffers,
		CheckOrigin:     t.originAllowed,
	}
	t.streams.groups = map[string]*group{}
	return t
}

// Supports is true for websocket upgrade requests.
func (t *Transport) Supports(r *http.Request) bool { return IsUpgrade(r) }

// IsUpgrade reports whether r asks for a websocket: what this transport takes.
func IsUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// Do upgrades the request and hands the socket to a goroutine of its own: the HTTP
// handler returns, so that net/http lets go of the request and its buffers, which an idle
// socket would otherwise keep (about 12 KiB each, and the handler's deep stack).
func (t *Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ws, err := t.upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader has answered (403 for a refused origin, 400 otherwise).
		t.opts.Log.InfoContext(r.Context(), "websocket refused", "error", err, "origin", r.Header.Get("Origin"))
		return
	}
	go newConn(t, exec, ws, r).serve()
}

type shutdownKey struct{}

// WithShutdown returns ctx carrying shutdown: sockets opened by requests under ctx (an
// http.Server's BaseContext) close with 1001 when shutdown ends. Sockets outlive their
// requests, so the request's own end cannot say so.
func WithShutdown(ctx, shutdown context.Context) context.Context {
	return context.WithValue(ctx, shutdownKey{}, shutdown)
}

// originAllowed is the browser origin check: no Origin (not a browser), the server's own
// origin, or one matching AllowedOrigins.
func (t *Transport) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, pattern := range t.opts.AllowedOrigins {
		target := u.Host
		if strings.Contains(pattern, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(target)); ok && err == nil {
			return true
		}
	}
	return false
}
