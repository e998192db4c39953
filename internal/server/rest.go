package server

import (
	"log/slog"
	"net/http"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/resterr"
)

// permitted refuses a REST request unless its identity holds p, with the same rules and
// messages as GraphQL.
func permitted(p identity.Permission, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := requirePermission(r.Context(), p); err != nil {
			resterr.Write(w, r, log, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseREST answers a rate-limited REST request in the REST error shape.
func refuseREST(log *slog.Logger) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, msg string) {
		resterr.Write(w, r, log, apperr.New(apperr.RateLimited, "%s", msg))
	}
}
