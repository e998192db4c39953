package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

const registerQuery = `mutation($input: RegisterMachineInput!) { registerMachine(input: $input) { machine { name phase record { name description provisioner { kind } registeredBy } } } }`

func TestRegisterAuditsAllowedAndRefusedCalls(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	manager := e.Identity("alice", identity.ManageInfrastructure)
	r := e.GQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL", "description": "rack 3, slot 7"}})
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	rec := r.Data["registerMachine"].(map[string]any)["machine"].(map[string]any)["record"].(map[string]any)
	if rec["registeredBy"] != "alice" || rec["description"] != "rack 3, slot 7" {
		t.Fatalf("record = %v", rec)
	}
	requestID := r.Header.Get("X-Request-Id")
	if requestID == "" {
		t.Fatal("no X-Request-Id header")
	}
	var actor, action, machine, outcome, reqID, params string
	err := e.DB.Store.Pool().QueryRow(t.Context(), `SELECT actor, action, machine, outcome, request_id, parameters::text FROM audit_events ORDER BY id DESC LIMIT 1`).
		Scan(&actor, &action, &machine, &outcome, &reqID, &params)
	if err != nil {
		t.Fatal(err)
	}
	if actor != "alice" || action != "registerMachine" || machine != "node-1" || outcome != "SUCCEEDED" || reqID != requestID {
		t.Fatalf("audit event = %s %s %s %s %s; want alice registerMachine node-1 SUCCEEDED %s", actor, action, machine, outcome, reqID, requestID)
	}
	if !strings.Contains(params, `"rack 3, slot 7"`) {
		t.Fatalf("parameters %s lack the description", params)
	}
	if !strings.Contains(e.Logs.String(), requestID) {
		t.Fatal("the request id is not in the server log")
	}

	// Failed: the audit trail says why, and the machine is not registered twice.
	r = e.GQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	if r.Code() != "ALREADY_EXISTS" {
		t.Fatalf("duplicate: %+v", r.Errors)
	}
	if got := e.Scalar(`SELECT outcome || ': ' || error FROM audit_events ORDER BY id DESC LIMIT 1`); !strings.HasPrefix(got.(string), "REFUSED: a machine named \"node-1\" is already registered") {
		t.Fatalf("audit of the duplicate: %v", got)
	}

	// Unregister, then the audit trail pages newest first and filters by machine.
	e.MustGQL(manager, `mutation { unregisterMachine(input: {name: "node-1"}) { name } }`, nil)
	e.MustGQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-2", "provisioner": "MANUAL"}})
	page := e.MustGQL(manager, `{ auditEvents(first: 2, machine: "node-1") { edges { node { action outcome } } pageInfo { hasNextPage endCursor } } }`, nil)["auditEvents"].(map[string]any)
	if got := fmt.Sprint(page["edges"]); got != "[map[node:map[action:unregisterMachine outcome:SUCCEEDED]] map[node:map[action:registerMachine outcome:REFUSED]]]" {
		t.Fatalf("first page: %s", got)
	}
	pi := page["pageInfo"].(map[string]any)
	if pi["hasNextPage"] != true {
		t.Fatal("no next page")
	}
	page = e.MustGQL(manager, `query($after: String) { auditEvents(first: 2, machine: "node-1", after: $after) { edges { node { action outcome } } pageInfo { hasNextPage } } }`,
		map[string]any{"after": pi["endCursor"]})["auditEvents"].(map[string]any)
	if got := fmt.Sprint(page["edges"]); got != "[map[node:map[action:registerMachine outcome:SUCCEEDED]]]" || page["pageInfo"].(map[string]any)["hasNextPage"] != false {
		t.Fatalf("second page: %s %v", got, page["pageInfo"])
	}
	for _, bad := range []string{`{ auditEvents(first: 0) { pageInfo { hasNextPage } } }`, `{ auditEvents(first: 501) { pageInfo { hasNextPage } } }`, `{ auditEvents(after: "garbage") { pageInfo { hasNextPage } } }`} {
		if r := e.GQL(manager, bad, nil); r.Code() != "INVALID_INPUT" {
			t.Errorf("%s: %+v", bad, r.Errors)
		}
	}
	// The trail is append-only, even for the database owner.
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `DELETE FROM audit_events`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("deleting audit events: %v", err)
	}
}

