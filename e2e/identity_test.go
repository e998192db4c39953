package e2e

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

const (
	createIdentityQuery = `mutation($input: CreateIdentityInput!) { createIdentity(input: $input) { token identity { name permissions createdAt expiresAt revokedAt active } } }`
	revokeIdentityQuery = `mutation($name: String!) { revokeIdentity(input: {name: $name}) { identity { name revokedAt revokedBy active } } }`
	identitiesQuery     = `{ identities { name permissions createdAt lastUsedAt expiresAt revokedAt revokedBy active } }`
)

// identityRow returns the identities query's row for name.
func identityRow(t *testing.T, e *producttest.Env, token, name string) map[string]any {
	t.Helper()
	for _, r := range e.MustGQL(token, identitiesQuery, nil)["identities"].([]any) {
		if row := r.(map[string]any); row["name"] == name {
			return row
		}
	}
	t.Fatalf("no identity %q in the list", name)
	return nil
}

func TestIdentityLifecycleOverGraphQL(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)

	// Create: the token comes once, with no-store; it works at once.
	r := e.GQL(admin, createIdentityQuery, map[string]any{"input": map[string]any{"name": "ci", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "30d"}})
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control = %q, want no-store", cc)
	}
	created := r.Data["createIdentity"].(map[string]any)
	token := created["token"].(string)
	got := created["identity"].(map[string]any)
	if !strings.HasPrefix(token, "apl_") || got["name"] != "ci" || got["active"] != true || got["expiresAt"] == nil || got["revokedAt"] != nil {
		t.Fatalf("created %v", created)
	}
	if v := e.MustGQL(token, `{ viewer { name } }`, nil)["viewer"].(map[string]any); v["name"] != "ci" {
		t.Fatalf("viewer = %v", v)
	}
	// A viewer reads the list (never a token in it); lastUsedAt follows use.
	var row map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if row = identityRow(t, e, token, "ci"); row["lastUsedAt"] != nil {
			break
		}
	}
	if row["lastUsedAt"] == nil || row["permissions"].([]any)[0] != "VIEW_INFRASTRUCTURE" {
		t.Fatalf("ci in the list: %v", row)
	}
	if r := e.GQL(token, `{ identities { token } }`, nil); len(r.Errors) == 0 {
		t.Fatal("the identities list offers a token field")
	}

	// Refusals: each a clear error on its field, audited once, nothing changed.
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	cases := []struct {
		name  string
		input map[string]any
		code  string
		field string
		says  string
	}{
		{"bad name", map[string]any{"name": "CI Bot", "permissions": []string{"VIEW_INFRASTRUCTURE"}}, "INVALID_INPUT", "name", "is not valid"},
		{"huge name (half the 1 MiB body cap)", map[string]any{"name": strings.Repeat("a", 512<<10), "permissions": []string{"VIEW_INFRASTRUCTURE"}}, "INVALID_INPUT", "name", "bytes)"},
		{"no permission", map[string]any{"name": "x", "permissions": []string{}}, "INVALID_INPUT", "permissions", "at least one permission"},
		{"hardware.delete alone", map[string]any{"name": "x", "permissions": []string{"HARDWARE_DELETE"}}, "INVALID_INPUT", "permissions", "could do nothing"},
		{"hardware.delete with view", map[string]any{"name": "x", "permissions": []string{"VIEW_INFRASTRUCTURE", "HARDWARE_DELETE"}}, "INVALID_INPUT", "permissions", "could do nothing"},
		{"expiry in the past", map[string]any{"name": "x", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresAt": past}, "INVALID_INPUT", "expiresAt", "not in the future"},
		{"negative duration", map[string]any{"name": "x", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "-5m"}, "INVALID_INPUT", "expiresIn", "not in the future"},
		{"not a duration", map[string]any{"name": "x", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "next week"}, "INVALID_INPUT", "expiresIn", "not a duration"},
		{"both expiries", map[string]any{"name": "x", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "1h", "expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}, "INVALID_INPUT", "expiresIn", "not both"},
		{"duplicate name", map[string]any{"name": "ci", "permissions": []string{"VIEW_INFRASTRUCTURE"}}, "ALREADY_EXISTS", "name", `an identity named "ci" already exists`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, audits := e.Snapshot(), e.Count("audit_events")
			r := e.GQL(admin, createIdentityQuery, map[string]any{"input": c.input})
			if r.Code() != c.code || r.Errors[0].Extensions["field"] != c.field || !strings.Contains(r.Errors[0].Message, c.says) || len(r.Errors[0].Message) > 400 {
				t.Fatalf("got %.500v; want %s on %s saying %q", r.Errors, c.code, c.field, c.says)
			}
			if r.Data != nil && r.Data["createIdentity"] != nil {
				t.Fatalf("refused creation returned %v", r.Data)
			}
			if e.Snapshot() != before || e.Count("audit_events") != audits+1 {
				t.Fatal("a refused creation changed the database or did not write one audit event")
			}
			if got := e.Scalar(`SELECT action || ' ' || outcome || ' ' || coalesce(machine, '-') FROM audit_events ORDER BY id DESC LIMIT 1`); got != "createIdentity REFUSED -" {
				t.Fatalf("audited as %v", got)
			}
		})
	}
	// An unknown permission is not even a valid request.
	if r := e.GQL(admin, createIdentityQuery, map[string]any{"input": map[string]any{"name": "x", "permissions": []string{"ROOT"}}}); len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "ROOT") {
		t.Fatalf("unknown permission: %+v", r.Errors)
	}
	// A manager cannot grant what it does not hold.
	mgr := e.Identity("mgr", identity.ManageInfrastructure)
	if r := e.GQL(mgr, createIdentityQuery, map[string]any{"input": map[string]any{"name": "eraser", "permissions": []string{"MANAGE_INFRASTRUCTURE", "HARDWARE_DELETE"}}}); r.Code() != "FORBIDDEN" {
		t.Fatalf("granting hardware.delete without holding it: %+v", r.Errors)
	}

	// Revoke: refused at once on the next request, on this replica and on another.
	other, err := postgres.Open(context.Background(), e.DB.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	replica := producttest.StartOn(t, e.DB, other)
	replica.MustGQL(token, `{ viewer { name } }`, nil)
	rev := e.MustGQL(admin, revokeIdentityQuery, map[string]any{"name": "ci"})["revokeIdentity"].(map[string]any)["identity"].(map[string]any)
	if rev["revokedBy"] != "admin" || rev["active"] != false || rev["revokedAt"] == nil {
		t.Fatalf("revoked %v", rev)
	}
	for _, env := range []*producttest.Env{e, replica} {
		if r := env.GQL(token, `{ viewer { name } }`, nil); r.Code() != "UNAUTHENTICATED" || !strings.Contains(r.Errors[0].Message, `identity "ci" was revoked`) {
			t.Fatalf("a revoked token: %+v", r.Errors)
		}
	}
	if got := e.Scalar(`SELECT actor || ' ' || outcome || ' ' || coalesce(machine, '-') || ' ' || (details->>'identity') FROM audit_events WHERE action = 'revokeIdentity'`); got != "admin SUCCEEDED - ci" {
		t.Fatalf("revocation audited as %v", got)
	}
	if r := e.GQL(admin, revokeIdentityQuery, map[string]any{"name": "ci"}); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("revoking twice: %+v", r.Errors)
	}
	if r := e.GQL(admin, revokeIdentityQuery, map[string]any{"name": "nobody"}); r.Code() != "NOT_FOUND" {
		t.Fatalf("revoking nobody: %+v", r.Errors)
	}

	// Expired (set in the database rather than waited for): refused at once.
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `UPDATE identities SET expires_at = now() - interval '1 second', created_at = now() - interval '1 minute' WHERE name = 'mgr'`); err != nil {
		t.Fatal(err)
	}
	if r := e.GQL(mgr, `{ viewer { name } }`, nil); r.Code() != "UNAUTHENTICATED" || !strings.Contains(r.Errors[0].Message, `identity "mgr" expired at`) {
		t.Fatalf("an expired token: %+v", r.Errors)
	}
	if row := identityRow(t, e, admin, "mgr"); row["active"] != false || row["revokedAt"] != nil {
		t.Fatalf("mgr in the list: %v", row)
	}

	// The last active manager cannot revoke itself over the API (mgr has expired).
	if r := e.GQL(admin, revokeIdentityQuery, map[string]any{"name": "admin"}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "apelora identity revoke admin") {
		t.Fatalf("revoking the last manager: %+v", r.Errors)
	}
	// With another manager, revoking oneself is allowed (a leaked token's holder can).
	second := e.Identity("second", identity.ManageInfrastructure)
	e.MustGQL(admin, revokeIdentityQuery, map[string]any{"name": "admin"})
	if r := e.GQL(admin, `{ viewer { name } }`, nil); r.Code() != "UNAUTHENTICATED" {
		t.Fatalf("after revoking itself: %+v", r.Errors)
	}
	e.MustGQL(second, `{ viewer { name } }`, nil)

	// The tokens are nowhere: not in the database, the audit trail or the logs.
	dump := e.DB.Dump(t)
	if !strings.Contains(dump, hex.EncodeToString(identity.HashToken(token))) {
		t.Fatal("the token's hash is not in the dump: the test would not notice a leak in another form")
	}
	for _, tok := range []string{token, admin, mgr, second} {
		secret := strings.TrimPrefix(tok, "apl_")
		if strings.Contains(dump, secret) {
			t.Fatal("a bearer token is in the database dump")
		}
		if strings.Contains(e.Logs.String(), secret) || strings.Contains(replica.Logs.String(), secret) {
			t.Fatal("a bearer token is in the server log")
		}
	}
}

