package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/producttest"
)

// wsMsg is one graphql-transport-ws message from the server.
type wsMsg struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// rawSocket is a graphql-transport-ws client on a real socket, read by its own goroutine
// (which answers pings), for tests that count what the server accepts and refuses.
type rawSocket struct {
	t      *testing.T
	conn   *websocket.Conn
	msgs   chan wsMsg
	closed chan *websocket.CloseError // the server's close frame, or nil without one
	// passed counts the `next` messages first passed over, by subscription id.
	passed map[string]int
}

// openSocket opens a socket and sends connection_init with authorization ("" for none).
// It answers the acknowledgement (nil) or the close the server answered instead.
func openSocket(t *testing.T, base, authorization string) (*rawSocket, *websocket.CloseError) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/graphql", http.Header{"Sec-WebSocket-Protocol": {"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSocket{t: t, conn: conn, msgs: make(chan wsMsg, 4096), closed: make(chan *websocket.CloseError, 1), passed: map[string]int{}}
	t.Cleanup(func() { conn.Close() })
	payload := map[string]any{}
	if authorization != "" {
		payload["Authorization"] = authorization
	}
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": payload}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.msgs)
		for {
			_, raw, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				errors.As(err, &ce)
				s.closed <- ce
				return
			}
			var m wsMsg
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			if m.Type == "ping" {
				_ = conn.WriteJSON(map[string]string{"type": "pong"})
				continue
			}
			s.msgs <- m
		}
	}()
	select {
	case m, ok := <-s.msgs:
		if ok && m.Type == "connection_ack" {
			return s, nil
		}
		if ok {
			t.Fatalf("before the acknowledgement: %+v", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to connection_init")
	}
	return nil, <-s.closed
}

// first sends a subscribe message and returns the first answer to it: a `next` or an
// `error` message's type and payload. Other messages are dropped.
func (s *rawSocket) first(id, query string, vars map[string]any) (string, json.RawMessage) {
	s.t.Helper()
	if err := s.conn.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				s.t.Fatalf("the socket closed while %s waited: %v", id, <-s.closed)
			}
			if m.ID == id && (m.Type == "next" || m.Type == "error") {
				return m.Type, m.Payload
			}
			if m.Type == "next" {
				s.passed[m.ID]++
			}
		case <-deadline:
			s.t.Fatalf("no answer to %s", id)
		}
	}
}

// answer is first for a subscription: nil when it was accepted (a `next`), the errors of
// the `error` message when it was refused.
func (s *rawSocket) answer(id, query string, vars map[string]any) []producttest.GQLError {
	s.t.Helper()
	typ, payload := s.first(id, query, vars)
	if typ == "next" {
		return nil
	}
	var errs []producttest.GQLError
	if err := json.Unmarshal(payload, &errs); err != nil || len(errs) == 0 {
		s.t.Fatalf("error message %s", payload)
	}
	return errs
}

// result runs a query or mutation over the socket and returns its answer.
func (s *rawSocket) result(id, query string, vars map[string]any) *producttest.Response {
	s.t.Helper()
	typ, payload := s.first(id, query, vars)
	r := &producttest.Response{}
	if typ == "error" {
		if err := json.Unmarshal(payload, &r.Errors); err != nil {
			s.t.Fatalf("error message %s", payload)
		}
		return r
	}
	if err := json.Unmarshal(payload, r); err != nil {
		s.t.Fatalf("next message %s", payload)
	}
	return r
}

func (s *rawSocket) complete(id string) {
	s.t.Helper()
	if err := s.conn.WriteJSON(map[string]any{"id": id, "type": "complete"}); err != nil {
		s.t.Fatal(err)
	}
}

