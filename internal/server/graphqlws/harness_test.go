package graphqlws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
)

// The tests run the transport in gqlgen's real handler and executor, over a small schema
// whose streams the test drives: `events(topic)` is declared shared (topic filters it),
// `after` replays from an index and so makes a subscriber's stream its own.
const testSchema = `
type Query { hello: String! whoami: String! }
type Mutation { touch: String! }
type Subscription {
  events(topic: String!, after: Int): String!
  blob(size: Int!): String!
}
`

type ctxKey string

// feed is the test's event source: one list of values per topic, and the executions
// that stream them.
type feed struct {
	mu      sync.Mutex
	history map[string][]string
	subs    map[string]map[*execution]struct{}
	started map[string]int // executions started per topic
	fail    map[string]string
}

type execution struct {
	ch   chan string
	ctx  context.Context
	who  string // the identity in the execution's context
	done chan struct{}
}

func newFeed() *feed {
	return &feed{history: map[string][]string{}, subs: map[string]map[*execution]struct{}{}, started: map[string]int{}, fail: map[string]string{}}
}

// publish appends v to topic and sends it to the topic's executions.
func (f *feed) publish(topic, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history[topic] = append(f.history[topic], v)
	for e := range f.subs[topic] {
		e.ch <- v
	}
}

// end closes the topic's streams.
func (f *feed) end(topic string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for e := range f.subs[topic] {
		close(e.ch)
	}
	delete(f.subs, topic)
}

func (f *feed) executions(topic string) (started, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started[topic], len(f.subs[topic])
}

func (f *feed) running(topic string) []*execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*execution
	for e := range f.subs[topic] {
		out = append(out, e)
	}
	return out
}

// subscribe starts an execution of topic, replaying from index after when given.
func (f *feed) subscribe(ctx context.Context, topic string, after *int64) *execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := &execution{ch: make(chan string, 1024+len(f.history[topic])), ctx: ctx, done: make(chan struct{})}
	e.who, _ = ctx.Value(ctxKey("identity")).(string)
	if after != nil {
		for _, v := range f.history[topic][min(int(*after), len(f.history[topic])):] {
			e.ch <- v
		}
	}
	if f.subs[topic] == nil {
		f.subs[topic] = map[*execution]struct{}{}
	}
	f.subs[topic][e] = struct{}{}
	f.started[topic]++
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[topic][e]; ok {
			delete(f.subs[topic], e)
			close(e.ch)
		}
		close(e.done)
	})
	return e
}

func testExecutableSchema(f *feed) graphql.ExecutableSchema {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: testSchema})
	return &graphql.ExecutableSchemaMock{
		SchemaFunc: func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) {
			return 1, true
		},
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			oc := graphql.GetOperationContext(ctx)
			fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, nil)
			field := fields[0]
			args := field.ArgumentMap(oc.Variables)
			switch oc.Operation.Operation {
			case ast.Query:
				if field.Name == "whoami" {
					who, _ := ctx.Value(ctxKey("identity")).(string)
					return graphql.OneShot(&graphql.Response{Data: jsonObject(field.Alias, who+"/"+logging.RequestID(ctx))})
				}
				return graphql.OneShot(&graphql.Response{Data: jsonObject(field.Alias, "world")})
			case ast.Mutation:
				return graphql.OneShot(&graphql.Response{Data: jsonObject(field.Alias, "touched")})
			}
			if field.Name == "blob" {
				n, _ := args["size"].(int64)
				body := strings.Repeat("x", int(n))
				return func(ctx context.Context) *graphql.Response {
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(time.Millisecond):
						return &graphql.Response{Data: jsonObject(field.Alias, body)}
					}
				}
			}
			topic := args["topic"].(string)
			if msg := f.fail[topic]; msg != "" {
				panic(msg)
			}
			var after *int64
			if a, ok := args["after"].(int64); ok {
				after = &a
			}
			e := f.subscribe(ctx, topic, after)
			return func(ctx context.Context) *graphql.Response {
				select {
				case <-ctx.Done():
					return nil
				case v, ok := <-e.ch:
					if !ok {
						return nil
					}
					if strings.HasPrefix(v, "error:") {
						graphql.AddError(ctx, apperr.New(apperr.NotFound, "%s", strings.TrimPrefix(v, "error:")))
						return &graphql.Response{Data: json.RawMessage("null")}
					}
					return &graphql.Response{Data: jsonObject(field.Alias, v)}
				}
			}
		},
	}
}

func jsonObject(k, v string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{k: v})
	return b
}

// env is a server with the transport and a test-driven feed.
type env struct {
	t        *testing.T
	feed     *feed
	srv      *httptest.Server
	url      string
	shutdown context.CancelFunc
	mu       sync.Mutex
	revoke   map[string]context.CancelCauseFunc // by identity
	opts     Options
}