func TestBadInputGetsClearErrorsAndChangesNothing(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("alice", identity.ManageInfrastructure)
	e.MustGQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})

	cases := []struct {
		name  string
		input map[string]any
		code  string
		field string
		says  string
	}{
		{"empty name", map[string]any{"name": "", "provisioner": "MANUAL"}, "INVALID_INPUT", "name", "machine name is empty"},
		{"too long", map[string]any{"name": strings.Repeat("a", 64), "provisioner": "MANUAL"}, "INVALID_INPUT", "name", "64 characters long, more than the 63 allowed"},
		{"invalid characters", map[string]any{"name": "node_1!", "provisioner": "MANUAL"}, "INVALID_INPUT", "name", `"node_1!" is not valid`},
		{"upper case", map[string]any{"name": "Node-1", "provisioner": "MANUAL"}, "INVALID_INPUT", "name", "lower-case letters"},
		{"leading digit", map[string]any{"name": "1node", "provisioner": "MANUAL"}, "INVALID_INPUT", "name", "starting with a letter"},
		{"trailing hyphen", map[string]any{"name": "node-", "provisioner": "MANUAL"}, "INVALID_INPUT", "name", "not ending with a hyphen"},
		{"duplicate name", map[string]any{"name": "node-1", "provisioner": "MANUAL"}, "ALREADY_EXISTS", "name", `a machine named "node-1" is already registered`},
		{"description too long", map[string]any{"name": "node-2", "provisioner": "MANUAL", "description": strings.Repeat("x", 1025)}, "INVALID_INPUT", "description", "longer than 1024"},
		{"control characters", map[string]any{"name": "node-2", "provisioner": "MANUAL", "description": "a\x00b"}, "INVALID_INPUT", "description", "control characters"},
		{"system id on a manual machine", map[string]any{"name": "node-2", "provisioner": "MANUAL", "maasSystemId": "abc123"}, "INVALID_INPUT", "maasSystemId", "MANUAL machine has no MAAS system id"},
		{"MAAS machine without system id", map[string]any{"name": "node-2", "provisioner": "MAAS"}, "INVALID_INPUT", "maasSystemId", "needs its MAAS system id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.Snapshot()
			r := e.GQL(manager, registerQuery, map[string]any{"input": c.input})
			if r.Code() != c.code || r.Errors[0].Extensions["field"] != c.field || !strings.Contains(r.Errors[0].Message, c.says) {
				t.Fatalf("got %+v; want %s on %s saying %q", r.Errors, c.code, c.field, c.says)
			}
			if after := e.Snapshot(); after != before {
				t.Fatalf("bad input changed the database")
			}
		})
	}
	// GraphQL-level mistakes (unknown enum value) are refused before any resolver runs,
	// with gqlgen's own clear message.
	r := e.GQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-2", "provisioner": "BOGUS"}})
	if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "BOGUS") {
		t.Fatalf("unknown provisioner: %+v", r.Errors)
	}
	if r := e.GQL(manager, `mutation { unregisterMachine(input: {name: "node-9"}) { name } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("unregister unknown: %+v", r.Errors)
	}
}

func TestOnlyTokenHashesAreStored(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	token := e.Identity("alice", identity.ManageInfrastructure)
	e.MustGQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	e.GQL("apl_"+strings.Repeat("z", 43), `{ machines { name } }`, nil) // a wrong token, also never stored
	dump := e.DB.Dump(t)
	secret := strings.TrimPrefix(token, "apl_")
	if strings.Contains(dump, secret) || strings.Contains(dump, strings.Repeat("z", 43)) {
		t.Fatal("a bearer token is in the database dump")
	}
	if !strings.Contains(dump, hex.EncodeToString(identity.HashToken(token))) {
		t.Fatal("the token's hash is not in the dump: the test would not notice a leak in another form")
	}
	if strings.Contains(e.Logs.String(), secret) {
		t.Fatal("a bearer token is in the server log")
	}
}

func TestWebsocketWithoutValidTokenIsClosedWith4403(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	for _, auth := range []string{"", "Bearer apl_wrong"} {
		d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		conn, _, err := d.Dial(strings.Replace(e.Base, "http", "ws", 1)+"/graphql", nil)
		if err != nil {
			t.Fatal(err)
		}
		payload := map[string]any{}
		if auth != "" {
			payload["Authorization"] = auth
		}
		if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": payload}); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var closeErr *websocket.CloseError
		for {
			_, _, err := conn.ReadMessage()
			if err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					closeErr = ce
				} else {
					t.Fatalf("read: %v", err)
				}
				break
			}
		}
		conn.Close()
		// graphql-ws treats 4403 (Forbidden) as final and does not reconnect; 1000
		// would make it retry forever.
		if closeErr.Code != 4403 || closeErr.Text != "Forbidden" {
			t.Fatalf("auth %q: closed with %d %q, want 4403 Forbidden", auth, closeErr.Code, closeErr.Text)
		}
	}
}

// proxy forwards TCP connections to target until cut, to make the database unreachable
// for the server while the test still reaches it directly.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cutOff() })
	return p
}

func (p *proxy) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestUnreachableDatabaseRefusesMutationsAndChangesNothing(t *testing.T) {
	parallel(t)
	db := pgtest.New(t)
	cfg, err := parseHostPort(db.URL)
	if err != nil {
		t.Skipf("test database is not on TCP: %v", err)
	}
	p := newProxy(t, cfg)
	viaProxy := strings.Replace(db.URL, cfg, p.ln.Addr().String(), 1)
	store, err := postgres.Open(context.Background(), viaProxy, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e := producttest.StartOn(t, db, store)
	token := e.Identity("alice", identity.ManageInfrastructure)
	e.MustGQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	before, audits := e.Snapshot(), e.Count("audit_events")

	p.cutOff()
	r := e.GQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-2", "provisioner": "MANUAL"}})
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "database is unreachable") {
		t.Fatalf("with the database cut off: %+v", r.Errors)
	}
	if e.Snapshot() != before || e.Count("audit_events") != audits {
		t.Fatal("a refused mutation changed the database")
	}
	resp, err := http.Get(e.Base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with the database cut off, want 503", resp.StatusCode)
	}
	resp, err = http.Get(e.Base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz = %d: the process is alive, it should say so", resp.StatusCode)
	}
}

func parseHostPort(url string) (string, error) {
	i := strings.Index(url, "@")
	if i < 0 {
		return "", fmt.Errorf("no host in %q", url)
	}
	rest := url[i+1:]
	if j := strings.IndexAny(rest, "/?"); j >= 0 {
		rest = rest[:j]
	}
	if _, _, err := net.SplitHostPort(rest); err != nil {
		return "", err
	}
	return rest, nil
}

func TestMutationWhoseAuditCannotBeWrittenChangesNothing(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	token := e.Identity("alice", identity.ManageInfrastructure)
	// Make every audit insert fail, as a full disk or a broken trigger would.
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `ALTER TABLE audit_events ADD CONSTRAINT no_more_audit CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	r := e.GQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "audit trail could not be written") {
		t.Fatalf("got %+v", r.Errors)
	}
	if n := e.Count("machine_records"); n != 0 {
		t.Fatalf("%d machine records after a mutation whose audit failed", n)
	}
	if !strings.Contains(e.Logs.String(), "could not write audit event") {
		t.Fatal("the lost audit event is not in the server log")
	}
}

func TestGraphiQLIsServedFromTheBinary(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	resp, err := http.Get(e.Base + "/graphiql/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Fatalf("GET /graphiql/ = %d %.200s", resp.StatusCode, body)
	}
	for _, cdn := range []string{"unpkg.com", "jsdelivr", "cdnjs", "esm.sh", "googleapis"} {
		if strings.Contains(string(body), cdn) {
			t.Fatalf("the GraphiQL page loads from %s", cdn)
		}
	}
}
