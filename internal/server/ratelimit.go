package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/server/graphqlws"
)

// RateLimit is a token bucket: Burst tries at once, then one more per Every.
type RateLimit struct {
	Burst int
	Every time.Duration
}

func (l RateLimit) String() string {
	return fmt.Sprintf("%d at once, then one per %s", l.Burst, l.Every)
}

// DefaultAuthFailureLimit is how often one client address may send requests without a
// valid identity (no bearer token, or a wrong one): ten at once, then ten a minute.
var DefaultAuthFailureLimit = RateLimit{Burst: 10, Every: 6 * time.Second}

const (
	// RateLimitWindow is the default window of the audit events of repeated refusals
	// (refusalLog): at most about one event per address (or identity) per window, counting
	// the refusals it stands for.
	RateLimitWindow = time.Minute
	// maxTrackedAddresses bounds the limiter's memory; past it, new addresses share one
	// bucket.
	maxTrackedAddresses = 10000
)

// authLimiter limits requests without a valid identity per client address (an IPv6
// client by its /64), before any GraphQL work. Requests with a valid identity are never
// limited, so an attacker sharing an administrator's address cannot lock them out.
type authLimiter struct {
	limit RateLimit
	now   func() time.Time
	// proxies say whose X-Forwarded-For names the client (none: the TCP peer is).
	proxies TrustedProxies

	mu      sync.Mutex
	clients map[string]*client
}

type client struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newAuthLimiter(limit RateLimit, proxies TrustedProxies) *authLimiter {
	if limit.Burst <= 0 || limit.Every <= 0 {
		limit = DefaultAuthFailureLimit
	}
	return &authLimiter{limit: limit, now: time.Now, proxies: proxies, clients: map[string]*client{}}
}

// take spends one try of addr. When none is left it returns how long until the next.
func (l *authLimiter) take(addr string) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c := l.client(addr, now)
	c.tokens = min(float64(l.limit.Burst), c.tokens+float64(now.Sub(c.at))/float64(l.limit.Every))
	c.at = now
	if c.tokens >= 1 {
		c.tokens--
		return true, 0
	}
	return false, time.Duration((1 - c.tokens) * float64(l.limit.Every))
}

func (l *authLimiter) client(addr string, now time.Time) *client {
	if c, ok := l.clients[addr]; ok {
		return c
	}
	if len(l.clients) >= maxTrackedAddresses {
		// A full bucket whose window has passed is the same as none: forget those.
		for a, c := range l.clients {
			if float64(now.Sub(c.at))/float64(l.limit.Every)+c.tokens >= float64(l.limit.Burst) {
				delete(l.clients, a)
			}
		}
		if len(l.clients) >= maxTrackedAddresses {
			addr = "(too many addresses)"
			if c, ok := l.clients[addr]; ok {
				return c
			}
		}
	}
	c := &client{tokens: float64(l.limit.Burst), at: now}
	l.clients[addr] = c
	return c
}

// guard answers 429 to a request without a valid identity from an address out of tries.
// With sockets, websocket upgrades pass with their client address: they authenticate in
// connection_init, where a failure spends a try (refusedSocket). Only a real upgrade
// (graphqlws.IsUpgrade) passes, so an Upgrade header on a POST spends a try as usual.
func (g *gate) guard(l *authLimiter, sockets bool, refuse func(w http.ResponseWriter, r *http.Request, msg string), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if identity.FromContext(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		addr := l.proxies.clientAddress(r)
		if sockets && graphqlws.IsUpgrade(r) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientAddressKey{}, addr)))
			return
		}
		if msg, retry, limited := g.spendTry(r.Context(), l, addr); limited {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
			refuse(w, r, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type clientAddressKey struct{}

// spendTry spends one of addr's tries at authenticating. Out of tries, it says why and
// counts the refusal for the audit trail (refusalLog: bounded per window, true counts).
func (g *gate) spendTry(ctx context.Context, l *authLimiter, addr string) (msg string, retry time.Duration, limited bool) {
	ok, retry := l.take(addr)
	if ok {
		return "", 0, false
	}
	msg = fmt.Sprintf("too many requests without a valid bearer token from %s (the limit is %s): wait %s, then send a valid one",
		addr, l.limit, retry.Round(time.Second))
	g.refusals.note(ctx, rateLimitedRefusals, addr, audit.Anonymous, msg, nil)
	return msg, retry, true
}

// refusedSocket spends a try of the socket's client address when its connection_init
// failed to authenticate, as a refused HTTP request does, and turns the refusal into
// RATE_LIMITED once the address is out of tries. A valid identity never spends one.
func (g *gate) refusedSocket(ctx context.Context, l *authLimiter, err error) error {
	addr, ok := ctx.Value(clientAddressKey{}).(string)
	if e, isApp := apperr.As(err); !ok || !isApp || e.Code != apperr.Unauthenticated {
		return err
	}
	if _, retry, limited := g.spendTry(ctx, l, addr); limited {
		// A close frame's reason holds 123 bytes: say the essentials.
		return apperr.New(apperr.RateLimited, "RATE_LIMITED: too many failed authentications; retry in %s with a valid token", retry.Round(time.Second))
	}
	return err
}

// signInRefused spends a try of the address of a console sign-in (or session cookie) that
// failed to authenticate, as a refused /graphql request does, and counts the failure for
// the audit trail (signInFailed, bounded per window with true counts). Out of tries, it
// answers the limit's message and how long to wait; the caller then answers 429 instead of
// the refusal.
func (g *gate) signInRefused(ctx context.Context, l *authLimiter, addr string, why error) (msg string, retry time.Duration, limited bool) {
	if msg, retry, limited = g.spendTry(ctx, l, addr); limited {
		return msg, retry, true
	}
	g.refusals.note(ctx, failedSignIns, addr, audit.Anonymous, apperr.PublicMessage(why), nil)
	return "", 0, false
}

// recordRefusal writes one event of the refusal log.
func (g *gate) recordRefusal(e refusalEvent) {
	a := &audit.Action{Actor: e.actor, Name: e.kind.action, RequestID: logging.RequestID(e.ctx)}
	for k, v := range e.details {
		a.Detail(k, v)
	}
	g.recordMessage(e.ctx, a, audit.Refused, e.message)
}

// refuseGraphQL answers a rate-limited GraphQL request.
func refuseGraphQL(w http.ResponseWriter, _ *http.Request, msg string) {
	writeError(w, http.StatusTooManyRequests, apperr.RateLimited, msg)
}