// tokens: "Bearer reader" and "Bearer reader2" may read, "Bearer blind" is let in but may
// not read (the operation check and Authorize refuse it), anything else is refused.
func newEnv(t *testing.T, adjust ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, feed: newFeed(), revoke: map[string]context.CancelCauseFunc{}}
	mayRead := func(ctx context.Context) error {
		if who, _ := ctx.Value(ctxKey("identity")).(string); who == "" || who == "blind" {
			return apperr.New(apperr.Forbidden, "you may not read: ask for view-infrastructure")
		}
		return nil
	}
	e.opts = Options{
		Init: func(ctx context.Context, p InitPayload) (context.Context, error) {
			who, ok := strings.CutPrefix(p.Authorization(), "Bearer ")
			if !ok || (who != "reader" && who != "reader2" && who != "blind") {
				return ctx, apperr.New(apperr.Unauthenticated, "unknown token")
			}
			ctx, cancel := context.WithCancelCause(context.WithValue(ctx, ctxKey("identity"), who))
			e.mu.Lock()
			e.revoke[who] = cancel
			e.mu.Unlock()
			return ctx, nil
		},
		PingInterval: time.Hour,
		Shared:       map[string][]string{"events": {"topic"}},
		Authorize:    mayRead,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, a := range adjust {
		a(&e.opts)
	}
	gql := handler.New(testExecutableSchema(e.feed))
	gql.AddTransport(New(e.opts))
	gql.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if err := mayRead(ctx); err != nil {
			return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{Message: err.Error(), Extensions: map[string]any{"code": "FORBIDDEN"}}}})
		}
		return next(ctx)
	})
	gql.SetRecoverFunc(func(ctx context.Context, p any) error { return fmt.Errorf("internal error: %v", p) })
	gql.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		out := graphql.DefaultErrorPresenter(ctx, err)
		if ae, ok := apperr.As(err); ok {
			out.Message = ae.Message
			out.Extensions = map[string]any{"code": string(ae.Code)}
		}
		return out
	})
	shutdown, cancel := context.WithCancel(context.Background())
	e.shutdown = cancel
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gql.ServeHTTP(w, r.WithContext(logging.WithRequestID(r.Context(), "rid-"+r.Header.Get("X-Test-Id"))))
	}))
	e.srv.Config.BaseContext = func(net.Listener) context.Context {
		return WithShutdown(context.Background(), shutdown)
	}
	e.srv.Start()
	t.Cleanup(func() { cancel(); e.srv.Close() })
	e.url = "ws" + strings.TrimPrefix(e.srv.URL, "http")
	return e
}

// client is one test socket.
type client struct {
	t    *testing.T
	conn *websocket.Conn
}

func (e *env) dial(header http.Header, subprotocols ...string) *client {
	e.t.Helper()
	if subprotocols == nil {
		subprotocols = []string{Subprotocol}
	}
	d := websocket.Dialer{Subprotocols: subprotocols}
	conn, resp, err := d.Dial(e.url, header)
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		e.t.Fatalf("dial: %v %s", err, status)
	}
	e.t.Cleanup(func() { conn.Close() })
	return &client{t: e.t, conn: conn}
}

// connect dials and completes connection_init as token.
func (e *env) connect(token string) *client {
	e.t.Helper()
	c := e.dial(nil)
	c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}})
	if m := c.read(); m.Type != "connection_ack" {
		e.t.Fatalf("got %+v, want connection_ack", m)
	}
	return c
}

type serverMsg struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	raw     []byte
}

func (c *client) send(v any) {
	c.t.Helper()
	if err := c.conn.WriteJSON(v); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) subscribe(id, query string, vars map[string]any) {
	c.t.Helper()
	c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

// read returns the next message; it fails the test on a close or after 10 s.
func (c *client) read() serverMsg {
	c.t.Helper()
	m, err := c.next(10 * time.Second)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

func (c *client) next(timeout time.Duration) (serverMsg, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	_, raw, err := c.conn.ReadMessage()
	if err != nil {
		return serverMsg{}, err
	}
	var m serverMsg
	if err := json.Unmarshal(raw, &m); err != nil {
		return serverMsg{}, fmt.Errorf("not JSON: %s", raw)
	}
	m.raw = raw
	return m, nil
}

// closed reads until the socket closes and returns the close code and reason; messages
// before it are returned too.
func (c *client) closed(timeout time.Duration) (code int, reason string, before []serverMsg) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m, err := c.next(time.Until(deadline))
		if err == nil {
			before = append(before, m)
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text, before
		}
		c.t.Fatalf("socket did not close with a close frame: %v (after %d messages)", err, len(before))
	}
}

// expectNext reads a `next` for id and returns its payload's data field value.
func (c *client) expectNext(id string) string {
	c.t.Helper()
	m := c.read()
	if m.Type != "next" || m.ID != id {
		c.t.Fatalf("got %s, want next for %s", m.raw, id)
	}
	var p struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		c.t.Fatalf("payload %s: %v", m.Payload, err)
	}
	for _, v := range p.Data {
		return v
	}
	c.t.Fatalf("next without data: %s", m.raw)
	return ""
}

func (c *client) expectComplete(id string) {
	c.t.Helper()
	if m := c.read(); m.Type != "complete" || m.ID != id {
		c.t.Fatalf("got %s, want complete for %s", m.raw, id)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
