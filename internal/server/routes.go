package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/scripts"
	"github.com/apelora/fabric/web/console"
	"github.com/apelora/fabric/web/graphiql"
)

// routes is every route the server answers, in one place. graphql is the GraphQL handler
// with its request reading; the guards around each route are written here.
func routes(cfg Config, g *gate, limiter *authLimiter, graphql http.Handler) *http.ServeMux {
	mux := http.NewServeMux()

	// The API: GraphQL over POST and websocket, and one REST read for scripts.
	mux.Handle("/graphql", withIdentity(cfg.Store, cfg.AllowedOrigins, g.guard(limiter, true, refuseGraphQL, graphql)))
	mux.Handle("GET /api/v1/provisioners/maas/machines", withIdentity(cfg.Store, cfg.AllowedOrigins, g.guard(limiter, false, refuseREST(cfg.Log),
		permitted(identity.ViewInfrastructure, cfg.Log, cfg.Resolvers.MAASMachinesHandler()))))

	// Fabric Console at / (every path no other route takes), its session, and GraphiQL.
	mux.Handle("/", console.Handler(console.Options{Endpoint: "/graphql", Session: "/api/v1/session", SSO: ssoPath(cfg.SSO), RequestTimeout: cfg.RequestTimeout}))
	sessions := &sessionAPI{store: cfg.Store, sso: cfg.SSO, ttl: consoleSessionTTL(cfg.ConsoleSessionTTL), origins: cfg.AllowedOrigins, log: cfg.Log,
		secure: strings.HasPrefix(cfg.PublicURL, "https:"),
		refused: func(r *http.Request, why error) (string, time.Duration, bool) {
			return g.signInRefused(r.Context(), limiter, limiter.proxies.clientAddress(r), why)
		},
		starting: func(r *http.Request) (string, time.Duration, bool) {
			return g.spendTry(r.Context(), limiter, limiter.proxies.clientAddress(r))
		}}
	mux.HandleFunc("POST /api/v1/session", sessions.signIn)
	mux.HandleFunc("GET /api/v1/session", sessions.current)
	mux.HandleFunc("DELETE /api/v1/session", sessions.signOut)
	mux.HandleFunc("POST "+ssoStartPath, sessions.ssoStart)
	mux.HandleFunc("GET "+SSOCallbackPath, sessions.ssoCallback)
	mux.HandleFunc("POST "+deviceStartPath, sessions.deviceStart)
	mux.HandleFunc("POST "+deviceTokenPath, sessions.deviceToken)
	mux.Handle("/graphiql/", http.StripPrefix("/graphiql", graphiql.Handler(graphiql.Options{Endpoint: "/graphql", Title: "Apelora fabric"})))

	// What new servers fetch: enrol-member.sh holds no secret.
	mux.HandleFunc("GET /enrol/enrol-member.sh", serveEnrolScript)

	// Health, for load balancers and run.sh.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := cfg.Store.Ping(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": apperr.PublicMessage(err)})
			return
		}
		body := map[string]string{"status": "ready", "database": "ok"}
		if cfg.AuditTrail != nil {
			body["auditTrail"] = describeTrail(cfg.AuditTrail.Status())
			if err := cfg.AuditTrail.Appendable(r.Context()); err != nil {
				body["status"], body["audit"] = "unavailable", apperr.PublicMessage(err)
				writeJSON(w, http.StatusServiceUnavailable, body)
				return
			}
			body["audit"] = "ok"
		}
		writeJSON(w, http.StatusOK, body)
	})
	return mux
}

// describeTrail is the audit trail's latest check as /readyz states it. /readyz answers
// anyone, so it names the kind of problem only: the API's auditTrail (view-infrastructure)
// and the server log say what it is.
func describeTrail(st auditlog.Status) string {
	switch {
	case st.CheckedAt.IsZero():
		return "not checked yet"
	case st.Verified:
		return "verifies (checked at " + st.CheckedAt.UTC().Format(time.RFC3339) + ")"
	}
	return "does not verify since " + st.Since.UTC().Format(time.RFC3339) + " (" + st.Kind + "): the console, the API's auditTrail and the server log say what; run `apelora audit verify` on a server"
}

// serveEnrolScript serves enrol-member.sh, which new servers fetch.
func serveEnrolScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="enrol-member.sh"`)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(scripts.EnrolMember)
}
