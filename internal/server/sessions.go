package server

import (
	"context"

	"github.com/apelora/fabric/domain/identity"
)

// SocketRegistry ends a websocket's connection context when its identity is revoked,
// deleted or expires, or the console session it authenticated with ends
// (identity.SocketRegistry), with an UNAUTHENTICATED *apperr.Error as the cause.
//
// The contract with the websocket transport (internal/server/graphqlws): websocketInit derives each
// socket's connection context; when that context ends with an UNAUTHENTICATED (or
// FORBIDDEN) *apperr.Error as its cause, the socket closes with 4403 and the error's
// message as the reason. graphql-ws clients treat 4403 as final, so they stop instead of
// reconnecting with a dead token.
type SocketRegistry interface {
	Watch(ctx context.Context, id *identity.Identity) (context.Context, error)
	WatchConsoleSession(ctx context.Context, id *identity.Identity, session int64) (context.Context, error)
}
