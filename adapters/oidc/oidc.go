// Package oidc is the company's identity provider (OpenID Connect) in identity's words:
// the authorization code flow with PKCE through golang.org/x/oauth2, and ID tokens
// verified by github.com/coreos/go-oidc (issuer, audience, expiry, signature through the
// issuer's JWKS, refetched when a token names a key it does not know), never by hand.
package oidc

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
)

// Config is the identity provider and Apelora's client at it.
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string // "" for a public client (PKCE alone)
	// RedirectURL is Apelora's callback, as registered at the provider.
	RedirectURL string
	Scopes      []string // "openid" is always asked
	GroupsClaim string   // the ID token claim that lists the user's groups
	// HTTPClient talks to the provider; nil: one with Timeout.
	HTTPClient *http.Client
	Timeout    time.Duration
}

// Provider implements identity.SSOProvider. It discovers the issuer on first use (and
// again after a failure), so Apelora starts, and bearer tokens work, while the issuer is
// down.
type Provider struct {
	cfg    Config
	client *http.Client
	// now is the verifier's clock (nil: time.Now); tests set it to check expiry.
	now func() time.Time

	mu       sync.Mutex
	provider *gooidc.Provider
}

var _ identity.SSOProvider = (*Provider)(nil)

// New returns the provider; it does not call the issuer.
func New(cfg Config) *Provider {
	c := cfg.HTTPClient
	if c == nil {
		t := cfg.Timeout
		if t <= 0 {
			t = 10 * time.Second
		}
		c = &http.Client{Timeout: t}
	}
	return &Provider{cfg: cfg, client: c}
}

// WithClock returns a copy of p whose ID token checks read now (tests of expiry).
func (p *Provider) WithClock(now func() time.Time) *Provider {
	return &Provider{cfg: p.cfg, client: p.client, now: now}
}

func (p *Provider) down(err error) error {
	return apperr.Wrap(err, apperr.Unavailable, "the identity provider %s does not answer, so SSO sign-in is not possible now: try again later, or sign in with a bearer token (they keep working)", p.cfg.Issuer)
}

// discovered returns the issuer's discovery document, fetched once it answers.
func (p *Provider) discovered() (*gooidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return p.provider, nil
	}
	// The provider keeps this context to fetch keys later: it must not be a request's.
	pr, err := gooidc.NewProvider(gooidc.ClientContext(context.Background(), p.client), p.cfg.Issuer)
	if err != nil {
		return nil, p.down(err)
	}
	p.provider = pr
	return pr, nil
}

func (p *Provider) oauth(pr *gooidc.Provider) *oauth2.Config {
	scopes := []string{gooidc.ScopeOpenID}
	for _, s := range p.cfg.Scopes {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: pr.Endpoint(),
		RedirectURL: p.cfg.RedirectURL, Scopes: scopes}
}

// AuthCodeURL is the provider's authorization endpoint with state, nonce and the S256
// challenge of verifier.
func (p *Provider) AuthCodeURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	pr, err := p.discovered()
	if err != nil {
		return "", err
	}
	// The browser is about to be sent there: when the issuer went down since it was
	// discovered, say so on the sign-in page instead of sending it to an error page.
	if err := p.reachable(ctx); err != nil {
		return "", err
	}
	return p.oauth(pr).AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// reachable asks the issuer for its discovery document.
