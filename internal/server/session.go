package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/resterr"
)

// SessionCookie holds a Fabric Console session value. It is HttpOnly and SameSite=Strict:
// the console's script never sees it and other sites' pages never send it.
const SessionCookie = "apelora_session"

// DefaultConsoleSessionTTL is how long a console session lasts when Config.ConsoleSessionTTL is zero.
const DefaultConsoleSessionTTL = 12 * time.Hour

// credentials is what authenticating a request needs: bearer tokens and console sessions.
type credentials = identity.Credentials

type sessionKey struct{}

// sessionFrom returns the console session a request authenticated with, or nil.
func sessionFrom(ctx context.Context) *identity.ConsoleSession {
	s, _ := ctx.Value(sessionKey{}).(*identity.ConsoleSession)
	return s
}

// fromSession authenticates a request by its session cookie, when it has one. A request
// that carries the cookie but may be forged by another site (see sameOrigin) goes on
// without an identity, so the gate refuses (and audits) what it tries.
func fromSession(ctx context.Context, store credentials, origins []string, r *http.Request) (context.Context, *identity.Identity) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return ctx, nil
	}
	if err := sameOrigin(r, origins); err != nil {
		return withAuthError(ctx, err), nil
	}
	id, sess, err := identity.AuthenticateConsoleSession(ctx, store, c.Value)
	if err != nil {
		return withAuthError(ctx, err), nil
	}
	return context.WithValue(identity.WithIdentity(ctx, id), sessionKey{}, sess), id
}

// sameOrigin refuses a cookie-carrying request a browser may have sent on another site's
// behalf: one that says it is cross-site (Sec-Fetch-Site), comes from another origin, or
// changes something without a JSON body (a form or text/plain POST needs no CORS
// preflight; JSON does, and Apelora answers none). Websocket upgrades are GETs whose
// Origin the websocket transport checks too.
func sameOrigin(r *http.Request, origins []string) error {
	refuse := func(why string) error {
		return apperr.New(apperr.Forbidden, "request refused: %s; the console's session cookie is only accepted from the console itself", why)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return refuse("the browser says it came from another site (Sec-Fetch-Site: " + truncate(site, 20) + ")")
	}
	if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, r.Host, origins) {
		return refuse("it came from another origin (" + truncate(o, 80) + ")")
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method != http.MethodDelete && (err != nil || mt != "application/json") {
		return refuse("send a JSON body (Content-Type: application/json)")
	}
	return nil
}

