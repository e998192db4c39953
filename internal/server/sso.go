package server

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/resterr"
)

// SSOStateCookie keeps a sign-in's state in the browser between the console and the
// identity provider's callback. It is SameSite=Lax, not Strict: the callback is a
// navigation from the provider's site, and a Strict cookie would not come back with it.
// It carries nothing that authenticates: only the state, which must match the callback's.
const SSOStateCookie = "apelora_sso_state"

// SSO paths: the console asks ssoStartPath where to send the browser; the provider sends
// it back to SSOCallbackPath, which must be registered at the provider as
// APELORA_PUBLIC_URL + SSOCallbackPath.
const (
	ssoStartPath    = "/api/v1/session/sso"
	SSOCallbackPath = "/api/v1/session/sso/callback"
)

// ssoStart answers where the browser goes to sign in at the identity provider, and keeps
// the sign-in's state in a cookie. A POST with a JSON body from the console's own origin
// (sameOrigin), so another site cannot start sign-ins in an administrator's browser. Each
// start spends one of the address's sign-in tries (429 once it has none).
func (a *sessionAPI) ssoStart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if a.sso == nil {
		resterr.Write(w, r, a.log, apperr.New(apperr.NotFound, "single sign-on is not configured on this server: sign in with a bearer token, or set APELORA_OIDC_ISSUER (see `apelora env`)"))
		return
	}
	if err := sameOrigin(r, a.origins); err != nil {
		resterr.Write(w, r, a.log, err)
		return
	}
	if a.limitStart(w, r) {
		return
	}
	url, state, err := a.sso.Begin(r.Context())
	if err != nil {
		resterr.Write(w, r, a.log, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SSOStateCookie, Value: state, Path: SSOCallbackPath, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: a.secure || r.TLS != nil, MaxAge: int(identity.SSOSignInTTL.Seconds())})
	writeJSON(w, http.StatusOK, map[string]string{"url": url})
}

// ssoCallback completes a sign-in: the provider's answer becomes the same console session
// as a bearer token's (the provider's tokens stay on the server and are dropped), and the
// browser goes to the console. A refusal is a page that says why and what to do; it spends
// one of the address's sign-in tries and is audited as signInFailed, like a wrong token.
func (a *sessionAPI) ssoCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: SSOStateCookie, Path: SSOCallbackPath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: a.secure || r.TLS != nil})
	if a.sso == nil {
		a.ssoPage(w, http.StatusNotFound, "Single sign-on is not configured on this server", "Sign in with a bearer token.")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// The provider refused (the user cancelled, or the client is not allowed).
		a.ssoRefused(w, r, apperr.New(apperr.Unauthenticated, "the identity provider refused the sign-in (%s): start again, or ask its administrator", truncate(e+" "+q.Get("error_description"), 160)))
		return
	}
	browserState := ""
	if c, err := r.Cookie(SSOStateCookie); err == nil {
		browserState = c.Value
	}
	act := &audit.Action{Actor: audit.Anonymous, Name: identity.ActionSignIn, RequestID: logging.RequestID(r.Context())}
	ctx := audit.WithAction(r.Context(), act)
	id, sess, value, err := a.sso.Finish(ctx, q.Get("state"), browserState, q.Get("code"), a.ttl)
	if err != nil {
		a.ssoRefused(w, r, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.identity = id
	}
	a.log.InfoContext(r.Context(), "console session started (single sign-on)", "identity", id.Name, "subject", id.SSO.Subject, "session", sess.ID, "expires_at", sess.ExpiresAt)
	http.SetCookie(w, a.cookie(r, value, sess.ExpiresAt))
	// A page, not a redirect: this response comes from a navigation the provider's site
	// started, and the browser would not send the SameSite=Strict session with a redirect
	// in that chain; the page's own navigation to the console is same-site.
	a.ssoPage(w, http.StatusOK, "Signed in as "+id.Name, "Opening Fabric Console…", "/")
}

// ssoRefused answers a refused callback: the refusal's page, or 429 once the address is
// out of tries. UNAVAILABLE (the provider is down) spends no try: it is nobody's fault.
func (a *sessionAPI) ssoRefused(w http.ResponseWriter, r *http.Request, err error) {
	a.log.InfoContext(r.Context(), "single sign-on refused", "error", err)
	status := resterr.Status(err)
	if c := apperr.CodeOf(err); c == apperr.Unauthenticated || c == apperr.Forbidden {
		if msg, retry, limited := a.refused(r, err); limited {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
			a.ssoPage(w, http.StatusTooManyRequests, "Too many failed sign-ins", msg)
			return
		}
	}
	title := "Sign-in refused"
	switch apperr.CodeOf(err) {
	case apperr.Forbidden:
		title = "No access to Apelora"
	case apperr.Unavailable:
		title = "The identity provider does not answer"
	}
	a.ssoPage(w, status, title, apperr.PublicMessage(err))
}