// rawSubscriber is a graphql-transport-ws client written from the protocol, as a browser
// library would behave: it answers pings and reports how the socket closed.
type rawSubscriber struct {
	conn   *websocket.Conn
	closed chan *websocket.CloseError
}

func rawSubscribe(t *testing.T, base, token, query string) *rawSubscriber {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, _, err := d.Dial(strings.Replace(base, "http", "ws", 1)+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatal(err)
	}
	var ack struct{ Type string }
	if err := conn.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %v %v", ack, err)
	}
	if err := conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query}}); err != nil {
		t.Fatal(err)
	}
	s := &rawSubscriber{conn: conn, closed: make(chan *websocket.CloseError, 1)}
	go func() {
		for {
			var m struct{ Type string }
			if err := conn.ReadJSON(&m); err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) {
					ce = &websocket.CloseError{Code: -1, Text: err.Error()}
				}
				s.closed <- ce
				return
			}
			if m.Type == "ping" {
				_ = conn.WriteJSON(map[string]any{"type": "pong"})
			}
		}
	}()
	return s
}

// closedWith4403 waits for the socket to close and checks it closed with 4403 and a reason
// saying says.
func (s *rawSubscriber) closedWith4403(t *testing.T, what, says string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case ce := <-s.closed:
		if ce.Code != 4403 || !strings.Contains(ce.Text, says) {
			t.Fatalf("%s: closed with %d %q; want 4403 saying %q", what, ce.Code, ce.Text, says)
		}
	case <-time.After(within):
		t.Fatalf("%s: still open %v later", what, within)
	}
	return time.Since(start)
}

