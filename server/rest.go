package server

import (
	"log/slog"
	"net/http"

	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/internal/resterr"
)

// RequirePermission authenticates a REST request (bearer token or console session) and refuses it unless the
// identity holds p, with the same rules and messages as GraphQL.
func RequirePermission(store credentials, origins []string, p identity.Permission, log *slog.Logger, next http.Handler) http.Handler {
	return withIdentity(store, origins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := requirePermission(r.Context(), p); err != nil {
			resterr.Write(w, r, log, err)
			return
		}
		next.ServeHTTP(w, r)
	}))
}
