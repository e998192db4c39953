// Package oidcprovider starts a real OpenID provider on loopback for tests: zitadel's
// op (github.com/zitadel/oidc/v3/pkg/op, an implementation that passes the OpenID
// conformance suite) over the in-memory storage of its example server, with users in
// groups. It signs tokens with its own keys and answers discovery, JWKS, authorize and
// token (the code, device and refresh token grants; refresh tokens, rotated at each use,
// for sign-ins that ask for offline_access) like any provider; only the login page is automatic: it signs in the user the test
// chose with SignInAs.
package oidcprovider

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// GroupsScope asks for the groups claim (GroupsClaim), as Keycloak's and Entra's clients do.
const (
	GroupsScope = "groups"
	GroupsClaim = "groups"
)

// Provider is an OpenID provider on a loopback port.
type Provider struct {
	Issuer string

	srv     *httptest.Server
	op      *op.Provider
	storage *groupStorage
	clients map[string]*storage.Client

	mu      sync.Mutex
	users   *users
	signIn  string   // the username the login page signs in
	issued  []string // every token the token endpoint answered
	refresh []string // the refresh tokens among them
}

// Start starts a provider on 127.0.0.1 with no users and no clients; it stops with the test.
func Start(t testing.TB) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oidcprovider: listen: %v", err)
	}
	p := &Provider{Issuer: "http://" + ln.Addr().String(), clients: map[string]*storage.Client{}, users: &users{byID: map[string]*user{}}}
	p.storage = &groupStorage{Storage: storage.NewStorageWithClients(p.users, p.clients), users: p.users}
	p.storage.rotate()
	var key [32]byte
	copy(key[:], "apelora-oidcprovider-test-key-32")
	p.op, err = op.NewProvider(&op.Config{CryptoKey: key, CodeMethodS256: true, AuthMethodPost: true, GrantTypeRefreshToken: true,
		SupportedUILocales: []language.Tag{language.English},
		DeviceAuthorization: op.DeviceAuthorizationConfig{Lifetime: 5 * time.Minute, PollInterval: time.Second,
			UserFormPath: "/device", UserCode: op.UserCodeBase20}}, p.storage, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("oidcprovider: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login/username", p.login)
	mux.Handle("/oauth/token", p.recordTokens(p.op))
	mux.Handle("/", p.op)
	p.srv = httptest.NewUnstartedServer(mux)
	p.srv.Listener.Close()
	p.srv.Listener = ln
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

// Stop stops the provider: the issuer is down from now on.
func (p *Provider) Stop() { p.srv.CloseClientConnections(); p.srv.Close() }

// recordTokens keeps every token the token endpoint answers (code, device and refresh
// grants), so tests can look for them where they must never be.
func (p *Provider) recordTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
			IDToken      string `json:"id_token"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			p.mu.Lock()
			for _, t := range []string{body.AccessToken, body.RefreshToken, body.IDToken} {
				if t != "" {
					p.issued = append(p.issued, t)
				}
			}
			if body.RefreshToken != "" {
				p.refresh = append(p.refresh, body.RefreshToken)
			}
			p.mu.Unlock()
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// Issued returns every token the provider has issued so far: access, refresh and ID tokens.
func (p *Provider) Issued() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.issued)
}

// RefreshTokens returns the refresh tokens the provider has issued so far (one per
// sign-in that asked for offline_access, one more per refresh that rotated it).
func (p *Provider) RefreshTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.refresh)
}

// EndSessions ends every session of username at client, as a provider's administrator
// signing the user out everywhere does: its access and refresh tokens stop working, so
// a refresh answers invalid_grant.
func (p *Provider) EndSessions(ctx context.Context, username, client string) error {
	p.storage.mu.Lock()
	u := p.users.byUsername(username)
	p.storage.mu.Unlock()
	if u == nil {
		return fmt.Errorf("oidcprovider: no user %q", username)
	}
	return p.storage.TerminateSession(ctx, u.ID, client)
}

// AddClient registers a confidential web client (client_secret_basic, code flow with PKCE)
// allowed to redirect to redirectURIs. Call it before sign-ins start.
func (p *Provider) AddClient(id, secret string, redirectURIs ...string) {
	p.clients[id] = storage.WebClient(id, secret, redirectURIs...)
}

// AddUser adds a user in groups; its subject is "sub-" and the username.
func (p *Provider) AddUser(username string, groups ...string) {
	p.storage.mu.Lock() // the lock claims reads the users under
	defer p.storage.mu.Unlock()
	p.users.add(&user{User: storage.User{ID: "sub-" + username, Username: username, Password: "unused",
		Email: username + "@example.test", EmailVerified: true, FirstName: username, PreferredLanguage: language.English}, groups: groups})
}

// SetGroups changes a user's groups (what the next token says).
func (p *Provider) SetGroups(username string, groups ...string) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	if u := p.users.byUsername(username); u != nil {
		u.groups = groups
	}
}

// SignInAs makes the login page sign in username (as if the user typed their password).
func (p *Provider) SignInAs(username string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signIn = username
}

// login is the provider's login page: it signs in the chosen user and sends the browser on
// to the authorization callback, which redirects to the client with a code.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	p.mu.Lock()
	username := p.signIn
	p.mu.Unlock()
	if username == "" {
		http.Error(w, "oidcprovider: no user to sign in (call SignInAs)", http.StatusUnauthorized)
		return
	}
	if err := p.storage.CheckUsernamePassword(username, "unused", id); err != nil {
		http.Error(w, "oidcprovider: "+err.Error(), http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, p.op.AuthorizationEndpoint().Absolute(p.Issuer)+"/callback?id="+url.QueryEscape(id), http.StatusFound)
}

// ApproveDevice approves a device sign-in as username would at the verification page, after
// signing in there: the user typed userCode.
func (p *Provider) ApproveDevice(ctx context.Context, userCode, username string) error {
	p.storage.mu.Lock()
	u := p.users.byUsername(username)
	p.storage.mu.Unlock()
	if u == nil {
		return fmt.Errorf("oidcprovider: no user %q", username)
	}
	return p.storage.CompleteDeviceAuthorization(ctx, userCode, u.ID)
}

// Code runs the front channel of a sign-in as a browser would, from authURL (a client's
// authorization request) to the client's redirect URI, and returns the code and state the
// provider sent there.
func (p *Provider) Code(ctx context.Context, authURL string) (code, state string, err error) {
	c := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), p.Issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return "", "", fmt.Errorf("oidcprovider: the authorization request ended with %s, not a redirect to the client", resp.Status)
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return "", "", fmt.Errorf("oidcprovider: %s: %s", e, q.Get("error_description"))
	}
	return q.Get("code"), q.Get("state"), nil
}

type user struct {
	storage.User
	groups []string
}

// users is the example storage's UserStore, with groups.
type users struct{ byID map[string]*user }

func (u *users) add(x *user) { u.byID[x.ID] = x }

func (u *users) byUsername(name string) *user {
	for _, x := range u.byID {
		if x.Username == name {
			return x
		}
	}
	return nil
}

func (u *users) GetUserByID(id string) *storage.User {
	if x := u.byID[id]; x != nil {
		return &x.User
	}
	return nil
}

func (u *users) GetUserByUsername(name string) *storage.User {
	if x := u.byUsername(name); x != nil {
		return &x.User
	}
	return nil
}

func (u *users) ExampleClientID() string { return "service" }

// groupStorage is the example storage with the groups claim (scope GroupsScope) and the
// preferred_username every ID token carries, as Keycloak's do.
type groupStorage struct {
	*storage.Storage
	users *users
	mu    sync.Mutex
	// keys are the signing keys, the newest (the one that signs) last; all are published.
	keys []*rsaKey
}

// rsaKey is a signing key and its id (op.SigningKey and, public, op.Key).
type rsaKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *rsaKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *rsaKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *rsaKey) Key() any                                    { return k.key }
func (k *rsaKey) ID() string                                  { return k.id }
func (k *rsaKey) Use() string                                 { return "sig" }

type publicKey struct{ *rsaKey }

func (k publicKey) Key() any { return &k.key.PublicKey }

// RotateKey makes a new signing key: tokens are signed with it from now on, and the JWKS
// publishes it beside the old ones (as a provider rotating its keys does). Clients that
// cached the old set must fetch it again to verify the new tokens.
func (p *Provider) RotateKey() {
	p.storage.rotate()
}

func (s *groupStorage) rotate() {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, &rsaKey{id: fmt.Sprintf("key-%d", len(s.keys)+1), key: k})
}

func (s *groupStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *groupStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}

func (s *groupStorage) claims(info *oidc.UserInfo, userID string, scopes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.users.byID[userID]
	if x == nil {
		return
	}
	info.PreferredUsername = x.Username
	for _, sc := range scopes {
		if sc == GroupsScope {
			info.AppendClaims(GroupsClaim, append([]string{}, x.groups...))
		}
	}
}

func (s *groupStorage) SetUserinfoFromScopes(ctx context.Context, info *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, info, userID, clientID, scopes); err != nil {
		return err
	}
	s.claims(info, userID, scopes)
	return nil
}

func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, token, scopes); err != nil {
		return err
	}
	s.claims(info, token.GetSubject(), scopes)
	return nil
}

func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.claims(info, subject, []string{GroupsScope})
	return nil
}

// GetClientByClientID answers the example's clients, allowed the groups scope.
func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return groupsClient{c}, nil
}

type groupsClient struct{ op.Client }

// GrantTypes adds the device authorization grant (apeloractl login) to the web client's.
func (c groupsClient) GrantTypes() []oidc.GrantType {
	return append(c.Client.GrantTypes(), oidc.GrantTypeDeviceCode)
}

func (c groupsClient) IsScopeAllowed(scope string) bool {
	return scope == GroupsScope || c.Client.IsScopeAllowed(scope)
}