var ssoPageTemplate = template.Must(template.New("sso").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · Apelora fabric</title>
{{if .Next}}<meta http-equiv="refresh" content="0;url={{.Next}}">{{end}}</head>
<body><main><h1>{{.Title}}</h1><p id="sso-message">{{.Message}}</p>
<p><a href="{{if .Next}}{{.Next}}{{else}}/{{end}}">{{if .Next}}Continue to Fabric Console{{else}}Back to the sign-in page{{end}}</a></p></main></body></html>
`))

// ssoPage writes the callback's page: no script, so the console's self-only CSP is kept.
func (a *sessionAPI) ssoPage(w http.ResponseWriter, status int, title, message string, next ...string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	data := struct{ Title, Message, Next string }{Title: title, Message: message}
	if len(next) > 0 {
		data.Next = next[0]
	}
	_ = ssoPageTemplate.Execute(w, data)
}

// ssoEnabled is what the sign-in page needs to know to offer Sign in with SSO.
func (a *sessionAPI) ssoEnabled() bool { return a.sso != nil }

// ssoPath is what the console's sign-in page asks to start single sign-on, or "".
func ssoPath(sso *identity.SSO) string {
	if sso == nil {
		return ""
	}
	return ssoStartPath
}

// Device sign-in (`apeloractl login`): the command line asks deviceStartPath for a code to
// show the user, then deviceTokenPath, again and again, for its session token.
const (
	deviceStartPath = "/api/v1/session/device"
	deviceTokenPath = "/api/v1/session/device/token"
	// devicePollWait is how long one deviceTokenPath request waits for the user's approval
	// before it answers "pending".
	devicePollWait = 20 * time.Second
)

func (a *sessionAPI) ssoOff(w http.ResponseWriter, r *http.Request) bool {
	if a.sso != nil {
		return false
	}
	resterr.Write(w, r, a.log, apperr.New(apperr.NotFound, "single sign-on is not configured on this server: use a bearer token (APELORA_TOKEN), or set APELORA_OIDC_ISSUER on the server (see `apelora env`)"))
	return true
}

// deviceStart answers the code the user approves at the identity provider. Each start
// spends one of the address's sign-in tries, as an SSO start does.
func (a *sessionAPI) deviceStart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if a.ssoOff(w, r) || a.limitStart(w, r) {
		return
	}
	d, err := a.sso.BeginDevice(r.Context())
	if err != nil {
		resterr.Write(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deviceCode": d.DeviceCode, "userCode": d.UserCode,
		"verificationUri": d.VerificationURI, "verificationUriComplete": d.VerificationURIComplete,
		"expiresAt": d.Expiry.UTC(), "interval": int(d.Interval.Seconds())})
}

// deviceToken waits a while for the user's approval: 202 while pending, then 201 with the
// session token (an Apelora session, never the provider's tokens). Refusals spend the
// address's sign-in tries and are audited as signInFailed, like the console's.
func (a *sessionAPI) deviceToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if a.ssoOff(w, r) {
		return
	}
	var body struct {
		DeviceCode string `json:"deviceCode"`
		Interval   int    `json:"interval"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 8192)).Decode(&body); err != nil {
		resterr.Write(w, r, a.log, apperr.Invalid("deviceCode", "send {\"deviceCode\": \"…\", \"interval\": 5} as JSON"))
		return
	}
	act := &audit.Action{Actor: audit.Anonymous, Name: identity.ActionSignIn, RequestID: logging.RequestID(r.Context())}
	ctx, cancel := context.WithTimeout(audit.WithAction(r.Context(), act), devicePollWait)
	defer cancel()
	id, sess, value, pending, err := a.sso.FinishDevice(ctx, body.DeviceCode, time.Duration(body.Interval)*time.Second, a.ttl)
	switch {
	case err != nil:
		a.log.InfoContext(r.Context(), "device sign-in refused", "error", err)
		if c := apperr.CodeOf(err); c == apperr.Unauthenticated || c == apperr.Forbidden {
			a.fail(w, r, err)
			return
		}
		resterr.Write(w, r, a.log, err)
	case pending:
		writeJSON(w, http.StatusAccepted, map[string]any{"pending": true})
	default:
		if rec, ok := w.(*recorder); ok {
			rec.identity = id
		}
		a.log.InfoContext(r.Context(), "command-line session started (single sign-on)", "identity", id.Name, "subject", id.SSO.Subject, "session", sess.ID, "expires_at", sess.ExpiresAt)
		writeJSON(w, http.StatusCreated, map[string]any{"token": value, "identity": id.Name, "expiresAt": sess.ExpiresAt.UTC()})
	}
}