func (p *Provider) reachable(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.cfg.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return p.down(err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return p.down(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return p.down(fmt.Errorf("discovery answered %s", resp.Status))
	}
	return nil
}

// Exchange redeems the code with its verifier and verifies the ID token it brings; it
// returns the refresh token too (zero when the provider gave none).
func (p *Provider) Exchange(ctx context.Context, code, verifier, nonce string) (*identity.SSOClaims, identity.ProviderToken, error) {
	pr, err := p.discovered()
	if err != nil {
		return nil, identity.ProviderToken{}, err
	}
	tok, err := p.oauth(pr).Exchange(gooidc.ClientContext(ctx, p.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return nil, identity.ProviderToken{}, apperr.New(apperr.Unauthenticated, "the identity provider refused the authorization code (%s: already used, expired, or not issued for this sign-in): start again with Sign in with SSO",
				cut(re.ErrorCode+" "+re.ErrorDescription, 120))
		}
		return nil, identity.ProviderToken{}, p.down(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, identity.ProviderToken{}, apperr.New(apperr.Unauthenticated, "the identity provider answered no ID token: check that the client %q is allowed the openid scope", p.cfg.ClientID)
	}
	c, err := p.Verify(ctx, raw, nonce)
	if err != nil {
		return nil, identity.ProviderToken{}, err
	}
	return c, identity.NewProviderToken(tok.RefreshToken), nil
}

// Refresh asks the provider about a signed-in user again: a refresh token grant, whose
// new ID token is verified as at sign-in (issuer, audience, expiry, signature; there is no
// nonce to check), or, when the provider answers none, its userinfo for the new access
// token. A 4xx answer (invalid_grant: revoked, expired, the user disabled) is
// UNAUTHENTICATED; no answer, or a 5xx, UNAVAILABLE.
func (p *Provider) Refresh(ctx context.Context, t identity.ProviderToken) (*identity.SSOClaims, identity.ProviderToken, error) {
	pr, err := p.discovered()
	if err != nil {
		return nil, identity.ProviderToken{}, err
	}
	cctx := gooidc.ClientContext(ctx, p.client)
	// An expired access token makes the token source refresh at once.
	tok, err := p.oauth(pr).TokenSource(cctx, &oauth2.Token{RefreshToken: t.Reveal(), Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			// Only the provider's error code and description: never the token.
			return nil, identity.ProviderToken{}, apperr.New(apperr.Unauthenticated, "the identity provider refused the session's refresh token (%s)", cut(re.ErrorCode+" "+re.ErrorDescription, 120))
		}
		return nil, identity.ProviderToken{}, p.down(errors.New(redactToken(err.Error(), t.Reveal())))
	}
	next := identity.ProviderToken{}
	if tok.RefreshToken != "" && tok.RefreshToken != t.Reveal() {
		next = identity.NewProviderToken(tok.RefreshToken)
	}
	if raw, _ := tok.Extra("id_token").(string); raw != "" {
		c, err := p.verify(ctx, raw, "", false)
		return c, next, err
	}
	info, err := pr.UserInfo(cctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, identity.ProviderToken{}, p.down(err)
	}
	var claims map[string]any
	if err := info.Claims(&claims); err != nil {
		return nil, identity.ProviderToken{}, apperr.New(apperr.Unauthenticated, "the identity provider's userinfo cannot be read: %s", cut(err.Error(), 120))
	}
	c := &identity.SSOClaims{Issuer: p.cfg.Issuer, Subject: info.Subject, Groups: groups(claims[p.cfg.GroupsClaim])}
	c.Username = username(claims)
	return c, next, nil
}

// redactToken takes a token out of an error's text (a transport error may quote a
// request).
func redactToken(msg, token string) string {
	if token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, token, "[redacted]")
}

// DeviceAuth starts the device authorization grant (RFC 8628) for a command line.
func (p *Provider) DeviceAuth(ctx context.Context) (*identity.DeviceSignIn, error) {
	pr, err := p.discovered()
	if err != nil {
		return nil, err
	}
	cfg := p.oauth(pr)
	if cfg.Endpoint.DeviceAuthURL == "" {
		return nil, apperr.New(apperr.FailedPrecondition, "the identity provider %s offers no device authorization grant, so `apeloractl login` cannot sign in through it: use a bearer token (APELORA_TOKEN)", p.cfg.Issuer)
	}
	da, err := cfg.DeviceAuth(gooidc.ClientContext(ctx, p.client))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return nil, apperr.New(apperr.FailedPrecondition, "the identity provider refused the device sign-in (%s): check that client %q may use the device authorization grant", cut(re.ErrorCode+" "+re.ErrorDescription, 120), p.cfg.ClientID)
		}
		return nil, p.down(err)
	}
	return &identity.DeviceSignIn{DeviceCode: da.DeviceCode, UserCode: da.UserCode, VerificationURI: da.VerificationURI,
		VerificationURIComplete: da.VerificationURIComplete, Expiry: da.Expiry, Interval: time.Duration(da.Interval) * time.Second}, nil
}

