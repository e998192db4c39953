// Package e2e tests the product as its users meet it: the real server on a loopback port,
// a real PostgreSQL, HTTP and websocket clients (the generated Go client among them).
package e2e

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

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/app"
	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/logging"
	"github.com/apelora/fabric/server"
)

// env is one running product.
type env struct {
	t    testing.TB
	db   *pgtest.DB
	base string // http://127.0.0.1:port
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type option func(*app.Config)

func withPingInterval(d time.Duration) option { return func(c *app.Config) { c.PingInterval = d } }

// start runs the product on a fresh database, on a loopback port, until the test ends.
func start(t testing.TB, opts ...option) *env {
	t.Helper()
	db := pgtest.New(t)
	return startOn(t, db, db.Store, opts...)
}

// startOn runs the product on store, which may reach db by another way (a proxy).
func startOn(t testing.TB, db *pgtest.DB, store *postgres.Store, opts ...option) *env {
	t.Helper()
	cfg := app.Config{PingInterval: 25 * time.Second, ShutdownGrace: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	logs := &syncBuffer{}
	log := logging.New(logs, "debug")
	ctx, cancel := context.WithCancel(context.Background())
	product, err := app.Build(ctx, cfg, store, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
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
	return &env{t: t, db: db, base: "http://" + ln.Addr().String(), logs: logs}
}

// identity creates an identity and returns its bearer token.
func (e *env) identity(name string, perms ...identity.Permission) string {
	e.t.Helper()
	_, token, err := identity.Create(context.Background(), e.db.Store, name, perms)
	if err != nil {
		e.t.Fatal(err)
	}
	return token
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResponse struct {
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors"`
	Header http.Header    `json:"-"`
	Status int            `json:"-"`
}

func (r *gqlResponse) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql posts one GraphQL request with token (none when empty).
func (e *env) gql(token, query string, vars map[string]any) *gqlResponse {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, e.base+"/graphql", bytes.NewReader(body))
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
	out := &gqlResponse{Header: resp.Header, Status: resp.StatusCode}
	if err := json.Unmarshal(raw, out); err != nil {
		e.t.Fatalf("response is not JSON (%d): %s", resp.StatusCode, raw)
	}
	return out
}

// mustGQL is gql that fails the test on any GraphQL error.
func (e *env) mustGQL(token, query string, vars map[string]any) map[string]any {
	e.t.Helper()
	r := e.gql(token, query, vars)
	if len(r.Errors) > 0 {
		e.t.Fatalf("unexpected errors: %+v", r.Errors)
	}
	return r.Data
}

// query runs SQL against the test database and returns the first column of the first row.
func (e *env) scalar(sql string, args ...any) any {
	e.t.Helper()
	var v any
	if err := e.db.Store.Pool().QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func (e *env) count(table string) int64 {
	e.t.Helper()
	return e.scalar("SELECT count(*) FROM " + table).(int64)
}

// changeTables are the tables a refused or failed mutation must leave as they were.
var changeTables = []string{"machine_records", "identities"}

// snapshot returns the contents of every change table, to compare before and after.
func (e *env) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	for _, tbl := range changeTables {
		rows, err := e.db.Store.Pool().Query(context.Background(), "SELECT to_jsonb(t)::text FROM "+tbl+" t ORDER BY 1")
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

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
