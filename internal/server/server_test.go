package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/respheader"
	"github.com/apelora/fabric/internal/server/graphqlws"
	"github.com/apelora/fabric/resolvers"
)

func TestResolverSetHeadersReachTheResponse(t *testing.T) {
	h := withRequest(slog.New(slog.NewTextHandler(io.Discard, nil)), slog.LevelInfo, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What a resolver does deep inside the GraphQL handler before the body is written.
		if !respheader.Set(r.Context(), "Cache-Control", "no-store") {
			t.Error("Set reported no response to carry the header")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":{}}`)
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
	req.Header.Set("X-Request-Id", "given-id-1")
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("Cache-Control"); got != "no-store" {
		t.Fatalf("Cache-Control = %q", got)
	}
	if got := rec.Header().Get("X-Request-Id"); got != "given-id-1" {
		t.Fatalf("X-Request-Id = %q, want the caller's", got)
	}
	if respheader.Set(context.Background(), "Cache-Control", "no-store") {
		t.Fatal("Set outside a request claimed to work")
	}
}

func TestRequestIDsThatCannotBeLoggedSafelyAreReplaced(t *testing.T) {
	for _, bad := range []string{"", strings.Repeat("a", 65), "x\ny", "a b", `"quoted"`} {
		if got := logging.AcceptRequestID(bad); got == bad || len(got) != 24 {
			t.Errorf("AcceptRequestID(%q) = %q", bad, got)
		}
	}
}

const depthSchema = `
type Query { node: Node }
type Node { name: String child: Node }
`

func depthOf(t *testing.T, q string) int {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: depthSchema})
	doc, errs := gqlparser.LoadQuery(schema, q)
	if errs != nil {
		t.Fatal(errs)
	}
	return selectionDepth(doc.Operations[0].SelectionSet, map[string]bool{})
}

func TestSelectionDepth(t *testing.T) {
	cases := map[string]int{
		`{ node { name } }`:                                                            2,
		`{ node { child { child { name } } } }`:                                        4,
		`{ node { ...F } } fragment F on Node { child { name } }`:                      3,
		`{ node { ... on Node { child { child { name } } } } }`:                        4,
		`{ __schema { types { fields { type { ofType { name } } } } } node { name } }`: 2,
	}
	for q, want := range cases {
		if got := depthOf(t, q); got != want {
			t.Errorf("depth(%s) = %d, want %d", q, got, want)
		}
	}
}

func TestInternalErrorsAreNotShown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := logging.WithRequestID(context.Background(), "rid-7")
	got := presentError(ctx, log, errors.New("pq: password authentication failed for user secret-user"))
	if strings.Contains(got.Message, "secret-user") || !strings.Contains(got.Message, "rid-7") || got.Extensions["code"] != "INTERNAL" {
		t.Fatalf("internal error shown as %q %v", got.Message, got.Extensions)
	}
	got = presentError(ctx, log, apperr.Wrap(errors.New("dial tcp 10.0.0.1:5432: refused"), apperr.Unavailable, "the database is unreachable"))
	if got.Message != "the database is unreachable" || got.Extensions["code"] != "UNAVAILABLE" {
		t.Fatalf("administrator's error shown as %q %v", got.Message, got.Extensions)
	}
	got = presentError(ctx, log, apperr.Invalid("name", "bad name"))
	if got.Extensions["field"] != "name" || got.Extensions["code"] != "INVALID_INPUT" {
		t.Fatalf("invalid input shown as %v", got.Extensions)
	}
}

// Every shared stream names a real subscription and real arguments: a renamed field or
// argument must not silently stop sharing (or share what it should not).
func TestSharedStreamsNameSubscriptionsAndTheirArguments(t *testing.T) {
	sub := graph.NewExecutableSchema(graph.Config{}).Schema().Subscription
	for field, filters := range sharedStreams {
		def := sub.Fields.ForName(field)
		if def == nil {
			t.Errorf("shared stream %s is not a subscription", field)
			continue
		}
		for _, a := range filters {
			if def.Arguments.ForName(a) == nil {
				t.Errorf("shared stream %s has no argument %s", field, a)
			}
		}
	}
	for _, replayed := range []string{"fenceProgress", "driftChanges"} {
		if def := sub.Fields.ForName(replayed); def == nil || def.Arguments.ForName("after") == nil {
			t.Errorf("%s lost its `after`: check that sharedStreams still says what is shared", replayed)
		}
	}
}

// Serve closes open websockets with 1001 when it shuts down (they are hijacked: the HTTP
// server's Shutdown does not wait for them).
func TestServeClosesWebsocketsWhenItShutsDown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := Handler(Config{Log: log, Resolvers: &resolvers.Resolver{}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, time.Second, log) }()
	d := websocket.Dialer{Subprotocols: []string{graphqlws.Subprotocol}}
	conn, _, err := d.Dial("ws://"+ln.Addr().String()+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("read: %v, want a 1001 close", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