// Issue 25: one view-only token held 14,000 subscriptions (575 MB, 14,030 file
// descriptors); the only cap was 100 operations per socket. With the defaults, one token
// trying 40 sockets of 100 subscriptions each gets 32 sockets and 512 subscriptions: the
// 33rd socket is closed with 4429 and the reason, the 513th subscription refused alone with
// RATE_LIMITED on a socket that goes on serving. Queries on its sockets, and other
// identities, are not limited; what is closed or completed is given back. The audit's
// identityLimited events (actor the identity) count every refusal, bounded per window.
func TestOneTokenIsHeldToItsWebsocketsAndSubscriptions(t *testing.T) {
	parallel(t)
	const window = 2 * time.Second
	e := producttest.Start(t, producttest.WithRefusalWindow(window))
	viewer := "Bearer " + e.Identity("viewer", identity.ViewInfrastructure)
	other := "Bearer " + e.Identity("other", identity.ViewInfrastructure)
	// Each accepted subscription answers at once with the replay of an event no live one
	// matches (the server's own command line made the identities), so the test tells
	// accepted from refused without waiting, and live events do not flood the sockets.
	replay := `subscription($actor: String) { auditEventRecorded(actor: $actor, after: "0") { id } }`
	vars := map[string]any{"actor": app.LocalCaller().Name}
	limits := server.DefaultIdentityLimits
	before := lastAuditID(t, e)

	var sockets []*rawSocket
	refusedSockets, refusedSubs := 0, 0
	for i := range 40 {
		s, closed := openSocket(t, e.Base, viewer)
		if closed != nil {
			if closed.Code != 4429 || !strings.HasPrefix(closed.Text, fmt.Sprintf("RATE_LIMITED: this identity holds %d websockets here", limits.Sockets)) {
				t.Fatalf("socket %d closed with %d %q", i, closed.Code, closed.Text)
			}
			refusedSockets++
			continue
		}
		sockets = append(sockets, s)
	}
	if len(sockets) != limits.Sockets || refusedSockets != 40-limits.Sockets {
		t.Fatalf("%d sockets opened, %d refused; want %d and %d", len(sockets), refusedSockets, limits.Sockets, 40-limits.Sockets)
	}
	if _, closed := openSocket(t, e.Base, other); closed != nil {
		t.Fatalf("another identity's socket: %d %q", closed.Code, closed.Text)
	}

	accepted := map[*rawSocket][]string{}
	total := 0
	for si, s := range sockets {
		for i := range 100 {
			id := fmt.Sprintf("s%d-%d", si, i)
			errs := s.answer(id, replay, vars)
			if errs == nil {
				accepted[s] = append(accepted[s], id)
				total++
				continue
			}
			if errs[0].Extensions["code"] != "RATE_LIMITED" || errs[0].Extensions["limit"] != float64(limits.Subscriptions) ||
				!strings.Contains(errs[0].Message, `identity "viewer" holds 512 subscriptions on this server`) {
				t.Fatalf("%s refused with %+v", id, errs)
			}
			refusedSubs++
		}
	}
	t.Logf("one token: %d sockets and %d subscriptions accepted, %d sockets and %d subscriptions refused", len(sockets), total, refusedSockets, refusedSubs)
	if total != limits.Subscriptions || refusedSubs != len(sockets)*100-limits.Subscriptions {
		t.Fatalf("%d subscriptions accepted, %d refused", total, refusedSubs)
	}

	// A socket at the limit still answers queries; another identity still subscribes.
	last := sockets[len(sockets)-1]
	if errs := last.answer("q", `{ viewer { name } }`, nil); errs != nil {
		t.Fatalf("a query on a socket at the limit: %+v", errs)
	}
	o, _ := openSocket(t, e.Base, other)
	if errs := o.answer("o1", replay, vars); errs != nil {
		t.Fatalf("another identity's subscription: %+v", errs)
	}

	// Given back: a completed subscription and a closed socket make room (the server
	// learns of each as it reads, so ask until it has).
	var full *rawSocket
	for s, ids := range accepted {
		full = s
		s.complete(ids[0])
		break
	}
	for i := 0; ; i++ {
		errs := last.answer(fmt.Sprintf("again-%d", i), replay, vars)
		if errs == nil {
			break
		}
		refusedSubs++
		if i > 200 {
			t.Fatal("a completed subscription was never given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	full.conn.Close()
	for i := 0; ; i++ {
		_, closed := openSocket(t, e.Base, viewer)
		if closed == nil {
			break
		}
		refusedSockets++
		if i > 200 {
			t.Fatal("a closed socket was never given back")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The audit counts every refusal, in a few bounded events (the window's last come at
	// its end).
	counted := func() (map[string]int, int) {
		got, events := map[string]int{}, 0
		for _, row := range auditRowsAfter(t, e, before) {
			if row.action != server.IdentityLimited {
				continue
			}
			var d struct {
				Limit   string
				Max     int
				Refused int
			}
			if err := json.Unmarshal([]byte(row.details), &d); err != nil || row.actor != "viewer" || row.outcome != "REFUSED" {
				t.Fatalf("identityLimited event %+v", row)
			}
			got[d.Limit] += d.Refused
			events++
		}
		return got, events
	}
	var got map[string]int
	var events int
	for deadline := time.Now().Add(20 * window); ; time.Sleep(100 * time.Millisecond) {
		got, events = counted()
		if got["websockets"] >= refusedSockets && got["subscriptions"] >= refusedSubs || time.Now().After(deadline) {
			break
		}
	}
	if got["websockets"] != refusedSockets || got["subscriptions"] != refusedSubs {
		t.Fatalf("identityLimited events count %v; the test saw %d sockets and %d subscriptions refused", got, refusedSockets, refusedSubs)
	}
	t.Logf("%d identityLimited events for %d refusals", events, refusedSockets+refusedSubs)
}
