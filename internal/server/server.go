// Package server assembles Apelora's HTTP server: GraphQL over HTTP POST and websocket at
// /graphql, GraphiQL served from the binary, health endpoints, and the middleware that
// gives each request an id, an identity and an access log line.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/internal/publicurl"
	"github.com/apelora/fabric/internal/server/graphqlws"
	"github.com/apelora/fabric/resolvers"
)

// Store is what the server itself needs from the database.
type Store interface {
	identity.Store
	identity.ConsoleSessionStore
	AuditRecorder
	Ping(ctx context.Context) error
}

// Config is everything the server is built from.
type Config struct {
	Log       *slog.Logger
	Store     Store
	Resolvers *resolvers.Resolver
	// MutationChecks are conditions every mutation needs besides manage-infrastructure.
	MutationChecks []MutationCheck
	// Scopes finds the clusters a call acts in, for an identity that may manage some
	// clusters only; nil: such an identity may change only what is about no cluster.
	Scopes Scopes
	// PingInterval is the websocket keep-alive period (graphql-transport-ws ping; a client
	// that answers no pong for two periods is disconnected). Zero means
	// graphqlws.DefaultPingInterval.
	PingInterval time.Duration
	// AllowedOrigins are extra browser origins (host patterns) allowed to open websockets;
	// the server's own origin always is.
	AllowedOrigins []string
	// PublicURL is the URL administrators and new servers reach Apelora at; empty means
	// "as the request addressed it".
	PublicURL string
	// ConsoleSessionTTL is how long a console session lasts; zero means DefaultConsoleSessionTTL.
	ConsoleSessionTTL time.Duration
	// SSO signs administrators in through the company's identity provider (OIDC); nil
	// when APELORA_OIDC_ISSUER is not set.
	SSO *identity.SSO
	// Sockets closes the websockets of identities revoked or expired while connected;
	// nil closes none.
	Sockets SocketRegistry
	// AuthFailureLimit limits requests without a valid identity per client address; zero
	// means DefaultAuthFailureLimit.
	AuthFailureLimit RateLimit
	// TrustedProxies are the proxies whose X-Forwarded-For names the client that the
	// per-address limits key on (APELORA_TRUSTED_PROXIES); none: the TCP peer is the client.
	TrustedProxies TrustedProxies
	// BodyReadTimeout bounds how long a request body may take to arrive; zero means
	// BodyReadTimeout.
	BodyReadTimeout time.Duration
	// Observer is told of every GraphQL operation, subscription and lost audit event
	// (metrics); nil: nobody.
	Observer Observer
	// AccessLogLevel is the level of the one log line per request (zero: INFO). A
	// terminal session (scripts/run.sh) sets DEBUG so requests do not bury what it prints.
	AccessLogLevel slog.Level
	// RequestTimeout is the bound on each upstream wait (APELORA_REQUEST_TIMEOUT), which the
	// console is told so that it waits for the server's answer; zero: the console's default.
	RequestTimeout time.Duration
	// StepConcurrency is how many machine steps (mutations that lock a machine) run at once;
	// more wait their turn. Zero means DefaultStepConcurrency.
	StepConcurrency int
	// IdentityLimits bound the websockets and subscriptions each identity holds open on
	// this server; a zero field means DefaultIdentityLimits'.
	IdentityLimits IdentityLimits
	// RefusalWindow is the window of the audit events of repeated refusals (rateLimited,
	// signInFailed, identityLimited: see refusalLog); zero means RateLimitWindow.
	RefusalWindow time.Duration
	// Stop ends the server's background work: the refusal log writes what it has counted
	// when it ends. Nil: never.
	Stop context.Context
	// AuditTrail is what /readyz asks of the audit log; nil: nothing.
	AuditTrail AuditTrail
}

// AuditTrail is what /readyz asks of the audit log: whether the next event can be appended
// (when not, every change is refused, so the replica is not ready) and what the latest
// check of the trail found (reported; the replica stays ready: see docs/security.md).
type AuditTrail interface {
	Appendable(ctx context.Context) error
	Status() auditlog.Status
}

