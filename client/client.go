// Package client is the typed Go client for the Apelora fabric API. generated.go is made by
// genqlient from schema/ and client/operations/ (`go generate ./...`); this file adds the
// constructors that authenticate and keep websocket subscriptions alive.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/gorilla/websocket"
)

// New returns a client for queries and mutations at endpoint (http(s)://host:port/graphql),
// sending token as a bearer token. httpClient may be nil.
func New(endpoint, token string, httpClient *http.Client) graphql.Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 5 * time.Minute}
	}
	base := httpClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *httpClient
	c.Transport = bearer{token: token, next: base}
	return graphql.NewClient(endpoint, &c)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// NewWebSocket returns a client for subscriptions over graphql-transport-ws at endpoint
// (http(s):// or ws(s)://…/graphql), authenticated by token in connection_init. Call
// Start before subscribing and Close when done.
//
// genqlient v0.8.1 ends every subscription when the server sends a keep-alive ping (a
// message without an id) and never answers it; the server then drops the connection after
// two ping periods. Its fix (upstream PR 387) is not in a release the module proxy serves,
// so the Dialer here answers pings with pongs and keeps id-less keep-alives away from
// genqlient.
func NewWebSocket(endpoint, token string) (graphql.WebSocketClient, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q is not a URL: %w", endpoint, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return nil, fmt.Errorf("endpoint %q: use an http, https, ws or wss URL", endpoint)
	}
	return endingSafely{graphql.NewClientUsingWebSocket(u.String(), &Dialer{},
		graphql.WithConnectionParams(map[string]any{"Authorization": "Bearer " + token}))}, nil
}

// endingSafely keeps genqlient v0.8.1 from crashing the process when a subscription ends
// while an event for it is being delivered: Unsubscribe (and Close, which unsubscribes
// all) closes the subscription's channel while genqlient's reader may be sending on it
// (blocked until the caller takes the event, or just past its check that the
// subscription is still on), and that send panics with "send on closed channel". The
// event was for a subscription that has ended: it is dropped. Seen in the e2e tests on a
// loaded machine (issue 26.6), where an event arrived as a test unsubscribed.
type endingSafely struct{ graphql.WebSocketClient }

func (w endingSafely) Subscribe(req *graphql.Request, interfaceChan any, forward graphql.ForwardDataFunction) (string, error) {
	return w.WebSocketClient.Subscribe(req, interfaceChan, func(ch any, msg json.RawMessage) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if e, ok := r.(runtime.Error); ok && e.Error() == "send on closed channel" {
					return
				}
				panic(r)
			}
		}()
		return forward(ch, msg)
	})
}

// Dialer dials graphql-transport-ws connections for genqlient and handles the protocol's
// keep-alive (ping/pong) itself.
type Dialer struct {
	// Dialer is the websocket dialer to use; nil means gorilla's default.
	Dialer *websocket.Dialer
}

// DialContext implements graphql.Dialer.
func (d *Dialer) DialContext(ctx context.Context, urlStr string, header http.Header) (graphql.WSConn, error) {
	wd := d.Dialer
	if wd == nil {
		wd = websocket.DefaultDialer
	}
	conn, resp, err := wd.DialContext(ctx, urlStr, header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("open websocket %s: %w (HTTP %s)", urlStr, err, resp.Status)
		}
		return nil, fmt.Errorf("open websocket %s: %w", urlStr, err)
	}
	return &keepAliveConn{conn: conn}, nil
}

// keepAliveConn answers pings and hides keep-alive messages from genqlient's reader.
type keepAliveConn struct {
	conn    *websocket.Conn
	writeMu sync.Mutex // gorilla allows one writer at a time; pongs come from the reader
}

func (c *keepAliveConn) ReadMessage() (int, []byte, error) {
	for {
		t, msg, err := c.conn.ReadMessage()
		if err != nil || t != websocket.TextMessage {
			return t, msg, err
		}
		var m struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload,omitempty"`
		}
		if json.Unmarshal(msg, &m) != nil {
			return t, msg, nil
		}
		switch m.Type {
		case "ping":
			pong := []byte(`{"type":"pong"}`)
			if err := c.WriteMessage(websocket.TextMessage, pong); err != nil {
				return 0, nil, fmt.Errorf("answer keep-alive ping: %w", err)
			}
			continue
		case "pong", "ka":
			continue
		}
		return t, msg, nil
	}
}

func (c *keepAliveConn) WriteMessage(t int, data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	return c.conn.WriteMessage(t, data)
}

func (c *keepAliveConn) Close() error { return c.conn.Close() }
