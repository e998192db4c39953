package graphqlws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/internal/apperr"
)

const eventsQuery = `subscription($t: String!) { events(topic: $t) }`

func TestProtocolViolationsCloseWithTheirCodes(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.InitTimeout = 200 * time.Millisecond })
	init := map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer reader"}}
	cases := []struct {
		name   string
		do     func(c *client)
		code   int
		reason string
	}{
		{"subscribe before connection_ack", func(c *client) { c.subscribe("1", eventsQuery, map[string]any{"t": "a"}) }, 4401, "Unauthorized"},
		{"a second connection_init", func(c *client) { c.send(init); c.read(); c.send(init) }, 4429, "Too many initialisation requests"},
		{"no connection_init in time", func(c *client) {}, 4408, "Connection initialisation timeout"},
		{"a refused token", func(c *client) {
			c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer wrong"}})
		}, 4403, "Forbidden"},
		{"no token", func(c *client) { c.send(map[string]any{"type": "connection_init"}) }, 4403, "Forbidden"},
		{"an unknown message type", func(c *client) { c.send(init); c.read(); c.sendRaw(`{"type":"start","id":"1"}`) }, 4400, ""},
		{"a server's message type", func(c *client) { c.send(init); c.read(); c.sendRaw(`{"type":"next","id":"1","payload":{}}`) }, 4400, ""},
		{"not JSON", func(c *client) { c.sendRaw("\x00\xff{") }, 4400, ""},
		{"no type", func(c *client) { c.sendRaw(`{"id":"1"}`) }, 4400, ""},
		{"a binary message", func(c *client) { c.conn.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"ping"}`)) }, 4400, ""},
		{"a number as id", func(c *client) {
			c.send(init)
			c.read()
			c.sendRaw(`{"type":"subscribe","id":1,"payload":{"query":"{hello}"}}`)
		}, 4400, ""},
		{"an empty id", func(c *client) {
			c.send(init)
			c.read()
			c.sendRaw(`{"type":"subscribe","id":"","payload":{"query":"{hello}"}}`)
		}, 4400, ""},
		{"no query", func(c *client) { c.send(init); c.read(); c.sendRaw(`{"type":"subscribe","id":"1","payload":{}}`) }, 4400, ""},
		{"variables that are not an object", func(c *client) {
			c.send(init)
			c.read()
			c.sendRaw(`{"type":"subscribe","id":"1","payload":{"query":"{hello}","variables":[1]}}`)
		}, 4400, ""},
		{"a ping payload that is not an object", func(c *client) { c.sendRaw(`{"type":"ping","payload":"x"}`) }, 4400, ""},
		{"a complete without id", func(c *client) { c.send(init); c.read(); c.sendRaw(`{"type":"complete"}`) }, 4400, ""},
		{"a duplicate subscription id", func(c *client) {
			c.send(init)
			c.read()
			c.subscribe("dup", eventsQuery, map[string]any{"t": "dup"})
			c.subscribe("dup", eventsQuery, map[string]any{"t": "dup"})
		}, 4409, "Subscriber for dup already exists"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial(nil)
			c.t = t
			tc.do(c)
			code, reason, _ := c.closed(10 * time.Second)
			if code != tc.code || (tc.reason != "" && reason != tc.reason) {
				t.Fatalf("closed with %d %q, want %d %q", code, reason, tc.code, tc.reason)
			}
		})
	}
	t.Run("no subprotocol", func(t *testing.T) {
		c := e.dial(nil, "graphql-ws")
		c.t = t
		if code, _, _ := c.closed(10 * time.Second); code != 4406 {
			t.Fatalf("closed with %d, want 4406", code)
		}
	})
	t.Run("a message over the size limit", func(t *testing.T) {
		c := e.connect("reader")
		c.t = t
		c.sendRaw(`{"type":"ping","payload":{"x":"` + strings.Repeat("a", readLimit) + `"}}`)
		if code, _, _ := c.closed(10 * time.Second); code != websocket.CloseMessageTooBig {
			t.Fatalf("closed with %d, want %d", code, websocket.CloseMessageTooBig)
		}
	})
}

func TestPingIsAnsweredAndUnknownCompletesAreIgnored(t *testing.T) {
	e := newEnv(t)
	c := e.connect("reader")
	c.sendRaw(`{"type":"ping","payload":{"n":7}}`)
	if m := c.read(); m.Type != "pong" || string(m.Payload) != `{"n":7}` {
		t.Fatalf("got %s, want a pong with the ping's payload", m.raw)
	}
	c.sendRaw(`{"type":"ping"}`)
	if m := c.read(); m.Type != "pong" || m.Payload != nil {
		t.Fatalf("got %s, want a bare pong", m.raw)
	}
	c.sendRaw(`{"type":"complete","id":"never-started"}`)
	c.sendRaw(`{"type":"pong"}`) // an unsolicited pong is allowed
	c.subscribe("q", `{ hello }`, nil)
	if v := c.expectNext("q"); v != "world" {
		t.Fatalf("hello = %q", v)
	}
	c.expectComplete("q")
}

func TestKeepAlivePingsAndAClientThatNeverAnswersIsDropped(t *testing.T) {
	const interval = 50 * time.Millisecond
	e := newEnv(t, func(o *Options) { o.PingInterval = interval })
	answering := e.connect("reader")
	// The answering client answers every ping, as graphql-ws does, and passes the rest on.
	others := make(chan serverMsg, 16)
	pings := make(chan struct{}, 1024)
	go func() {
		defer close(others)
		for {
			m, err := answering.next(time.Minute)
			if err != nil {
				return
			}
			if m.Type == "ping" {
				answering.conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`))
				pings <- struct{}{}
				continue
			}
			others <- m
		}
	}()
	silent := e.connect("reader2")
	start := time.Now()
	code, reason, before := silent.closed(10 * time.Second)
	silentPings := 0
	for _, m := range before {
		if m.Type == "ping" {
			silentPings++
		}
	}
	if code != 1013 || silentPings != 2 {
		t.Fatalf("silent client: closed with %d %q after %d pings, want 1013 after 2", code, reason, silentPings)
	}
	if d := time.Since(start); d < 2*interval {
		t.Fatalf("dropped after %v, before two ping periods", d)
	}
	// The answering client is still there many periods later, and still served.
	for range 20 {
		select {
		case <-pings:
		case m := <-others:
			t.Fatalf("answering client got %s", m.raw)
		case <-time.After(10 * time.Second):
			t.Fatal("no ping for 10 s")
		}
	}
	answering.subscribe("q", `{ hello }`, nil)
	if m := <-others; m.Type != "next" || m.ID != "q" {
		t.Fatalf("got %s", m.raw)
	}
}

