package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/logging"
)

// presentError turns an error into a GraphQL error with a stable code. Internal errors
// are logged with the request id and never shown.
func presentError(ctx context.Context, log *slog.Logger, err error) *gqlerror.Error {
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) && gqlErr.Err == nil {
		// Parsing and validation errors from gqlgen itself: already meant for clients.
		return gqlErr
	}
	out := graphql.DefaultErrorPresenter(ctx, err)
	if out.Extensions == nil {
		out.Extensions = map[string]any{}
	}
	e, ok := apperr.As(err)
	if !ok || e.Code == apperr.Internal {
		log.ErrorContext(ctx, "internal error", "error", err, "path", out.Path.String())
		out.Message = fmt.Sprintf("internal error: the server log has the details under request id %s", logging.RequestID(ctx))
		out.Extensions["code"] = string(apperr.Internal)
		return out
	}
	out.Message = e.Message
	out.Extensions["code"] = string(e.Code)
	if e.Field != "" {
		out.Extensions["field"] = e.Field
	}
	if len(e.Details) > 0 {
		out.Extensions["details"] = e.Details
	}
	if e.Code == apperr.Unavailable && e.Cause != nil {
		log.WarnContext(ctx, "dependency unavailable", "error", err)
	}
	return out
}

func recoverPanic(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in resolver", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return apperr.New(apperr.Internal, "internal error")
	}
}