// originAllowed reports whether an Origin header names the server itself (the host the
// request was sent to) or one of the extra allowed origins (host patterns).
func originAllowed(origin, host string, patterns []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sessionAPI serves /api/v1/session: POST signs in (a bearer token in a JSON body, once,
// for a session cookie), GET says who the cookie's session is or why there is none, DELETE
// signs out (the session ends on the server, not only in the browser).
type sessionAPI struct {
	store   credentials
	ttl     time.Duration
	secure  bool // Secure cookie even when the request came in plain (TLS ends in front)
	origins []string
	log     *slog.Logger
	// sso signs in through the company's identity provider; nil when not configured.
	sso *identity.SSO
	// refused spends a try of the request's address for a failed sign-in (the same
	// per-address limit as /graphql) and says when the address is out of tries.
	refused func(r *http.Request, why error) (msg string, retry time.Duration, limited bool)
	// starting spends a try of the request's address for a sign-in started at the
	// identity provider (SSO, device flow): each keeps state here or at the provider, and
	// nobody has authenticated yet. It says when the address is out of tries.
	starting func(r *http.Request) (msg string, retry time.Duration, limited bool)
}

// limitStart spends a try of the address for a sign-in that starts, and answers 429
// RATE_LIMITED with Retry-After (true) once the address is out of them.
func (a *sessionAPI) limitStart(w http.ResponseWriter, r *http.Request) bool {
	msg, retry, limited := a.starting(r)
	if !limited {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	resterr.Write(w, r, a.log, apperr.New(apperr.RateLimited, "%s", msg))
	return true
}

// fail answers a sign-in (or a session cookie) that failed to authenticate: err, or 429
// RATE_LIMITED with Retry-After once the address is out of tries.
func (a *sessionAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	if msg, retry, limited := a.refused(r, err); limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		resterr.Write(w, r, a.log, apperr.New(apperr.RateLimited, "%s", msg))
		return
	}
	resterr.Write(w, r, a.log, err)
}

// sessionAnswer is what /api/v1/session says: who is signed in until when, or (GET
// without a cookie) that nobody is. Asking without a cookie is the sign-in page's first
// question, so it is answered 200 rather than 401: a browser logs every 4xx answer as an
// error in its console.
type sessionAnswer struct {
	SignedIn  bool       `json:"signedIn"`
	Identity  string     `json:"identity,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Message   string     `json:"message,omitempty"`
	// SSO says the sign-in page may offer Sign in with SSO (an issuer is configured).
	SSO bool `json:"sso,omitempty"`
}

func signedIn(name string, expires time.Time) sessionAnswer {
	t := expires.UTC()
	return sessionAnswer{SignedIn: true, Identity: name, ExpiresAt: &t}
}

func (a *sessionAPI) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := sameOrigin(r, a.origins); err != nil {
		resterr.Write(w, r, a.log, err)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		a.fail(w, r, apperr.Invalid("token", "send {\"token\": \"apl_…\"} as JSON, the bearer token of your identity"))
		return
	}
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body.Token), "Bearer "))
	id, sess, value, err := identity.StartConsoleSession(r.Context(), a.store, token, a.ttl)
	if err != nil {
		if apperr.CodeOf(err) == apperr.Unauthenticated {
			// A credential that does not authenticate is 401 (UNAUTHENTICATED), as on
			// /graphql; 400 stays for a body that is not {"token": …}.
			a.fail(w, r, &apperr.Error{Code: apperr.Unauthenticated, Field: "token",
				Message: "this token is not valid: paste the whole bearer token (apl_…) of your identity, or create one with `apelora identity create`"})
			return
		}
		resterr.Write(w, r, a.log, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.identity = id
	}
	a.log.InfoContext(r.Context(), "console session started", "identity", id.Name, "session", sess.ID, "expires_at", sess.ExpiresAt)
	http.SetCookie(w, a.cookie(r, value, sess.ExpiresAt))
	writeJSON(w, http.StatusCreated, signedIn(id.Name, sess.ExpiresAt))
}

func (a *sessionAPI) current(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, id := fromSession(r.Context(), a.store, a.origins, r)
	if id == nil {
		err := authError(ctx)
		if _, e := r.Cookie(SessionCookie); e != nil {
			// No credential was presented: not a failed authentication.
			msg := "not signed in: paste your bearer token to sign in"
			if a.ssoEnabled() {
				msg = "not signed in: sign in with SSO, or paste your bearer token"
			}
			writeJSON(w, http.StatusOK, sessionAnswer{Message: msg, SSO: a.ssoEnabled()})
			return
		}
		if apperr.CodeOf(err) == apperr.Unauthenticated {
			http.SetCookie(w, a.cookie(r, "", time.Time{}))
		}
		a.fail(w, r, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.identity = id
	}
	writeJSON(w, http.StatusOK, signedIn(id.Name, sessionFrom(ctx).ExpiresAt))
}

func (a *sessionAPI) signOut(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := sameOrigin(r, a.origins); err != nil {
		resterr.Write(w, r, a.log, err)
		return
	}
	value := ""
	if c, err := r.Cookie(SessionCookie); err == nil {
		value = c.Value
	} else if t, ok := identity.BearerToken(r.Header.Get("Authorization")); ok && identity.IsSessionValue(t) {
		value = t // `apeloractl logout`: the session `apeloractl login` kept
	}
	if value != "" {
		if err := a.store.EndConsoleSession(r.Context(), identity.HashToken(value)); err != nil {
			resterr.Write(w, r, a.log, err)
			return
		}
		a.log.InfoContext(r.Context(), "console session ended")
	}
	http.SetCookie(w, a.cookie(r, "", time.Time{}))
	w.WriteHeader(http.StatusNoContent)
}

// cookie is the session cookie carrying value until expires; an empty value deletes it.
func (a *sessionAPI) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   a.secure || r.TLS != nil,
	}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
		c.MaxAge = max(1, int(time.Until(expires).Seconds()))
	}
	return c
}

// consoleSessionTTL returns the configured console session lifetime or the default.
func consoleSessionTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultConsoleSessionTTL
	}
	return d
}

// boundBySession ends a websocket's context when the console session it authenticated
// with expires, so a socket never outlives its session.
func boundBySession(ctx context.Context) context.Context {
	s := sessionFrom(ctx)
	if s == nil {
		return ctx
	}
	// The cause makes the socket close with 4403 and this reason (see SocketRegistry).
	bounded, cancel := context.WithDeadlineCause(ctx, s.ExpiresAt, apperr.New(apperr.Unauthenticated,
		"your console session expired at %s: sign in again", s.ExpiresAt.UTC().Format(time.RFC3339)))
	context.AfterFunc(ctx, cancel) // the socket's own end releases the timer
	return bounded
}