// DeviceToken asks for the device sign-in's tokens until ctx ends (then pending is true:
// the user has not approved it yet) and verifies the ID token they bring; it returns the
// refresh token too (zero when the provider gave none).
func (p *Provider) DeviceToken(ctx context.Context, deviceCode string, interval time.Duration) (c *identity.SSOClaims, refresh identity.ProviderToken, pending bool, err error) {
	pr, err := p.discovered()
	if err != nil {
		return nil, refresh, false, err
	}
	tok, err := p.oauth(pr).DeviceAccessToken(gooidc.ClientContext(ctx, p.client),
		&oauth2.DeviceAuthResponse{DeviceCode: deviceCode, Interval: int64(max(interval, time.Second) / time.Second)})
	if err != nil {
		var re *oauth2.RetrieveError
		switch {
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
			return nil, refresh, true, nil
		case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500:
			return nil, refresh, false, apperr.New(apperr.Unauthenticated, "the identity provider refused the device sign-in (%s: denied, expired or already used): run `apeloractl login` again",
				cut(re.ErrorCode+" "+re.ErrorDescription, 120))
		}
		return nil, refresh, false, p.down(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, refresh, false, apperr.New(apperr.Unauthenticated, "the identity provider answered no ID token: check that the client %q is allowed the openid scope", p.cfg.ClientID)
	}
	// No nonce in this grant: the device code, redeemed once by this server, binds the token.
	if c, err = p.verify(ctx, raw, "", false); err != nil {
		return nil, refresh, false, err
	}
	return c, identity.NewProviderToken(tok.RefreshToken), false, nil
}

// Verify checks an ID token (issuer, audience, expiry, signature, nonce) and reads its
// claims. Each refusal is UNAUTHENTICATED and says which check failed.
func (p *Provider) Verify(ctx context.Context, raw, nonce string) (*identity.SSOClaims, error) {
	return p.verify(ctx, raw, nonce, true)
}

func (p *Provider) verify(ctx context.Context, raw, nonce string, withNonce bool) (*identity.SSOClaims, error) {
	pr, err := p.discovered()
	if err != nil {
		return nil, err
	}
	v := pr.Verifier(&gooidc.Config{ClientID: p.cfg.ClientID, Now: p.now})
	tok, err := v.Verify(gooidc.ClientContext(ctx, p.client), raw)
	if err != nil {
		return nil, p.refused(err, raw)
	}
	if withNonce && (nonce == "" || subtle.ConstantTimeCompare([]byte(tok.Nonce), []byte(nonce)) != 1) {
		return nil, apperr.New(apperr.Unauthenticated, "the ID token's nonce is not the one of this sign-in (a replayed or swapped token): start again with Sign in with SSO")
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, apperr.New(apperr.Unauthenticated, "the ID token's claims cannot be read: %s", cut(err.Error(), 120))
	}
	c := &identity.SSOClaims{Issuer: tok.Issuer, Subject: tok.Subject, Groups: groups(claims[p.cfg.GroupsClaim])}
	c.Username = username(claims)
	return c, nil
}

// username is the name a provider's claims prefer.
func username(claims map[string]any) string {
	for _, k := range []string{"preferred_username", "email", "name"} {
		if s, ok := claims[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// refused says which of go-oidc's checks refused the token. The issuer the token claims
// (unverified, read only to name it) tells a token from another provider, whose signature
// cannot verify here, from a tampered one.
func (p *Provider) refused(err error, raw string) error {
	var expired *gooidc.TokenExpiredError
	msg := err.Error()
	switch claimed := unverifiedIssuer(raw); {
	case claimed != "" && claimed != p.cfg.Issuer:
		return apperr.New(apperr.Unauthenticated, "the ID token was issued by another issuer (%s) than %s: sign in through the configured identity provider", cut(claimed, 100), p.cfg.Issuer)
	case errors.As(err, &expired):
		return apperr.New(apperr.Unauthenticated, "the ID token expired at %s: sign in again (if it keeps happening, check this server's clock)", expired.Expiry.UTC().Format(time.RFC3339))
	case strings.Contains(msg, "different provider"):
		return apperr.New(apperr.Unauthenticated, "the ID token was issued by another issuer than %s (%s): sign in through the configured identity provider", p.cfg.Issuer, cut(msg, 160))
	case strings.Contains(msg, "expected audience"):
		return apperr.New(apperr.Unauthenticated, "the ID token was issued for another client than %q (wrong audience): check APELORA_OIDC_CLIENT_ID against the provider's client", p.cfg.ClientID)
	case strings.Contains(msg, "signature") || strings.Contains(msg, "malformed") || strings.Contains(msg, "unmarshal"):
		return apperr.New(apperr.Unauthenticated, "the ID token's signature does not verify against the keys of %s (a tampered or foreign token): sign in again", p.cfg.Issuer)
	}
	return apperr.New(apperr.Unauthenticated, "the ID token was refused (%s): sign in again", cut(msg, 160))
}

// unverifiedIssuer is the iss claim of a JWT, unverified; "" when it cannot be read.
func unverifiedIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Iss
}

// groups reads a groups claim: a list of names, or one name.
func groups(v any) []string {
	switch g := v.(type) {
	case string:
		return []string{g}
	case []any:
		out := make([]string, 0, len(g))
		for _, x := range g {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// String names the provider for logs; it never shows the secret.
func (p *Provider) String() string {
	return fmt.Sprintf("oidc(%s, client %s)", p.cfg.Issuer, p.cfg.ClientID)
}
