package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/producttest"
	"github.com/gorilla/websocket"
)

// gqlBody is a GraphQL request body.
func gqlBody(query string, vars map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return b
}

// aliases repeats a registerMachine call n times under aliases, all sharing $d.
func aliases(n int) string {
	var q strings.Builder
	q.WriteString("mutation($d: String) {")
	for i := range n {
		fmt.Fprintf(&q, ` a%d: registerMachine(input: {name: "node-%d", provisioner: MANUAL, description: $d}) { __typename }`, i, i)
	}
	q.WriteString(" }")
	return q.String()
}

// Issue 8, failure 1: without a token, 50 aliases sharing a 200 KB variable grew the
// audit by 10 MB, a 4 MB description was stored whole, and 1,000 aliases wrote 1,000 rows.
func TestAnonymousCallsCannotFloodTheAudit(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	d200k := strings.Repeat("d", 200<<10)
	size := auditTableBytes(t, e)

	// 20 aliases (the most one operation may have), anonymous: one event for the request.
	before := lastAuditID(t, e)
	r := post(t, e, "", "application/json", gqlBody(aliases(20), map[string]any{"d": d200k}))
	if r.code(t) != "UNAUTHENTICATED" {
		t.Fatalf("20 anonymous aliases: %d %.300s", r.status, r.body)
	}
	rows := auditRowsAfter(t, e, before)
	if len(rows) != 1 || rows[0].action != "registerMachine" || rows[0].actor != "anonymous" || rows[0].outcome != "REFUSED" ||
		!strings.Contains(rows[0].details, `"calls": 20`) || rows[0].bytes > maxAuditRowBytes {
		t.Fatalf("20 anonymous aliases left %d events: %+v", len(rows), rows)
	}
	sum := sha256.Sum256([]byte(d200k))
	if !strings.Contains(rows[0].params, hex.EncodeToString(sum[:])) || !strings.Contains(rows[0].params, fmt.Sprintf(`"bytes": %d`, len(d200k))) {
		t.Fatalf("the 200 KB value is not kept as its length and SHA-256: %.500s", rows[0].params)
	}

	// 50 aliases: refused before running, still one event.
	before = lastAuditID(t, e)
	r = post(t, e, "", "application/json", gqlBody(aliases(50), map[string]any{"d": d200k}))
	if r.status != http.StatusUnprocessableEntity || r.code(t) != "INVALID_INPUT" || !strings.Contains(r.errors(t)[0].Message, "50 root fields") {
		t.Fatalf("50 aliases: %d %.300s", r.status, r.body)
	}
	if rows = auditRowsAfter(t, e, before); len(rows) != 1 || rows[0].action != "registerMachine" || !strings.Contains(rows[0].details, `"calls": 50`) {
		t.Fatalf("50 aliases left %d events: %+v", len(rows), rows)
	}

	// 1,000 aliases, anonymous and with a token.
	manager := e.Identity("manager", identity.ManageInfrastructure)
	for _, token := range []string{"", manager} {
		before = lastAuditID(t, e)
		r = post(t, e, token, "application/json", gqlBody(aliases(1000), nil))
		if r.code(t) != "INVALID_INPUT" || !strings.Contains(r.errors(t)[0].Message, "more than the 20 allowed") {
			t.Fatalf("1,000 aliases: %d %.300s", r.status, r.body)
		}
		if rows = auditRowsAfter(t, e, before); len(rows) != 1 || !strings.Contains(rows[0].details, `"calls": 1000`) || rows[0].bytes > maxAuditRowBytes {
			t.Fatalf("1,000 aliases left %d events: %+v", len(rows), rows)
		}
	}

	// A 4 MB description: refused unread, one bounded event naming the caller.
	for _, c := range []struct{ token, actor string }{{"", "anonymous"}, {manager, "manager"}} {
		before = lastAuditID(t, e)
		r = post(t, e, c.token, "application/json", gqlBody(registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL", "description": strings.Repeat("x", 4<<20)}}))
		if r.status != http.StatusRequestEntityTooLarge || r.code(t) != "REQUEST_TOO_LARGE" {
			t.Fatalf("4 MB description: %d %.300s", r.status, r.body)
		}
		if rows = auditRowsAfter(t, e, before); len(rows) != 1 || rows[0].action != server.RejectedRequest || rows[0].actor != c.actor || rows[0].bytes > maxAuditRowBytes {
			t.Fatalf("4 MB description left %+v", rows)
		}
	}

	growth := auditTableBytes(t, e) - size
	t.Logf("audit_events grew by %d KiB for 6 requests carrying 8.6 MB", growth>>10)
	if growth > 6*maxAuditRowBytes+256<<10 {
		t.Fatalf("audit_events grew by %d bytes", growth)
	}
}

// Issue 8, failure 2: a NUL byte made the audit insert fail, so the call left no trace.
func TestNULBytesAreAuditedEscaped(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	for _, c := range []struct{ token, actor, outcome, code string }{{"", "anonymous", "REFUSED", "UNAUTHENTICATED"}, {manager, "manager", "REFUSED", "INVALID_INPUT"}} {
		for _, input := range []map[string]any{
			{"name": "node\x00-1", "provisioner": "MANUAL"},
			{"name": "node-1", "provisioner": "MANUAL", "description": "rack\x003"},
		} {
			before := lastAuditID(t, e)
			r := e.GQL(c.token, registerQuery, map[string]any{"input": input})
			if r.Code() != c.code {
				t.Fatalf("%v: %+v", input, r.Errors)
			}
			rows := auditRowsAfter(t, e, before)
			if len(rows) != 1 || rows[0].actor != c.actor || rows[0].outcome != c.outcome || !strings.Contains(rows[0].params, `"escaped": true`) || !strings.Contains(rows[0].params, `\\x00`) {
				t.Fatalf("%v left %+v", input, rows)
			}
		}
	}
	if strings.Contains(e.Logs.String(), "could not write audit event") {
		t.Fatal("an audit event could not be written")
	}
	// The trail finds them by the name as it was sent.
	page := e.MustGQL(manager, `query($m: String) { auditEvents(machine: $m) { edges { node { machine actor } } } }`, map[string]any{"m": "node\x00-1"})
	if got := fmt.Sprint(page["auditEvents"]); got != `map[edges:[map[node:map[actor:manager machine:node\x00-1]] map[node:map[actor:anonymous machine:node\x00-1]]]]` {
		t.Fatalf("auditEvents(machine: NUL name) = %s", got)
	}
}

// Issue 8, failure 3: an 8 MB systemId was echoed whole and stored twice.
func TestLargeValuesAreNeitherEchoedNorStoredWhole(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	r := post(t, e, manager, "application/json", gqlBody(registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MAAS", "maasSystemId": strings.Repeat("s", 8<<20)}}))
	if r.status != http.StatusRequestEntityTooLarge || r.code(t) != "REQUEST_TOO_LARGE" || len(r.body) > 1024 {
		t.Fatalf("8 MB systemId: %d %.300s", r.status, r.body)
	}
	// The largest value that fits in a request: refused with a short quote, stored as
	// its start, length and SHA-256.
	id := strings.Repeat("s", server.MaxBodyBytes-4<<10)
	before := lastAuditID(t, e)
	r = post(t, e, manager, "application/json", gqlBody(registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MAAS", "maasSystemId": id}}))
	errs := r.errors(t)
	if r.code(t) != "INVALID_INPUT" || errs[0].Extensions["field"] != "maasSystemId" || len(errs[0].Message) > 300 || strings.Contains(errs[0].Message, strings.Repeat("s", apperr.QuoteLimit+1)) {
		t.Fatalf("1 MB systemId: %d %.500s", r.status, r.body)
	}
	rows := auditRowsAfter(t, e, before)
	sum := sha256.Sum256([]byte(id))
	if len(rows) != 1 || rows[0].bytes > maxAuditRowBytes || !strings.Contains(rows[0].params, hex.EncodeToString(sum[:])) || len(rows[0].errText) > 300 {
		t.Fatalf("1 MB systemId left %+v", rows)
	}
	// Chunked, with no length announced: cut at the limit while reading.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"query": "`))
		for range 3 << 10 {
			if _, err := pw.Write(bytes.Repeat([]byte("q"), 1<<10)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, e.Base+"/graphql", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 3 MiB body: %d", resp.StatusCode)
	}
}

// Issue 8, failure 3: a body sent at 1 byte every 5 s held a connection for 75 s. Now the
// connection is answered 408 and closed once the body read timeout passes, while
// websockets (hijacked connections of the same server) keep working past it.
func TestSlowBodiesAreCutOffAndWebsocketsAreNot(t *testing.T) {
	parallel(t, lasts(11))
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws, err := client.NewWebSocket(e.Base+"/graphql", manager)
	if err != nil {
		t.Fatal(err)
	}
	wsErrs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	machine := "node-1"
	events, _, err := client.AuditEventRecorded(ctx, ws, &machine, nil)
	if err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hconn, err := net.Dial("tcp", strings.TrimPrefix(e.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	start := time.Now()
	fmt.Fprintf(hconn, "POST /graphql HTTP/1.1\r\nHost: x\r\n")
	hconn.SetReadDeadline(start.Add(server.HeaderReadTimeout + 20*time.Second))
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	closed := make(chan string, 1)
	go func() {
		// The client keeps dribbling; the server must answer and close regardless.
		for {
			time.Sleep(5 * time.Second)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			closed <- "no answer: " + err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		// After the answer the server closes the connection: the next read sees EOF (or a
		// reset, when a dribbled byte arrived after the close).
		_, err = conn.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			err = io.EOF
		}
		closed <- fmt.Sprintf("%d %s %v", resp.StatusCode, body, err)
	}()
	select {
	case got := <-closed:
		if !strings.HasPrefix(got, "408 ") || !strings.Contains(got, "INVALID_INPUT") || !strings.HasSuffix(got, "EOF") {
			t.Fatalf("slow body answered: %s", got)
		}
	case <-time.After(server.BodyReadTimeout + 20*time.Second):
		t.Fatal("the slow body still holds its connection")
	}
	t.Logf("slow body cut off after %s", time.Since(start).Round(time.Second))
	if since := time.Since(start); since < server.BodyReadTimeout-time.Second {
		t.Fatalf("cut off after %s, before the body read timeout", since)
	}

	// Slow headers (sent at the same time) are cut off too.
	if _, err := io.ReadAll(hconn); err != nil {
		t.Fatalf("slow headers: the connection was not closed: %v", err)
	}

	// The websocket opened before is still served, past the body read timeout.
	e.MustGQL(manager, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	select {
	case ev := <-events:
		if ev.Errors != nil || ev.Data.AuditEventRecorded.Action != "registerMachine" {
			t.Fatalf("event %+v", ev)
		}
	case err := <-wsErrs:
		t.Fatalf("websocket ended: %v", err)
	case <-ctx.Done():
		t.Fatal("no event on the websocket")
	}
	if got := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND details->>'status' = '408'`, server.RejectedRequest); got != int64(1) {
		t.Fatalf("%v audit events for the slow body", got)
	}
}

// Issue 8, failure 3: a subscription sent over POST waited for the next event.
func TestSubscriptionOverPOSTIsRefusedAtOnce(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	done := make(chan *producttest.Response, 1)
	go func() { done <- e.GQL(viewer, `subscription { auditEventRecorded { id } }`, nil) }()
	select {
	case r := <-done:
		if r.Code() != "INVALID_INPUT" || !strings.Contains(r.Errors[0].Message, "websocket") {
			t.Fatalf("subscription over POST: %d %+v", r.Status, r.Errors)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a subscription over POST still waits for an event")
	}
}

// Issue 8, failure 6: every error carries a documented code, including the transport's
// and GraphQL's own, with messages that say what to fix.
func TestEveryRefusalCarriesADocumentedCode(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	cases := []struct {
		name, contentType string
		body              string
		status            int
		says              string
	}{
		{"malformed JSON", "application/json", `{"query": "{ viewer { name } }"`, 400, "not valid JSON"},
		{"a batch", "application/json", `[{"query": "{ viewer { name } }"}]`, 400, "batch"},
		{"a form body", "application/x-www-form-urlencoded", `query=%7B+viewer+%7B+name+%7D+%7D`, 415, "application/json"},
		{"no query", "application/json", `{"variables": {}}`, 400, `no "query"`},
		{"variables not an object", "application/json", `{"query": "{ viewer { name } }", "variables": [1]}`, 400, `"variables" must be a JSON object`},
		{"a JSON string", "application/json", `"{ viewer { name } }"`, 400, "not a JSON object"},
		{"does not parse", "application/json", `{"query": "{ viewer { name "}`, 422, "does not parse: Expected Name, found <EOF> (line 1"},
		{"unknown field", "application/json", `{"query": "{ viewer { nickname } }"}`, 422, `the query is not valid: Cannot query field "nickname"`},
		{"missing variable", "application/json", `{"query": "mutation($input: RegisterMachineInput!) { registerMachine(input: $input) { __typename } }"}`, 422, "variable $input is missing: give it a value"},
		{"missing input field", "application/json", `{"query": "mutation($input: RegisterMachineInput!) { registerMachine(input: $input) { __typename } }", "variables": {"input": {"provisioner": "MANUAL"}}}`, 422, "variable $input.name is missing: give it a value"},
		{"several operations, none named", "application/json", `{"query": "query A { viewer { name } } query B { viewer { name } }"}`, 422, "name the one to run in operationName"},
		{"unknown operation name", "application/json", `{"query": "query A { viewer { name } }", "operationName": "B"}`, 422, `no operation named "B"`},
		{"too complex", "application/json", `{"query": "{ machines { ` + strings.Repeat("name ", 1) + complexAliases(2100) + ` } }"}`, 422, "too much at once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, e, manager, c.contentType, []byte(c.body))
			errs := r.errors(t)
			if r.status != c.status || len(errs) != 1 || errs[0].Extensions["code"] != "INVALID_INPUT" || !strings.Contains(errs[0].Message, c.says) {
				t.Fatalf("%d %s; want %d INVALID_INPUT saying %q", r.status, r.body, c.status, c.says)
			}
			if strings.Contains(errs[0].Message, c.body) && len(c.body) > 40 {
				t.Fatalf("the message echoes the body: %s", errs[0].Message)
			}
		})
	}
	resp, err := http.Get(e.Base + "/graphql")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "INVALID_INPUT") {
		t.Fatalf("GET /graphql: %d %s", resp.StatusCode, body)
	}
}

func complexAliases(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "n%d: name ", i)
	}
	return b.String()
}

// Failed authentication is limited per client address: past the burst, 429 with a
// Retry-After before any GraphQL work, one audit event per address per window, other
// addresses and valid tokens unaffected.
func TestFailedAuthenticationIsRateLimitedPerAddress(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithAuthFailureLimit(server.DefaultAuthFailureLimit))
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
	}
	send := func(c *http.Client, token, query string, header ...string) rawResponse {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.Base+"/graphql", bytes.NewReader(gqlBody(query, nil)))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return rawResponse{status: resp.StatusCode, header: resp.Header, body: raw}
	}
	attacker, neighbour := from("127.0.0.77"), from("127.0.0.78")
	before := lastAuditID(t, e)
	mutation := `mutation { unregisterMachine(input: {name: "node-1"}) { name } }`
	burst := server.DefaultAuthFailureLimit.Burst
	for i := range burst {
		token := ""
		if i%2 == 1 {
			token = "apl_guessed"
		}
		if r := send(attacker, token, mutation); r.code(t) != "UNAUTHENTICATED" {
			t.Fatalf("try %d: %d %s", i, r.status, r.body)
		}
	}
	for i := range 5 {
		// An Upgrade header does not make a POST a websocket: it is limited all the same.
		r := send(attacker, "apl_guessed", mutation, "Upgrade", []string{"websocket", "h2c"}[i%2])
		if r.status != http.StatusTooManyRequests || r.code(t) != "RATE_LIMITED" || r.header.Get("Retry-After") == "" {
			t.Fatalf("try %d past the burst: %d %v %s", burst+i, r.status, r.header, r.body)
		}
	}
	rows := auditRowsAfter(t, e, before)
	limited := 0
	for _, row := range rows {
		if row.action == server.RateLimited {
			limited++
			if !strings.Contains(row.details, `"address": "127.0.0.77"`) || row.outcome != "REFUSED" {
				t.Fatalf("rate-limit event %+v", row)
			}
		}
	}
	if len(rows) != burst+1 || limited != 1 {
		t.Fatalf("%d audit events (%d rate-limit events) for %d refused calls and 5 limited ones", len(rows), limited, burst)
	}
	if r := send(attacker, viewer, `{ viewer { name } }`); r.status != http.StatusOK || r.code(t) != "" {
		t.Fatalf("a valid token from a limited address: %d %s", r.status, r.body)
	}
	if r := send(neighbour, "", `{ viewer { name } }`); r.code(t) != "UNAUTHENTICATED" {
		t.Fatalf("another address: %d %s", r.status, r.body)
	}
}

// A websocket whose connection_init fails to authenticate spends a try of its address as
// a refused request does: past the burst it is closed with 4429 and the limit's message
// (graphql-ws clients stop on it), one audit event per window, and a valid token from the
// same address is still acknowledged.
func TestFailedWebsocketAuthenticationIsRateLimitedPerAddress(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithAuthFailureLimit(server.DefaultAuthFailureLimit))
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	url := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"},
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.79")}}).DialContext}
	initWith := func(token string) (code int, reason string) {
		t.Helper()
		conn, _, err := d.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, msg, err := conn.ReadMessage()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Text
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if bytes.Contains(msg, []byte(`"connection_ack"`)) {
				return 0, ""
			}
		}
	}
	before := lastAuditID(t, e)
	for i := range server.DefaultAuthFailureLimit.Burst {
		if code, reason := initWith("apl_guessed"); code != 4403 {
			t.Fatalf("try %d: closed with %d %q, want 4403", i, code, reason)
		}
	}
	for i := range 3 {
		code, reason := initWith("apl_guessed")
		if code != 4429 || !strings.HasPrefix(reason, "RATE_LIMITED: too many failed authentications; retry in ") || !strings.HasSuffix(reason, " with a valid token") {
			t.Fatalf("try %d past the burst: closed with %d %q, want 4429 and the limit", i, code, reason)
		}
	}
	if code, reason := initWith(viewer); code != 0 {
		t.Fatalf("a valid token from a limited address: closed with %d %q", code, reason)
	}
	limited := 0
	for _, row := range auditRowsAfter(t, e, before) {
		if row.action != server.RateLimited || !strings.Contains(row.details, `"address": "127.0.0.79"`) {
			t.Fatalf("unexpected audit event %+v", row)
		}
		limited++
	}
	if limited != 1 {
		t.Fatalf("%d rate-limit audit events for one window, want 1", limited)
	}
}

// Console sign-in is limited per address as /graphql is: 200 wrong tokens from one address
// get the burst's refusals, then 429 RATE_LIMITED with Retry-After; the audit holds one
// signInFailed event and one rateLimited event for the address, never a token; a valid
// token from the same address still signs in, another address is not limited, and a
// session cookie that does not authenticate spends a try like a wrong token.
func TestConsoleSignInIsRateLimitedPerAddress(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithAuthFailureLimit(server.DefaultAuthFailureLimit))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 30 * time.Second}
	}
	type answer struct {
		status int
		header http.Header
		code   string
	}
	send := func(c *http.Client, method, body, cookie string) answer {
		t.Helper()
		req, _ := http.NewRequest(method, e.Base+"/api/v1/session", strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: server.SessionCookie, Value: cookie})
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return answer{resp.StatusCode, resp.Header, out.Error.Code}
	}
	attacker, neighbour := from("127.0.0.81"), from("127.0.0.82")
	before := lastAuditID(t, e)
	burst := server.DefaultAuthFailureLimit.Burst
	limited := 0
	for i := range 200 {
		a := send(attacker, http.MethodPost, fmt.Sprintf(`{"token":"apl_guess%03d"}`, i), "")
		switch {
		case i < burst && a.status == http.StatusUnauthorized && a.code == "UNAUTHENTICATED":
		case i >= burst && a.status == http.StatusTooManyRequests && a.code == "RATE_LIMITED" && a.header.Get("Retry-After") != "":
			limited++
		default:
			t.Fatalf("sign-in %d: %d %s", i, a.status, a.code)
		}
	}
	if limited != 200-burst {
		t.Fatalf("%d of %d sign-ins past the burst were limited", limited, 200-burst)
	}
	// A cookie that authenticates nothing spends a try too (the address is out of them).
	if a := send(attacker, http.MethodGet, "", "forged-session-value"); a.status != http.StatusTooManyRequests {
		t.Fatalf("a forged session cookie from a limited address: %d %s", a.status, a.code)
	}
	// No cookie at all is no failed authentication: the sign-in page asks this first.
	if a := send(neighbour, http.MethodGet, "", ""); a.status != http.StatusOK {
		t.Fatalf("no cookie: %d %s", a.status, a.code)
	}
	if a := send(attacker, http.MethodPost, `{"token":"`+admin+`"}`, ""); a.status != http.StatusCreated {
		t.Fatalf("a valid token from a limited address: %d %s", a.status, a.code)
	}
	if a := send(neighbour, http.MethodPost, `{"token":"apl_other"}`, ""); a.code != "UNAUTHENTICATED" {
		t.Fatalf("another address: %d %s", a.status, a.code)
	}
	rows := auditRowsAfter(t, e, before)
	counts := map[string]int{}
	for _, row := range rows {
		counts[row.action+" "+row.outcome]++
		if text := row.params + row.details + row.errText; strings.Contains(text, "apl_guess") || strings.Contains(text, "apl_other") || strings.Contains(text, admin) {
			t.Fatalf("a token in the audit: %+v", row)
		}
		if row.action == server.SignInFailed && !strings.Contains(row.details, `"address": "127.0.0.8`) {
			t.Fatalf("sign-in event without its address: %+v", row)
		}
	}
	// The attacker: one signInFailed, one rateLimited; the neighbour: one signInFailed.
	if counts[server.SignInFailed+" REFUSED"] != 2 || counts[server.RateLimited+" REFUSED"] != 1 || len(rows) != 3 {
		t.Fatalf("audit events for 203 failed sign-ins from two addresses: %v", counts)
	}
}

// A websocket message over the 1 MiB limit ends the socket with 1009 (Message Too Big),
// however large it is and however fast it comes: issue 25 saw 1006, the server dropping
// the connection under a message still arriving, so the client never read the close frame.
// Smaller messages on the same server are still served.
func TestOversizedWebsocketMessageClosesWith1009(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	url := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	for _, size := range []int{1<<20 + 1, 4 << 20, 16 << 20} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			conn, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Sec-WebSocket-Protocol": {"graphql-transport-ws"}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + viewer}}); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, msg, err := conn.ReadMessage(); err != nil || !bytes.Contains(msg, []byte("connection_ack")) {
				t.Fatalf("no ack: %s %v", msg, err)
			}
			// Sent as a stream of fragments, as a client writing a large message does: the
			// server sees the limit passed while the rest is still coming. It must read the
			// rest (and drop it) before it closes: a connection closed with unread data is
			// reset, the client's writes fail, and a client such as Node's ws or a browser
			// reports 1006 without reading the close frame.
			w, err := conn.NextWriter(websocket.TextMessage)
			if err != nil {
				t.Fatal(err)
			}
			chunk := bytes.Repeat([]byte("a"), 64<<10)
			_, werr := w.Write([]byte(`{"type":"ping","payload":{"x":"`))
			for sent := 0; sent < size && werr == nil; sent += len(chunk) {
				_, werr = w.Write(chunk)
			}
			if werr == nil {
				_, werr = w.Write([]byte(`"}}`))
			}
			if werr == nil {
				werr = w.Close()
			}
			if werr != nil {
				t.Errorf("writing the message failed (the server reset the connection): %v", werr)
			}
			for {
				_, _, err := conn.ReadMessage()
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					if ce.Code != websocket.CloseMessageTooBig {
						t.Fatalf("closed with %d %q, want 1009", ce.Code, ce.Text)
					}
					return
				}
				if err != nil {
					t.Fatalf("the socket ended without a close frame (the client sees 1006): %v", err)
				}
			}
		})
	}
	if r := e.GQL(viewer, `{ viewer { name } }`, nil); r.Code() != "" {
		t.Fatalf("the server after the oversized messages: %+v", r.Errors)
	}
}

// Issue 25: a flood of failed sign-ins from 2,000 addresses wrote 2,000 audit events, and
// the 429 event said 1 refusal for 290. Now, from 2,000 real loopback addresses (each one
// wrong token, then one request past its only try): per window, at most
// server.RefusalRowsPerWindow events of their own per action at once and one per key or one
// summary at the window's end, and the counts of the events add up to every refusal.
func TestRefusalFloodIsBoundedPerWindowWithTrueCounts(t *testing.T) {
	parallel(t, lasts(11))
	const addresses = 2000
	const window = 10 * time.Second
	e := producttest.Start(t, producttest.WithAuthFailureLimit(server.RateLimit{Burst: 1, Every: time.Hour}), producttest.WithRefusalWindow(window))
	before := lastAuditID(t, e)
	start := time.Now()
	send := func(ip string) int {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 30 * time.Second}
		req, _ := http.NewRequest(http.MethodPost, e.Base+"/api/v1/session", strings.NewReader(`{"token":"apl_flood"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ip := range work {
				if st := send(ip); st != http.StatusUnauthorized {
					t.Errorf("%s's first wrong token: %d, want 401", ip, st)
				}
				if st := send(ip); st != http.StatusTooManyRequests {
					t.Errorf("%s past its only try: %d, want 429", ip, st)
				}
			}
		}()
	}
	for i := range addresses {
		work <- fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		return
	}

	// The window's last events come at its end: wait for every refusal to be counted.
	type tally struct{ events, counted, summaries int }
	read := func() map[string]*tally {
		got := map[string]*tally{server.SignInFailed: {}, server.RateLimited: {}}
		for _, row := range auditRowsAfter(t, e, before) {
			tl := got[row.action]
			if tl == nil || row.outcome != "REFUSED" || row.bytes > maxAuditRowBytes {
				t.Fatalf("unexpected event %+v", row)
			}
			var d struct {
				Failed, Refused, Addresses int
				Window                     string
			}
			if err := json.Unmarshal([]byte(row.details), &d); err != nil || d.Window != window.String() {
				t.Fatalf("event details %s: %v", row.details, err)
			}
			tl.events++
			tl.counted += d.Failed + d.Refused
			if d.Addresses > 0 {
				tl.summaries++
			}
		}
		return got
	}
	var got map[string]*tally
	for deadline := time.Now().Add(3 * window); ; time.Sleep(200 * time.Millisecond) {
		got = read()
		if got[server.SignInFailed].counted >= addresses && got[server.RateLimited].counted >= addresses || time.Now().After(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	windows := int(elapsed/window) + 2 // the windows the flood and the wait can have touched
	for action, tl := range got {
		t.Logf("%s: %d events (%d summaries) for %d refusals over %s", action, tl.events, tl.summaries, tl.counted, elapsed.Round(time.Second))
		if tl.counted != addresses {
			t.Errorf("%s: the events count %d refusals, want %d", action, tl.counted, addresses)
		}
		if most := windows * 2 * server.RefusalRowsPerWindow; tl.events > most || tl.summaries == 0 {
			t.Errorf("%s: %d events (%d summaries) over %d windows, want at most %d and a summary", action, tl.events, tl.summaries, windows, most)
		}
	}
	// Each address's own events name it; a summary lists the addresses with the most.
	if got := e.Scalar(`SELECT count(*) FROM audit_events WHERE id > $1 AND details ? 'most' AND jsonb_array_length(details->'most') = 10`, before); got.(int64) < 2 {
		t.Errorf("%v summaries list ten addresses", got)
	}
}