// genqlientSocket subscribes with the generated Go client and returns its error channel.
func genqlientSocket(t *testing.T, base, token string) chan error {
	t.Helper()
	ws, err := client.NewWebSocket(base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	events, _, err := client.AuditEventRecorded(t.Context(), ws, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// genqlient's reader waits until each event is taken: take them.
	go func() {
		for range events {
		}
	}()
	return errs
}

func genqlientClosedWith4403(t *testing.T, errs chan error, says string, within time.Duration) {
	t.Helper()
	select {
	case err := <-errs:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4403 || !strings.Contains(ce.Text, says) {
			t.Fatalf("the generated client's socket ended with %v; want close 4403 saying %q", err, says)
		}
	case <-time.After(within):
		t.Fatalf("the generated client's socket is still open %v later", within)
	}
}

// Revoking an identity closes its open subscriptions with 4403 on every API replica
// (the revocation travels by NOTIFY), and leaves other identities' sockets alone.
func TestRevocationClosesOpenWebsocketsOnEveryReplica(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	other, err := postgres.Open(context.Background(), e.DB.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	replica := producttest.StartOn(t, e.DB, other)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	watcher := e.Identity("watcher", identity.ViewInfrastructure)
	bystander := e.Identity("bystander", identity.ViewInfrastructure)
	doomed := e.Identity("doomed", identity.ViewInfrastructure)

	const sub = `subscription { auditEventRecorded { id action } }`
	here := rawSubscribe(t, e.Base, watcher, sub)
	there := rawSubscribe(t, replica.Base, watcher, sub)
	gen := genqlientSocket(t, replica.Base, watcher)
	calm := rawSubscribe(t, replica.Base, bystander, sub)
	gone := rawSubscribe(t, replica.Base, doomed, sub)

	e.MustGQL(admin, revokeIdentityQuery, map[string]any{"name": "watcher"})
	// The revocation travels by NOTIFY, so the sockets close as soon as it lands; the log
	// shows how long that took. within bounds the wait against hanging: it is not a timing
	// assertion (a loaded machine may take seconds).
	const within = 2 * time.Minute
	took := here.closedWith4403(t, "same replica", `identity "watcher" was revoked`, within)
	took2 := there.closedWith4403(t, "other replica", `identity "watcher" was revoked`, within)
	genqlientClosedWith4403(t, gen, `identity "watcher" was revoked`, within)
	t.Logf("closed after the revocation answered: %v on its replica, %v more on the other", took, took2)

	// Deleting the row by hand (as before revocation existed) closes its sockets too.
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `DELETE FROM identities WHERE name = 'doomed'`); err != nil {
		t.Fatal(err)
	}
	gone.closedWith4403(t, "deleted identity", `identity "doomed" no longer exists`, within)

	// The bystander still receives events.
	e.Identity("later", identity.ViewInfrastructure) // writes an audit event
	select {
	case ce := <-calm.closed:
		t.Fatalf("another identity's socket closed: %d %q", ce.Code, ce.Text)
	case <-time.After(300 * time.Millisecond):
	}
	// A new socket with the revoked token is refused at connection_init.
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, _, err := d.Dial(strings.Replace(replica.Base, "http", "ws", 1)+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + watcher}})
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4403 {
		t.Fatalf("a new socket with a revoked token: %v", err)
	}
}

