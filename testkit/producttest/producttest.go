// Package producttest runs the whole product for tests: the real server on a loopback
// port, on a fresh real PostgreSQL database, with helpers to call it as users do.
package producttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/server"
)

// env is one running product.
type Env struct {
	t    testing.TB
	DB   *pgtest.DB
	Base string // http://127.0.0.1:port
	Logs *SyncBuffer
}

type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Option adjusts the product's configuration.
type Option func(*app.Config)

// WithIncus points the product at a real Incus (a lab cluster).
func WithIncus(c incus.Config) Option { return func(cfg *app.Config) { cfg.Incus = c } }

// WithoutIncus leaves Incus unconfigured, as a fresh installation has it.
func WithoutIncus() Option { return func(cfg *app.Config) { cfg.Incus = incus.Config{} } }

// unreachableIncus is configured (so changes are allowed) but answers nothing: tests of
// the foundation need no cluster, and the fleet honestly says Incus cannot be asked.
var unreachableIncus = incus.Config{SocketPath: "/nonexistent/apelora-test/unix.socket"}

// WithConsoleSessionTTL sets how long a console session lasts.
func WithConsoleSessionTTL(d time.Duration) Option {
	return func(c *app.Config) { c.ConsoleSessionTTL = d }
}

// WithRequestTimeout sets the bound on every Incus and MAAS call (APELORA_REQUEST_TIMEOUT).
func WithRequestTimeout(d time.Duration) Option { return func(c *app.Config) { c.RequestTimeout = d } }

// WithDrift runs the drift watcher on this replica (off unless asked: other tests must
// not see its Incus calls) with the interval and offline threshold given.
func WithDrift(interval, offlineAfter time.Duration) Option {
	return func(c *app.Config) { c.DriftInterval, c.DriftOfflineAfter = interval, offlineAfter }
}

// WithFleetRefresh sets how often the fleet stream reads the fleet while anyone
// subscribes (APELORA_FLEET_REFRESH_INTERVAL); an hour shows what arrives without it.
func WithFleetRefresh(d time.Duration) Option {
	return func(c *app.Config) { c.FleetRefreshInterval = d }
}

// WithLeaderLease sets the length of the leases leaders and changes hold
// (APELORA_LEADER_LEASE): a change cut off from its outcome is reconciled a lease and a
// request timeout after it stopped.
func WithLeaderLease(d time.Duration) Option { return func(c *app.Config) { c.LeaderLease = d } }

// WithStepConcurrency bounds the machine steps running at once (APELORA_STEP_CONCURRENCY).
func WithStepConcurrency(n int) Option { return func(c *app.Config) { c.StepConcurrency = n } }

// WithPingInterval sets the websocket keep-alive period.
func WithPingInterval(d time.Duration) Option { return func(c *app.Config) { c.PingInterval = d } }

// WithAuthFailureLimit sets the per-address limit on requests without a valid identity.
// Tests run with a generous one unless they set it (many send anonymous cases from
// 127.0.0.1); server.DefaultAuthFailureLimit is the product's.
func WithAuthFailureLimit(l server.RateLimit) Option {
	return func(c *app.Config) { c.AuthFailureLimit = l }
}

// WithIdentityLimits sets the websockets and subscriptions one identity may hold open
// (APELORA_WS_SOCKETS_PER_IDENTITY, APELORA_WS_SUBSCRIPTIONS_PER_IDENTITY); benchmarks
// that open thousands with one token raise them.
func WithIdentityLimits(sockets, subscriptions int) Option {
	return func(c *app.Config) {
		c.IdentityLimits = server.IdentityLimits{Sockets: sockets, Subscriptions: subscriptions}
	}
}

// WithRefusalWindow sets the window of the audit events of repeated refusals (rateLimited,
// signInFailed, identityLimited), so a test sees a window end.
func WithRefusalWindow(d time.Duration) Option {
	return func(c *app.Config) { c.RefusalWindow = d }
}

// WithSSORecheck sets how long the identity provider's word on a user's groups holds
// (APELORA_OIDC_RECHECK_INTERVAL): sessions are asked about again at half of it. Call it
// after WithSSO.
func WithSSORecheck(d time.Duration) Option {
	return func(c *app.Config) { c.SSO.Recheck = d }
}

// WithTrustedProxies sets the proxies whose X-Forwarded-For names the client.
func WithTrustedProxies(p server.TrustedProxies) Option {
	return func(c *app.Config) { c.TrustedProxies = p }
}

// WithSSO signs in through the OpenID provider at issuer as client clientID (secret ""
// for a public client), its groups mapped by groups; the public URL is the product's own.
func WithSSO(issuer, clientID, secret string, groups identity.GroupPermissions) Option {
	return func(c *app.Config) {
		c.SSO = app.SSOConfig{Issuer: issuer, ClientID: clientID, ClientSecret: secret,
			Scopes: []string{"openid", "profile", "groups", "offline_access"}, GroupsClaim: "groups", Groups: groups}
	}
}

// Start runs the product on a fresh database, on a loopback port, until the test ends.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	db := pgtest.New(t)
	return StartOn(t, db, db.Store, opts...)
}