func TestSubscribersOfTheSameStreamShareOneExecutionAndOnePayload(t *testing.T) {
	e := newEnv(t)
	a, b, other := e.connect("reader"), e.connect("reader2"), e.connect("reader")
	a.subscribe("1", eventsQuery, map[string]any{"t": "news"})
	b.subscribe("b-7", eventsQuery, map[string]any{"t": "news"})
	// Same field and topic, other query text: a stream of its own.
	other.subscribe("x", `subscription { events(topic: "news") }`, nil)
	waitFor(t, "three subscriptions", func() bool { _, n := e.feed.executions("news"); return n == 2 })
	// The one shared execution runs as the socket that started it.
	time.Sleep(50 * time.Millisecond)
	if started, _ := e.feed.executions("news"); started != 2 {
		t.Fatalf("%d executions for 3 subscribers of 2 distinct operations", started)
	}
	for i := range 3 {
		v := fmt.Sprintf("v%d", i)
		e.feed.publish("news", v)
		ma, mb := a.read(), b.read()
		if ma.ID != "1" || mb.ID != "b-7" || ma.Type != "next" || mb.Type != "next" {
			t.Fatalf("got %s and %s", ma.raw, mb.raw)
		}
		if !bytes.Equal(ma.Payload, mb.Payload) || !strings.Contains(string(ma.Payload), v) {
			t.Fatalf("payloads differ or lack %s: %s / %s", v, ma.Payload, mb.Payload)
		}
		if got := other.expectNext("x"); got != v {
			t.Fatalf("other got %q", got)
		}
	}
	// Other variables: another execution.
	a.subscribe("2", eventsQuery, map[string]any{"t": "sport"})
	waitFor(t, "the sport stream", func() bool { s, _ := e.feed.executions("sport"); return s == 1 })

	// A client's complete ends only its own subscription; the last one out ends the
	// execution.
	b.send(map[string]any{"id": "b-7", "type": "complete"})
	time.Sleep(20 * time.Millisecond)
	e.feed.publish("news", "after-b")
	if got := a.expectNext("1"); got != "after-b" {
		t.Fatalf("a got %q", got)
	}
	a.send(map[string]any{"id": "1", "type": "complete"})
	waitFor(t, "the shared execution to end with its last subscriber", func() bool { _, n := e.feed.executions("news"); return n == 1 })
	e.feed.publish("sport", "goal")
	if got := a.expectNext("2"); got != "goal" {
		t.Fatalf("a got %q", got)
	}
	b.subscribe("q", `{ hello }`, nil)
	if m := b.read(); m.ID != "q" {
		t.Fatalf("b got %s after completing b-7: a message for a completed subscription", m.raw)
	}
}