// An identity that expires while its socket is open is closed at its expiry, whether the
// expiry was known when the socket opened or set afterwards.
func TestExpiryClosesAnOpenWebsocket(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	// 8 s: long enough for both sockets to open first on a loaded machine (an identity
	// already expired is refused at connection_init, which is another test).
	short := e.MustGQL(admin, createIdentityQuery, map[string]any{"input": map[string]any{"name": "short", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "8s"}})["createIdentity"].(map[string]any)["token"].(string)
	later := e.Identity("later", identity.ViewInfrastructure)

	const sub = `subscription { auditEventRecorded { id } }`
	a := rawSubscribe(t, e.Base, short, sub)
	gen := genqlientSocket(t, e.Base, short)
	b := rawSubscribe(t, e.Base, later, sub)
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `UPDATE identities SET expires_at = now() + interval '1 second' WHERE name = 'later'`); err != nil {
		t.Fatal(err)
	}
	// The waits are bounded against hanging, not timed: each socket closes at its expiry.
	const within = 2 * time.Minute
	a.closedWith4403(t, "expiry known at connection", `identity "short" expired at`, within)
	genqlientClosedWith4403(t, gen, `identity "short" expired at`, within)
	b.closedWith4403(t, "expiry set while connected", `identity "later" expired at`, within)
}