// Handler returns the server's HTTP handler.
func Handler(cfg Config) http.Handler {
	schema := graph.NewExecutableSchema(graph.Config{Resolvers: cfg.Resolvers})
	g := &gate{audit: cfg.Store, checks: cfg.MutationChecks, log: cfg.Log, observer: cfg.Observer, steps: newStepSlots(cfg.StepConcurrency),
		schema: schema.Schema(), scopes: cfg.Scopes}
	g.refusals = newRefusalLog(cfg.Stop, cfg.RefusalWindow, g.recordRefusal)
	usage := newIdentityUsage(cfg.IdentityLimits, g.refusals)
	limiter := newAuthLimiter(cfg.AuthFailureLimit, cfg.TrustedProxies)

	gql := handler.New(schema)
	var obs *observed
	var subscribed func(context.Context, *graphql.OperationContext) func()
	if cfg.Observer != nil {
		obs = &observed{obs: cfg.Observer}
		subscribed = obs.subscribed // per subscriber: shared streams execute once for many
	}
	gql.AddTransport(graphqlws.New(graphqlws.Options{
		Init: websocketInit(cfg.Store, cfg.Sockets, func(ctx context.Context, err error) error { return g.refusedSocket(ctx, limiter, err) },
			usage.socket),
		PingInterval:      cfg.PingInterval,
		AllowedOrigins:    cfg.AllowedOrigins,
		Shared:            sharedStreams,
		Authorize:         mayReadAll,
		AdmitSubscription: usage.subscription,
		Subscribed:        subscribed,
		Log:               cfg.Log,
	}))
	gql.AddTransport(transport.POST{})
	gql.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	if obs != nil {
		gql.Use(obs) // first: outermost, so it sees every refusal
	}
	gql.Use(extension.Introspection{})
	gql.Use(subscriptionsOverPOST{})
	gql.Use(rootFieldLimit{max: MaxRootFields})
	gql.Use(depthLimit{max: maxDepth})
	gql.Use(extension.FixedComplexityLimit(maxComplexity))
	gql.AroundOperations(g.operations)
	gql.AroundRootFields(g.rootFields)
	gql.Use(mutationFields{g})   // gate.fields, on a mutation's fields only
	gql.Use(fleetRows{g.schema}) // a read's Fleet.machines, written in one pass
	gql.AroundResponses(g.responses)
	gql.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error { return presentError(ctx, cfg.Log, err) })
	gql.SetRecoverFunc(recoverPanic(cfg.Log))

	bodyTimeout := cfg.BodyReadTimeout
	if bodyTimeout == 0 {
		bodyTimeout = BodyReadTimeout
	}
	mux := routes(cfg, g, limiter, g.readRequest(bodyTimeout, gql))
	return withRequest(cfg.Log, cfg.AccessLogLevel, cfg.TrustedProxies, withPublicURL(cfg.PublicURL, mux))
}

func withPublicURL(configured string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(publicurl.With(r.Context(), publicurl.FromRequest(r, configured))))
	})
}

// websocketInit authenticates a websocket from its connection_init payload, or, when that
// carries no Authorization, by the console session cookie the upgrade request carried. A
// refused socket is closed with 4403, which graphql-ws clients treat as final instead of
// reconnecting forever. The connection context it returns ends when the identity is
// revoked or expires, or the console session expires or is signed out of, and the socket
// then closes with 4403 too (the transport's contract, see SocketRegistry).
//
// refused is told of every authentication failure; it may turn it into another error
// (RATE_LIMITED for an address out of tries). held counts the socket against its
// identity's limit for as long as the context it is given lasts, or refuses it
// (RATE_LIMITED, closed with 4429).
func websocketInit(store credentials, sockets SocketRegistry, refused func(context.Context, error) error,
	held func(context.Context, *identity.Identity) error) func(context.Context, graphqlws.InitPayload) (context.Context, error) {
	return func(ctx context.Context, p graphqlws.InitPayload) (context.Context, error) {
		var id *identity.Identity
		var console *identity.ConsoleSession
		var err error
		if p.Authorization() == "" && sessionFrom(ctx) != nil {
			id, console = identity.FromContext(ctx), sessionFrom(ctx)
			ctx = boundBySession(ctx)
		} else if stored, ok := ctx.Value(authErrKey{}).(error); ok && p.Authorization() == "" {
			err = refused(ctx, stored) // the upgrade's cookie (or header) was refused: say why
		} else if id, console, err = identity.AuthenticateHeader(ctx, store, p.Authorization()); err != nil {
			err = refused(ctx, err)
		} else if console != nil {
			ctx = context.WithValue(ctx, sessionKey{}, console)
			ctx = boundBySession(ctx)
		}
		if err == nil && !id.ReadScope().Any() {
			err = id.Require(identity.ViewInfrastructure)
		}
		if err == nil && held != nil {
			// Counted until the socket's context ends, which it does when the socket does.
			err = held(ctx, id)
		}
		if err == nil && sockets != nil {
			var watched context.Context
			if console != nil {
				// Signing out ends this socket too, on whichever replica holds it.
				watched, err = sockets.WatchConsoleSession(ctx, id, console.ID)
			} else {
				watched, err = sockets.Watch(ctx, id)
			}
			if err == nil {
				ctx = watched
			}
		}
		if err != nil {
			return ctx, err
		}
		if sockets != nil {
			// The registry's context carries the identity, re-authorised as it changes.
			return ctx, nil
		}
		return identity.WithIdentity(ctx, id), nil
	}
}

// sharedStreams are the subscriptions whose events are the same for every subscriber,
// with the arguments that only filter them: subscribers with the same query and
// variables share one execution (graphqlws.Options.Shared). Any other argument, such as
// the `after` of auditEventRecorded, fenceProgress and driftChanges (a replay from an
// event id), gives the subscriber its own.
var sharedStreams = map[string][]string{
	"admissionChecks":    {"name"},
	"auditEventRecorded": {"machine"},
	"fenceProgress":      {"member", "cluster"},
	"driftChanges":       {"machine"},
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve serves h on ln until ctx ends, then shuts down gracefully: it stops accepting,
// ends websocket streams, and waits up to grace for requests in flight.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, log *slog.Logger) error {
	// Websockets are hijacked connections that Shutdown does not wait for: the transport
	// closes them when streams is cancelled. Plain requests run to completion.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	base := graphqlws.WithShutdown(context.WithoutCancel(ctx), streams)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HeaderReadTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", grace.String())
	endStreams()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