func TestAReplayArgumentGivesEachSubscriberItsOwnStream(t *testing.T) {
	e := newEnv(t)
	for _, v := range []string{"e1", "e2", "e3"} {
		e.feed.publish("log", v)
	}
	q := `subscription($t: String!, $a: Int) { events(topic: $t, after: $a) }`
	early := e.connect("reader")
	early.subscribe("1", q, map[string]any{"t": "log", "a": 1})
	for _, want := range []string{"e2", "e3"} {
		if got := early.expectNext("1"); got != want {
			t.Fatalf("early replay: got %q, want %q", got, want)
		}
	}
	e.feed.publish("log", "e4")
	if got := early.expectNext("1"); got != "e4" {
		t.Fatalf("early live: %q", got)
	}
	// Same query and variables, later: its replay is its own, from the same point, with
	// no gap and no repeat.
	late := e.connect("reader2")
	late.subscribe("1", q, map[string]any{"t": "log", "a": 1})
	for _, want := range []string{"e2", "e3", "e4"} {
		if got := late.expectNext("1"); got != want {
			t.Fatalf("late replay: got %q, want %q", got, want)
		}
	}
	e.feed.publish("log", "e5")
	if a, b := early.expectNext("1"), late.expectNext("1"); a != "e5" || b != "e5" {
		t.Fatalf("live after both: %q %q", a, b)
	}
	if started, _ := e.feed.executions("log"); started != 2 {
		t.Fatalf("%d executions, want one per subscriber with a replay point", started)
	}
}

