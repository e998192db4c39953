package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// consoleRequest sends a request as a browser on the console would: the session cookie,
// and whatever headers the case adds.
func consoleRequest(t *testing.T, method, url, cookie, contentType, body string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "apelora_session", Value: cookie})
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// signIn exchanges a bearer token for a console session and returns the cookie.
func signIn(t *testing.T, e *producttest.Env, token string) *http.Cookie {
	t.Helper()
	resp, body := consoleRequest(t, http.MethodPost, e.Base+"/api/v1/session", "", "application/json", `{"token":"`+token+`"}`, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "apelora_session" {
			return c
		}
	}
	t.Fatalf("sign-in set no session cookie: %v", resp.Header)
	return nil
}

func gqlCode(t *testing.T, body []byte) string {
	t.Helper()
	var r producttest.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("not a GraphQL answer: %s", body)
	}
	return r.Code()
}

func TestConsoleSessionCookie(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)

	// A wrong token: 401 UNAUTHENTICATED (issue 25: it was 400), no cookie; a body that is
	// not {"token": …} stays 400 INVALID_INPUT.
	resp, body := consoleRequest(t, http.MethodPost, e.Base+"/api/v1/session", "", "application/json", `{"token":"apl_wrong"}`, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"UNAUTHENTICATED"`) || !strings.Contains(string(body), "this token is not valid") ||
		resp.Header.Get("WWW-Authenticate") == "" || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	resp, body = consoleRequest(t, http.MethodPost, e.Base+"/api/v1/session", "", "application/json", `{"tokn":"apl_wrong"}`, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"INVALID_INPUT"`) || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	// Sign-in itself is a JSON request from the console's own origin.
	for name, h := range map[string]map[string]string{
		"text/plain":     {"Content-Type": "text/plain"},
		"cross-site":     {"Sec-Fetch-Site": "cross-site"},
		"foreign-origin": {"Origin": "http://evil.example"},
	} {
		ct := "application/json"
		if c := h["Content-Type"]; c != "" {
			ct = c
			delete(h, "Content-Type")
		}
		resp, body := consoleRequest(t, http.MethodPost, e.Base+"/api/v1/session", "", ct, `{"token":"`+admin+`"}`, h)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("sign-in %s: %d %s", name, resp.StatusCode, body)
		}
	}

	c := signIn(t, e, admin)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge < 11*3600 || !strings.HasPrefix(c.Value, "aps_") {
		t.Fatalf("session cookie %+v", c)
	}
	if n := e.Scalar(`SELECT count(*) FROM console_sessions WHERE token_hash = $1`, identity.HashToken(c.Value)).(int64); n != 1 {
		t.Fatalf("%d sessions stored under the cookie's hash", n)
	}
	var dump string
	if err := e.DB.Store.Pool().QueryRow(context.Background(), `SELECT string_agg(to_jsonb(s)::text, '') FROM console_sessions s`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, c.Value) || strings.Contains(dump, strings.TrimPrefix(c.Value, "aps_")) {
		t.Fatal("the session value is stored in the clear")
	}

	resp, body = consoleRequest(t, http.MethodGet, e.Base+"/api/v1/session", c.Value, "", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"identity":"admin"`) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET session: %d %s", resp.StatusCode, body)
	}

	// The cookie reads and changes, from the console's own origin, in JSON.
	query := `{"query":"{ viewer { name } }"}`
	resp, body = consoleRequest(t, http.MethodPost, e.Base+"/graphql", c.Value, "application/json", query,
		map[string]string{"Origin": e.Base, "Sec-Fetch-Site": "same-origin"})
	if !strings.Contains(string(body), `"name":"admin"`) {
		t.Fatalf("viewer by cookie: %d %s", resp.StatusCode, body)
	}
	register := `{"query":"mutation { registerMachine(input: {name: \"node-1\"}) { machine { name } } }"}`
	resp, body = consoleRequest(t, http.MethodPost, e.Base+"/graphql", c.Value, "application/json", register, map[string]string{"Origin": e.Base})
	if gqlCode(t, body) != "" {
		t.Fatalf("register by cookie: %s", body)
	}

	// What another site could make a browser send is refused, and changes nothing.
	before := e.Snapshot()
	auditBefore := e.Count("audit_events")
	forged := `{"query":"mutation { registerMachine(input: {name: \"node-2\"}) { machine { name } } }"}`
	for name, tc := range map[string]struct {
		ct      string
		headers map[string]string
	}{
		"text/plain body":        {"text/plain", nil},
		"form body":              {"application/x-www-form-urlencoded", nil},
		"multipart body":         {"multipart/form-data; boundary=x", nil},
		"cross-site fetch":       {"application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"same-site other origin": {"application/json", map[string]string{"Sec-Fetch-Site": "same-site"}},
		"foreign Origin":         {"application/json", map[string]string{"Origin": "http://evil.example"}},
		"null Origin":            {"application/json", map[string]string{"Origin": "null"}},
	} {
		resp, body := consoleRequest(t, http.MethodPost, e.Base+"/graphql", c.Value, tc.ct, forged, tc.headers)
		if resp.StatusCode == http.StatusOK && gqlCode(t, body) == "" {
			t.Errorf("%s: a forged mutation was executed: %s", name, body)
		}
	}
	if after := e.Snapshot(); after != before {
		t.Fatalf("forged requests changed something:\n%s", after)
	}
	// Those that reached GraphQL were audited as refused, as every refused mutation is.
	if n := e.Count("audit_events") - auditBefore; n == 0 {
		t.Fatal("no refused mutation audited")
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE machine = 'node-2' AND outcome <> 'REFUSED'`).(int64); n != 0 {
		t.Fatalf("%d forged mutations audited as not refused", n)
	}

	// Websockets: the cookie authenticates when connection_init carries no Authorization;
	// the upgrade's Origin check stays.
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	hdr := http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {e.Base}}
	if code := wsInit(t, ws, hdr, nil); code != 0 {
		t.Fatalf("websocket with the session cookie closed with %d", code)
	}
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	if _, resp, err := d.Dial(ws, http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {"http://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin websocket upgrade: %v %v", err, resp)
	}

	// Sign-out ends the session on the server.
	resp, _ = consoleRequest(t, http.MethodDelete, e.Base+"/api/v1/session", c.Value, "", "", map[string]string{"Origin": e.Base})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if n := e.Count("console_sessions"); n != 0 {
		t.Fatalf("%d sessions left after sign-out", n)
	}
	resp, body = consoleRequest(t, http.MethodPost, e.Base+"/graphql", c.Value, "application/json", query, nil)
	if gqlCode(t, body) != "UNAUTHENTICATED" || !strings.Contains(string(body), "ended") {
		t.Fatalf("after sign-out: %s", body)
	}
	if code := wsInit(t, ws, hdr, nil); code != 4403 {
		t.Fatalf("websocket after sign-out closed with %d, want 4403", code)
	}

	// The bearer token and the session value never reach the log.
	if logs := e.Logs.String(); strings.Contains(logs, admin) || strings.Contains(logs, c.Value) {
		t.Fatal("the server log carries a credential")
	}
}

