package server

import (
	"context"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/flight"
	"github.com/apelora/fabric/internal/server/graphqlws"
)

// sharedReads runs identical queries that arrive while one is in flight once: the same
// identity, query text, operation name and variables share the first one's execution and
// its answer, so fifty dashboards polling `fleet` cost one execution (and one read of each
// source), not fifty. Every answer is as fresh as the execution it shared, which began
// before it arrived and at most one execution ago; nothing is kept once it ends. A
// mutation on this replica forgets what is in flight, so a read after one's answer never
// shares an execution that began before it.
type sharedReads struct {
	group flight.Group[*graphql.Response]
}

// share answers the query in ctx through the execution in flight for the same key, or
// starts one with next.
func (s *sharedReads) share(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	key, ok := readKey(ctx)
	if !ok {
		return next(ctx)
	}
	// The rest of the operation chain runs now, as for any query (it only prepares the
	// execution): the context the transport then answers with is the innermost one, with
	// every interceptor's values. Only the execution itself is shared.
	h := next(ctx)
	answered := false
	return func(ctx context.Context) *graphql.Response {
		if answered {
			return nil // a query has one answer; a websocket transport asks until nil
		}
		answered = true
		resp, err := s.group.Do(ctx, key, func(ctx context.Context) (*graphql.Response, error) {
			return h(ctx), nil
		})
		if err != nil { // this caller went away while it waited
			return graphql.ErrorResponse(ctx, "the request ended before its answer: %v", err)
		}
		return resp
	}
}

// forget is told of every mutation that ran.
func (s *sharedReads) forget() { s.group.Forget() }

// readKey is what makes two queries' answers the same: who asks (answers depend on the
// caller's permissions and name), and the operation with its variables.
func readKey(ctx context.Context) (string, bool) {
	id := identity.FromContext(ctx)
	if id == nil || !graphql.HasOperationContext(ctx) {
		return "", false
	}
	op, ok := graphqlws.OperationKey(graphql.GetOperationContext(ctx))
	if !ok {
		return "", false
	}
	return strconv.FormatInt(id.ID, 10) + ":" + op, true
}
