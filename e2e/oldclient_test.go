package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// An old client: the documents Fabric Console and the Go client sent before the API's
// words changed (plan steps, a rolling reboot's step, member operations; the schema keeps
// them deprecated, schema/deprecated.graphqls), sent as they were. The tests that drive
// evacuations and rolling reboots ask through them beside the new names and compare.

// oldClientSubscription is the console's memberOperation subscription before the rename,
// verbatim (resolvers/testdata/oldclient/console.graphql).
const oldClientSubscription = `subscription MemberOperation($name: String!, $after: ID) {
  memberOperation(name: $name, after: $after) { id operationId action at kind message }
}`

// oldSubscriber is a graphql-transport-ws client that sends one document and hands each
// event's data on; an error answer or a closed socket fails the test.
type oldSubscriber struct {
	t      *testing.T
	events chan map[string]any
	errs   chan error
}

func subscribeAsAnOldClient(t *testing.T, base, token, query string, vars map[string]any) *oldSubscriber {
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
	if err := conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		t.Fatal(err)
	}
	s := &oldSubscriber{t: t, events: make(chan map[string]any, 256), errs: make(chan error, 1)}
	go func() {
		for {
			var m struct {
				Type    string
				Payload json.RawMessage
			}
			if err := conn.ReadJSON(&m); err != nil {
				s.errs <- err
				return
			}
			switch m.Type {
			case "ping":
				_ = conn.WriteJSON(map[string]any{"type": "pong"})
			case "next":
				var r struct {
					Data   map[string]any
					Errors []any
				}
				if err := json.Unmarshal(m.Payload, &r); err != nil || len(r.Errors) > 0 {
					s.errs <- &websocket.CloseError{Code: -1, Text: "an error answer: " + string(m.Payload)}
					return
				}
				s.events <- r.Data
			case "error", "complete":
				s.errs <- &websocket.CloseError{Code: -1, Text: m.Type + ": " + string(m.Payload)}
				return
			}
		}
	}()
	return s
}

// next returns the next event's data.
func (s *oldSubscriber) next(within time.Duration) map[string]any {
	s.t.Helper()
	select {
	case d := <-s.events:
		return d
	case err := <-s.errs:
		s.t.Fatalf("the old client's subscription: %v", err)
	case <-time.After(within):
		s.t.Fatalf("the old client's subscription sent nothing for %v", within)
	}
	return nil
}