func TestTheServersCompleteAndErrorsReachEverySubscriber(t *testing.T) {
	e := newEnv(t)
	a, b := e.connect("reader"), e.connect("reader2")
	a.subscribe("1", eventsQuery, map[string]any{"t": "t"})
	b.subscribe("1", eventsQuery, map[string]any{"t": "t"})
	waitFor(t, "the stream", func() bool { _, n := e.feed.executions("t"); return n == 1 })
	time.Sleep(20 * time.Millisecond)
	e.feed.publish("t", "error:no such machine m9: register it first")
	for _, c := range []*client{a, b} {
		m := c.read()
		var p struct {
			Data   any `json:"data"`
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil || m.Type != "next" || len(p.Errors) != 1 ||
			p.Errors[0].Message != "no such machine m9: register it first" || p.Errors[0].Extensions["code"] != "NOT_FOUND" {
			t.Fatalf("got %s, want a next with the error and its code", m.raw)
		}
	}
	e.feed.end("t")
	a.expectComplete("1")
	b.expectComplete("1")

	// A panic while starting a stream is an `error` message, and the socket goes on.
	e.feed.fail["boom"] = "the resolver fell over"
	a.subscribe("2", eventsQuery, map[string]any{"t": "boom"})
	if m := a.read(); m.Type != "error" || m.ID != "2" {
		t.Fatalf("got %s, want an error for 2", m.raw)
	}
	// Invalid operations: an `error` message, not a closed socket.
	a.subscribe("3", `subscription { nosuchfield }`, nil)
	if m := a.read(); m.Type != "error" || m.ID != "3" || !strings.Contains(string(m.Payload), "nosuchfield") {
		t.Fatalf("got %s, want a validation error for 3", m.raw)
	}
	a.subscribe("4", `{ hello }`, nil)
	if v := a.expectNext("4"); v != "world" {
		t.Fatalf("after the errors: %q", v)
	}
}

func TestEachSubscriberIsAuthorisedOnItsOwnSocket(t *testing.T) {
	e := newEnv(t)
	reader, blind := e.connect("reader"), e.connect("blind")
	reader.subscribe("1", eventsQuery, map[string]any{"t": "secret"})
	waitFor(t, "the stream", func() bool { _, n := e.feed.executions("secret"); return n == 1 })
	// The same operation from a socket that may not read does not join the stream: it
	// runs on its own and the operation check refuses it.
	blind.subscribe("1", eventsQuery, map[string]any{"t": "secret"})
	m := blind.read()
	if m.Type != "next" || !strings.Contains(string(m.Payload), "FORBIDDEN") {
		t.Fatalf("blind got %s, want a next with FORBIDDEN", m.raw)
	}
	blind.expectComplete("1")
	e.feed.publish("secret", "s1")
	if got := reader.expectNext("1"); got != "s1" {
		t.Fatalf("reader got %q", got)
	}
	blind.subscribe("q", `{ hello }`, nil)
	if m := blind.read(); m.ID != "q" {
		t.Fatalf("blind received %s from the stream it was refused", m.raw)
	}
}

func TestASlowSubscriberIsDroppedWithoutHoldingUpTheOthers(t *testing.T) {
	e := newEnv(t)
	fast, slow := e.connect("reader"), e.connect("reader2")
	fast.subscribe("1", eventsQuery, map[string]any{"t": "big"})
	slow.subscribe("1", eventsQuery, map[string]any{"t": "big"})
	waitFor(t, "the stream", func() bool { _, n := e.feed.executions("big"); return n == 1 })
	time.Sleep(20 * time.Millisecond)
	// The slow client reads nothing: its socket's buffers fill, then its queue, and it
	// is dropped. The fast one receives everything meanwhile.
	big := strings.Repeat("z", 64<<10)
	const n = 400
	read := make(chan int, n)
	go func() {
		// At most 32 events ahead of the fast client: it keeps up with the stream.
		for i := range n {
			if i >= 32 {
				<-read
			}
			e.feed.publish("big", fmt.Sprintf("%d:%s", i, big))
		}
	}()
	for i := range n {
		got := fast.expectNext("1")
		if !strings.HasPrefix(got, fmt.Sprintf("%d:", i)) {
			t.Fatalf("fast client: event %d is %.10q", i, got)
		}
		read <- i
	}
	received := 0
	for {
		m, err := slow.next(10 * time.Second)
		if err != nil {
			// 1013 when the close frame still fit in its buffers, else the connection
			// was dropped.
			if ce, ok := err.(*websocket.CloseError); ok && ce.Code != 1013 && ce.Code != websocket.CloseAbnormalClosure {
				t.Fatalf("slow client closed with %d %q, want 1013", ce.Code, ce.Text)
			}
			break
		}
		if m.Type == "next" {
			received++
		}
	}
	if received >= n {
		t.Fatalf("the slow client received all %d events: it was waited for", received)
	}
	t.Logf("the slow client got %d of %d events before it was dropped", received, n)
}

func TestQueriesAndMutationsRunWithTheSocketsRequestIDAndIdentity(t *testing.T) {
	e := newEnv(t)
	c := e.dial(http.Header{"X-Test-Id": {"42"}})
	c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer reader"}})
	if m := c.read(); m.Type != "connection_ack" {
		t.Fatalf("got %s", m.raw)
	}
	c.subscribe("w", `query { whoami }`, nil)
	if got := c.expectNext("w"); got != "reader/rid-42" {
		t.Fatalf("whoami = %q, want the identity and request id of the socket", got)
	}
	c.expectComplete("w")
	c.subscribe("m", `mutation { touch }`, nil)
	if got := c.expectNext("m"); got != "touched" {
		t.Fatalf("touch = %q", got)
	}
	c.expectComplete("m")
}

func TestTooManyOperationsOnOneSocketAreRefusedOneByOne(t *testing.T) {
	e := newEnv(t)
	c := e.connect("reader")
	for i := range maxOperations {
		c.subscribe(fmt.Sprint(i), eventsQuery, map[string]any{"t": fmt.Sprint("t", i)})
	}
	c.subscribe("one-too-many", eventsQuery, map[string]any{"t": "x"})
	m := c.read()
	if m.Type != "error" || m.ID != "one-too-many" || !strings.Contains(string(m.Payload), "TOO_MANY_OPERATIONS") {
		t.Fatalf("got %s", m.raw)
	}
	c.send(map[string]any{"id": "0", "type": "complete"})
	waitFor(t, "subscription 0 to end", func() bool { _, n := e.feed.executions("t0"); return n == 0 })
	c.subscribe("room-again", `{ hello }`, nil)
	if v := c.expectNext("room-again"); v != "world" {
		t.Fatalf("got %q", v)
	}
}

// The contract with identity revocation: when the context Init returned ends with an
// UNAUTHENTICATED or FORBIDDEN *apperr.Error, the socket closes with 4403 and its message.
func TestARevokedIdentitysSocketClosesWith4403AndTheMessage(t *testing.T) {
	for _, code := range []apperr.Code{apperr.Unauthenticated, apperr.Forbidden} {
		t.Run(string(code), func(t *testing.T) {
			e := newEnv(t)
			c, other := e.connect("reader"), e.connect("reader2")
			c.subscribe("1", eventsQuery, map[string]any{"t": "t"})
			other.subscribe("1", eventsQuery, map[string]any{"t": "t"})
			waitFor(t, "the stream", func() bool { _, n := e.feed.executions("t"); return n == 1 })
			msg := "identity reader was revoked: ask an administrator for a new token"
			e.mu.Lock()
			e.revoke["reader"](fmt.Errorf("revocation: %w", apperr.New(code, "%s", msg)))
			e.mu.Unlock()
			if gotCode, reason, _ := c.closed(10 * time.Second); gotCode != 4403 || reason != msg {
				t.Fatalf("closed with %d %q, want 4403 %q", gotCode, reason, msg)
			}
			// The other identity's subscription to the same stream goes on.
			time.Sleep(20 * time.Millisecond)
			e.feed.publish("t", "still here")
			if got := other.expectNext("1"); got != "still here" {
				t.Fatalf("other got %q", got)
			}
		})
	}
	t.Run("a long message", func(t *testing.T) {
		e := newEnv(t)
		c := e.connect("reader")
		long := `identity "` + strings.Repeat("é", 60) + `" was revoked: its token no longer works; ask an administrator for a new identity`
		e.mu.Lock()
		e.revoke["reader"](apperr.New(apperr.Unauthenticated, "%s", long))
		e.mu.Unlock()
		code, reason, _ := c.closed(10 * time.Second)
		if code != 4403 || len(reason) > 123 || !utf8.ValidString(reason) || !strings.HasPrefix(reason, `identity "éé`) || !strings.HasSuffix(reason, "…") {
			t.Fatalf("closed with %d %q (%d bytes), want 4403 and the message cut to fit a close frame", code, reason, len(reason))
		}
	})
	for name, cause := range map[string]error{
		"no cause":               nil,
		"not an identity's end":  apperr.New(apperr.Unavailable, "database down"),
		"an error of some other": errors.New("plain"),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			c := e.connect("reader")
			e.mu.Lock()
			e.revoke["reader"](cause)
			e.mu.Unlock()
			if code, _, _ := c.closed(10 * time.Second); code != 1001 {
				t.Fatalf("closed with %d, want 1001", code)
			}
		})
	}
}