func TestConsoleSessionExpiresAndFollowsItsIdentity(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithConsoleSessionTTL(3*time.Second))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	c := signIn(t, e, admin)
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	hdr := http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {e.Base}}

	// A socket opened with the session ends when the session does: closed with 4403 and
	// the session's expiry as the reason, not before it. The read deadline is a guard
	// against hanging, not a timing assertion. On a loaded machine the 3 s session can lapse
	// between sign-in and the socket's first message: then the socket is refused at once
	// (4403), which says nothing about an open socket, so that try is made again.
	for try := 1; ; try++ {
		if try > 1 {
			c = signIn(t, e, admin)
			hdr = http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {e.Base}}
		}
		var ended *websocket.CloseError
		var endedAt time.Time
		code := wsInit(t, ws, hdr, func(conn *websocket.Conn) {
			conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					endedAt = time.Now()
					ended, _ = err.(*websocket.CloseError)
					return
				}
			}
		})
		if code == 4403 && try < 5 {
			t.Logf("try %d: the session lapsed before the socket was acknowledged; signing in again", try)
			continue
		}
		expires := newestSessionExpiry(t, e)
		if code != 0 || ended == nil || ended.Code != 4403 || !strings.Contains(ended.Text, "console session expired") || endedAt.Before(expires) {
			t.Fatalf("websocket past its session (expiring %s): init %d, ended at %s with %v", expires.Format(time.RFC3339Nano), code, endedAt.Format(time.RFC3339Nano), ended)
		}
		break
	}

	c = signIn(t, e, admin)
	hdr = http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {e.Base}}
	if _, err := e.DB.Store.Pool().Exec(context.Background(),
		`UPDATE console_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	resp, body := consoleRequest(t, http.MethodGet, e.Base+"/api/v1/session", c.Value, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "expired") {
		t.Fatalf("expired session: %d %s", resp.StatusCode, body)
	}
	resp, body = consoleRequest(t, http.MethodPost, e.Base+"/graphql", c.Value, "application/json", `{"query":"{ viewer { name } }"}`, nil)
	if gqlCode(t, body) != "UNAUTHENTICATED" || !strings.Contains(string(body), "expired") {
		t.Fatalf("GraphQL with an expired session: %s", body)
	}
	if code := wsInit(t, ws, hdr, nil); code != 4403 {
		t.Fatalf("websocket with an expired session closed with %d, want 4403", code)
	}

	// Revoking the identity ends its sessions at once: the cookie no longer reads, and a
	// socket the cookie opened closes with 4403.
	ops := e.Identity("ops", identity.ViewInfrastructure)
	oc := signIn(t, e, ops)
	ohdr := http.Header{"Cookie": {"apelora_session=" + oc.Value}, "Origin": {e.Base}}
	var revokedWith int
	if code := wsInit(t, ws, ohdr, func(conn *websocket.Conn) {
		e.MustGQL(admin, `mutation { revokeIdentity(input: {name: "ops"}) { identity { name } } }`, nil)
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					revokedWith = ce.Code
				}
				return
			}
		}
	}); code != 0 || revokedWith != 4403 {
		t.Fatalf("websocket of a revoked identity's session: init %d, closed with %d, want 4403", code, revokedWith)
	}
	resp, body = consoleRequest(t, http.MethodGet, e.Base+"/api/v1/session", oc.Value, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "revoked") {
		t.Fatalf("session of a revoked identity: %d %s", resp.StatusCode, body)
	}

	// A session reaches its identity through the identities table: without the identity,
	// no session.
	c2 := signIn(t, e, admin)
	if _, err := e.DB.Store.Pool().Exec(context.Background(), `DELETE FROM identities WHERE name = 'admin'`); err != nil {
		t.Fatal(err)
	}
	resp, body = consoleRequest(t, http.MethodGet, e.Base+"/api/v1/session", c2.Value, "", "", nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "sign in again") {
		t.Fatalf("session of a removed identity: %d %s", resp.StatusCode, body)
	}
}

// newestSessionExpiry reads when the session signed in last expires.
func newestSessionExpiry(t *testing.T, e *producttest.Env) time.Time {
	t.Helper()
	var at time.Time
	if err := e.DB.Store.Pool().QueryRow(context.Background(), `SELECT expires_at FROM console_sessions ORDER BY id DESC LIMIT 1`).Scan(&at); err != nil {
		t.Fatalf("session expiry: %v", err)
	}
	return at
}

// wsInit opens a graphql-transport-ws socket with hdr, sends connection_init without a
// payload credential, and returns 0 when acknowledged (then calls then, if given, and
// returns the close code it ends with) or the close code it was refused with.
func wsInit(t *testing.T, url string, hdr http.Header, then func(*websocket.Conn)) int {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, _, err := d.Dial(url, hdr)
	if err != nil {
		t.Errorf("dial: %v", err)
		return -1
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}}); err != nil {
		t.Errorf("init: %v", err)
		return -1
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				return ce.Code
			}
			return -1
		}
		if bytes.Contains(msg, []byte(`"connection_ack"`)) {
			if then != nil {
				then(conn)
			}
			return 0
		}
	}
}
