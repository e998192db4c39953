package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
)

// IdentityLimits bound what one identity holds open on one server: websockets and
// subscriptions (each subscriber counts, on any of its sockets; queries and mutations over
// a socket do not). One socket runs at most 100 operations whatever these say.
type IdentityLimits struct {
	Sockets, Subscriptions int
}

// DefaultIdentityLimits are sized for the two kinds of callers there are. A dashboard
// (Fabric Console) opens one socket per browser tab and holds up to about six
// subscriptions on it (the machine page: the fleet, admission checks, the audit, drift, a
// member operation): 32 sockets are 32 tabs, or a few administrators sharing a service
// identity's dashboards. A service identity (a monitoring agent, a script) may watch one
// stream per machine of a few hundred (admissionChecks or driftChanges by name) across a
// few sockets: 512 subscriptions. At that, a leaked view-only token holds 32 file
// descriptors and about 20 MB (about 40 KiB per subscription that runs on its own,
// measured), where one held 14,000 subscriptions (575 MB, 14,030 descriptors) before.
var DefaultIdentityLimits = IdentityLimits{Sockets: 32, Subscriptions: 512}

// The environment variables that set IdentityLimits (app reads them; messages name them).
const (
	EnvSocketsPerIdentity       = "APELORA_WS_SOCKETS_PER_IDENTITY"
	EnvSubscriptionsPerIdentity = "APELORA_WS_SUBSCRIPTIONS_PER_IDENTITY"
)

// identityUsage counts what each identity holds open on this server.
type identityUsage struct {
	limits   IdentityLimits
	refusals *refusalLog

	mu   sync.Mutex
	held map[int64]*held
}

type held struct{ sockets, subscriptions int }

func newIdentityUsage(limits IdentityLimits, refusals *refusalLog) *identityUsage {
	if limits.Sockets <= 0 {
		limits.Sockets = DefaultIdentityLimits.Sockets
	}
	if limits.Subscriptions <= 0 {
		limits.Subscriptions = DefaultIdentityLimits.Subscriptions
	}
	return &identityUsage{limits: limits, refusals: refusals, held: map[int64]*held{}}
}

// take counts one more socket (or subscription) of id, unless it holds the most it may:
// then ok is false, and the refusal is counted for the audit trail (identityLimited).
func (u *identityUsage) take(ctx context.Context, id *identity.Identity, subscription bool, message string) (release func(), ok bool) {
	limit, name := u.limits.Sockets, "websockets"
	if subscription {
		limit, name = u.limits.Subscriptions, "subscriptions"
	}
	u.mu.Lock()
	h := u.held[id.ID]
	if h == nil {
		h = &held{}
		u.held[id.ID] = h
	}
	n := &h.sockets
	if subscription {
		n = &h.subscriptions
	}
	if *n >= limit {
		u.mu.Unlock()
		u.refusals.note(ctx, identityLimitRefusals, id.Name+"/"+name, id.Name, message, map[string]any{"limit": name, "max": limit})
		return nil, false
	}
	*n++
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			*n--
			if h.sockets == 0 && h.subscriptions == 0 && u.held[id.ID] == h {
				delete(u.held, id.ID)
			}
		})
	}, true
}

// socket counts a websocket of id for as long as ctx (the socket's) lasts, or answers
// RATE_LIMITED, which closes the socket with 4429 and this message (a close frame's
// reason holds 123 bytes: the essentials).
func (u *identityUsage) socket(ctx context.Context, id *identity.Identity) error {
	msg := fmt.Sprintf("RATE_LIMITED: this identity holds %d websockets here, the most it may (%s): close one", u.limits.Sockets, EnvSocketsPerIdentity)
	release, ok := u.take(ctx, id, false, msg)
	if !ok {
		return apperr.New(apperr.RateLimited, "%s", msg)
	}
	context.AfterFunc(ctx, release)
	return nil
}

// subscription counts a subscription on a socket of the identity in ctx until release, or
// refuses it with a RATE_LIMITED error for that subscription alone (graphqlws
// Options.AdmitSubscription).
func (u *identityUsage) subscription(ctx context.Context) (release func(), refusal *gqlerror.Error) {
	id := identity.FromContext(ctx)
	if id == nil {
		return func() {}, nil // the gate refuses it
	}
	msg := fmt.Sprintf("identity %s holds %d subscriptions on this server, the most it may (%s): complete some before starting more",
		apperr.Quote(id.Name), u.limits.Subscriptions, EnvSubscriptionsPerIdentity)
	release, ok := u.take(ctx, id, true, msg)
	if !ok {
		return nil, &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(apperr.RateLimited), "limit": u.limits.Subscriptions}}
	}
	return release, nil
}