func TestShutdownClosesEverySocketAndEndsTheirStreams(t *testing.T) {
	e := newEnv(t)
	a, b := e.connect("reader"), e.dial(nil) // b has not even sent connection_init
	a.subscribe("1", eventsQuery, map[string]any{"t": "t"})
	a.subscribe("2", eventsQuery, map[string]any{"t": "t", "after": nil})
	waitFor(t, "the stream", func() bool { _, n := e.feed.executions("t"); return n == 1 })
	e.shutdown()
	for _, c := range []*client{a, b} {
		if code, _, _ := c.closed(10 * time.Second); code != 1001 {
			t.Fatalf("closed with %d, want 1001 (going away)", code)
		}
	}
	waitFor(t, "the stream to end", func() bool { _, n := e.feed.executions("t"); return n == 0 })
}

func TestBrowserOrigins(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.AllowedOrigins = []string{"*.console.example", "https://ops.example:8443"} })
	host := strings.TrimPrefix(e.srv.URL, "http://")
	for origin, allowed := range map[string]bool{
		"":                             true, // not a browser
		"http://" + host:               true, // the server's own page
		"https://a.console.example":    true,
		"https://ops.example:8443":     true,
		"http://ops.example:8443":      false, // the pattern names the scheme
		"https://evil.example":         false,
		"https://console.example.evil": false,
		"null":                         false,
		"http://" + host + ".evil":     false,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		d := websocket.Dialer{Subprotocols: []string{Subprotocol}}
		conn, resp, err := d.Dial(e.url, h)
		if conn != nil {
			conn.Close()
		}
		if allowed && err != nil {
			t.Errorf("origin %q refused: %v", origin, err)
		}
		if !allowed && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden) {
			t.Errorf("origin %q: %v, want 403", origin, err)
		}
	}
}