// StartOn runs the product on store, which may reach db by another way (a proxy).
func StartOn(t testing.TB, db *pgtest.DB, store *postgres.Store, opts ...Option) *Env {
	t.Helper()
	// ShutdownGrace: a request still waiting on an upstream when a test ends (a MAAS read
	// retried while the simulator answers 503) finishes within the request timeout; 5 s was
	// overrun once on the loaded CI machine (TestBulkCommissionAgainstTheSimulator). A
	// connection that never ends still fails the test, after 30 s.
	cfg := app.Config{PingInterval: 25 * time.Second, ShutdownGrace: 30 * time.Second, Incus: unreachableIncus,
		AuthFailureLimit: server.RateLimit{Burst: 100000, Every: time.Millisecond}}
	for _, o := range opts {
		o(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SSO.Issuer != "" && cfg.PublicURL == "" {
		// The provider sends browsers back to the public URL: this one.
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	logs := &SyncBuffer{}
	log := logging.New(logs, "debug")
	ctx, cancel := context.WithCancel(context.Background())
	product, err := app.Build(ctx, cfg, store, log)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, product.Handler, cfg.ShutdownGrace, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &Env{t: t, DB: db, Base: "http://" + ln.Addr().String(), Logs: logs}
}

// Identity creates an identity as `apelora identity create` does on the server (through
// the same rules, audited) and returns its bearer token.
func (e *Env) Identity(name string, perms ...identity.Permission) string {
	e.t.Helper()
	return CreateIdentity(e.t, e.DB.Store, name, perms...)
}

// CreateIdentity creates an identity in store as the server's command line does and
// returns its bearer token.
func CreateIdentity(t testing.TB, store *postgres.Store, name string, perms ...identity.Permission) string {
	t.Helper()
	var token string
	by := app.LocalCaller()
	err := app.OnServer(context.Background(), store, by, "createIdentity", map[string]any{"name": name}, func(ctx context.Context) error {
		var err error
		_, token, err = (&identity.Service{Store: store}).Create(ctx, by, identity.NewIdentity{Name: name, Permissions: perms})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// UncheckedIdentity inserts an identity the creation rules would refuse (hardware.delete
// alone), as rows made before those rules may be, and returns its token: the gate must
// still refuse what it cannot do.
func (e *Env) UncheckedIdentity(name string, perms ...identity.Permission) string {
	e.t.Helper()
	token, hash, err := identity.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	ps := make([]string, len(perms))
	for i, p := range perms {
		ps[i] = string(p)
	}
	if _, err := e.DB.Store.Pool().Exec(context.Background(), `INSERT INTO identities (name, token_hash, permissions) VALUES ($1, $2, $3)`, name, hash, ps); err != nil {
		e.t.Fatal(err)
	}
	return token
}

// GQLError is one GraphQL error as a client receives it.
type GQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Response is a GraphQL response with its HTTP status and headers.
type Response struct {
	Data   map[string]any `json:"data"`
	Errors []GQLError     `json:"errors"`
	Header http.Header    `json:"-"`
	Status int            `json:"-"`
}

// Code is the first error's extensions.code, or "".
func (r *Response) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// GQL posts one GraphQL request with token (none when empty).
func (e *Env) GQL(token, query string, vars map[string]any) *Response {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, e.Base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := &Response{Header: resp.Header, Status: resp.StatusCode}
	if err := json.Unmarshal(raw, out); err != nil {
		e.t.Fatalf("response is not JSON (%d): %s", resp.StatusCode, raw)
	}
	return out
}

// MustGQL is GQL that fails the test on any GraphQL error.
func (e *Env) MustGQL(token, query string, vars map[string]any) map[string]any {
	e.t.Helper()
	r := e.GQL(token, query, vars)
	if len(r.Errors) > 0 {
		e.t.Fatalf("unexpected errors: %+v", r.Errors)
	}
	return r.Data
}

// Scalar runs SQL against the test database and returns the first column of the first row.
func (e *Env) Scalar(sql string, args ...any) any {
	e.t.Helper()
	var v any
	if err := e.DB.Store.Pool().QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// Count returns the number of rows in table.
func (e *Env) Count(table string) int64 {
	e.t.Helper()
	return e.Scalar("SELECT count(*) FROM " + table).(int64)
}

// ChangeTables are the tables a refused or failed mutation must leave as they were.
var ChangeTables = []string{"machine_records", "identities", "hardware_profiles", "admissions"}

// notChanges are columns a refused call may still write: authenticating notes the
// identity's last use.
const notChanges = ` - 'last_used_at'`

// Snapshot returns the contents of every change table, to compare before and after.
func (e *Env) Snapshot() string {
	e.t.Helper()
	var b strings.Builder
	for _, tbl := range ChangeTables {
		rows, err := e.DB.Store.Pool().Query(context.Background(), "SELECT (to_jsonb(t)"+notChanges+")::text FROM "+tbl+" t ORDER BY 1")
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				e.t.Fatal(err)
			}
			b.WriteString(tbl + ": " + s + "\n")
		}
		rows.Close()
	}
	return b.String()
}

// Discard is a logger that writes nowhere.
var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// HoldMachine makes the machine busy as another replica's change would: it holds the
// machine's lease (change_leases) until the returned release is called.
func (e *Env) HoldMachine(name string) (release func()) {
	e.t.Helper()
	key := "machine " + name
	if _, err := e.DB.Store.Pool().Exec(context.Background(), `INSERT INTO change_leases AS l (lock_key, epoch, holder, action, request_id, taken_at, expires_at)
		VALUES ($1, 1, 'another replica', 'a test', 'test', clock_timestamp(), clock_timestamp() + interval '10 minutes')
		ON CONFLICT (lock_key) DO UPDATE SET epoch = l.epoch + 1, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`, key); err != nil {
		e.t.Fatal(err)
	}
	return func() {
		if _, err := e.DB.Store.Pool().Exec(context.Background(), `UPDATE change_leases SET expires_at = clock_timestamp() WHERE lock_key = $1`, key); err != nil {
			e.t.Fatal(err)
		}
	}
}