func TestShareKeyNeedsASharedFieldAndOnlyFilterArguments(t *testing.T) {
	tr := New(Options{Shared: map[string][]string{"events": {"topic"}}, Authorize: func(context.Context) error { return nil }})
	cases := map[string]bool{
		`subscription { events(topic: "a") }`:                                       true,
		`subscription S { ...F } fragment F on Subscription { events(topic: "a") }`: true,
		`subscription { events(topic: "a", after: 3) }`:                             false,
		`subscription { events(topic: "a", after: null) }`:                          true,
		`subscription { blob(size: 3) }`:                                            false,
		`query { hello }`:                                                           false,
	}
	for q, want := range cases {
		rc := operationContext(t, q)
		if _, got := tr.shareKey(rc); got != want {
			t.Errorf("%s: shared = %v, want %v", q, got, want)
		}
	}
	k1, _ := tr.shareKey(operationContext(t, `subscription { events(topic: "a") }`))
	k2, _ := tr.shareKey(operationContext(t, `subscription { events(topic: "b") }`))
	if k1 == k2 {
		t.Error("different arguments share a key")
	}
	if _, ok := New(Options{Shared: map[string][]string{"events": {"topic"}}}).shareKey(operationContext(t, `subscription { events(topic: "a") }`)); ok {
		t.Error("shared without an Authorize")
	}
}

func operationContext(t *testing.T, q string) *graphql.OperationContext {
	t.Helper()
	exec := executor.New(testExecutableSchema(newFeed()))
	rc, errs := exec.CreateOperationContext(graphql.StartOperationTrace(context.Background()), &graphql.RawParams{Query: q})
	if errs != nil {
		t.Fatalf("%s: %v", q, errs)
	}
	return rc
}

// A stream of its own (a replay, say) is written as fast as the socket takes it, however
// long: it waits for the socket instead of overflowing its queue.
func TestALongReplayIsNotMistakenForAFallenBehindSocket(t *testing.T) {
	e := newEnv(t)
	const n = 20 * maxQueued
	for i := range n {
		e.feed.publish("long", fmt.Sprint(i))
	}
	c := e.connect("reader")
	c.subscribe("1", `subscription { events(topic: "long", after: 0) }`, nil)
	for i := range n {
		if got := c.expectNext("1"); got != fmt.Sprint(i) {
			t.Fatalf("event %d is %q", i, got)
		}
	}
}

// OperationKey is the one "same operation" rule (shared streams and the server's shared
// reads): equal for the same text, name and variables whatever order the variables came
// in, different when any of them differs, and never equal by moving text between parts.
func TestOperationKeyIsTheSameOperation(t *testing.T) {
	key := func(name, query string, vars map[string]any) string {
		k, ok := OperationKey(&graphql.OperationContext{OperationName: name, RawQuery: query, Variables: vars})
		if !ok {
			t.Fatalf("no key for %q %q %v", name, query, vars)
		}
		return k
	}
	base := key("Q", "query Q { a }", map[string]any{"x": 1, "y": "b"})
	if again := key("Q", "query Q { a }", map[string]any{"y": "b", "x": 1}); again != base {
		t.Errorf("the same operation has two keys: %s, %s", base, again)
	}
	for what, other := range map[string]string{
		"operation name": key("R", "query Q { a }", map[string]any{"x": 1, "y": "b"}),
		"query text":     key("Q", "query Q { b }", map[string]any{"x": 1, "y": "b"}),
		"variables":      key("Q", "query Q { a }", map[string]any{"x": 2, "y": "b"}),
		"parts moved":    key("Q\x00query Q { a }", "", map[string]any{"x": 1, "y": "b"}),
	} {
		if other == base {
			t.Errorf("a different %s shares the key", what)
		}
	}
	if _, ok := OperationKey(&graphql.OperationContext{Variables: map[string]any{"f": func() {}}}); ok {
		t.Error("variables that cannot be encoded got a key")
	}
}
