package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/apelora/fabric/internal/apperr"
)

func TestAuthLimiterSpendsAndRefills(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newAuthLimiter(RateLimit{Burst: 3, Every: time.Second}, nil)
	l.now = func() time.Time { return now }
	for i := range 3 {
		if ok, _ := l.take("10.0.0.1"); !ok {
			t.Fatalf("try %d refused within the burst", i)
		}
	}
	if ok, retry := l.take("10.0.0.1"); ok || retry != time.Second {
		t.Fatalf("past the burst: ok %v retry %s; want refused, 1s", ok, retry)
	}
	if ok, _ := l.take("10.0.0.2"); !ok {
		t.Fatal("another address was limited")
	}
	now = now.Add(1500 * time.Millisecond)
	if ok, _ := l.take("10.0.0.1"); !ok {
		t.Fatal("no try after a refill")
	}
}

func TestAuthLimiterMemoryIsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newAuthLimiter(RateLimit{Burst: 1, Every: time.Hour}, nil)
	l.now = func() time.Time { return now }
	for i := range maxTrackedAddresses {
		l.take(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)) // each spends its only try
	}
	// Drained buckets are remembered; a new address shares the overflow bucket.
	if ok, _ := l.take("192.0.2.1"); !ok {
		t.Fatal("the overflow bucket starts full")
	}
	if ok, _ := l.take("192.0.2.2"); ok {
		t.Fatal("new addresses past the limit do not share one bucket")
	}
	if n := len(l.clients); n > maxTrackedAddresses+1 {
		t.Fatalf("%d addresses tracked", n)
	}
	// Once refilled and out of their window, they are forgotten to make room.
	now = now.Add(2 * time.Hour)
	if ok, _ := l.take("192.0.2.3"); !ok || len(l.clients) > 2 {
		t.Fatalf("refilled buckets kept: %d", len(l.clients))
	}
}

func TestClientAddress(t *testing.T) {
	cases := map[string]string{
		"127.0.0.77:5555":             "127.0.0.77",
		"[2001:db8:1:2:3:4:5:6]:443":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":  "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":       "192.0.2.7",
		"not an address":              "not an address",
		"[fe80::1%eth0]:80":           "fe80::/64",
		"[2001:db8:1:3:3:4:5:6]:1234": "2001:db8:1:3::/64",
	}
	for in, want := range cases {
		if got := TrustedProxies(nil).clientAddress(&http.Request{RemoteAddr: in}); got != want {
			t.Errorf("clientAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// Behind trusted proxies the client is the nearest X-Forwarded-For entry that is not a
// trusted proxy; from any other peer the header is ignored, whatever it says.
func TestClientAddressBehindTrustedProxies(t *testing.T) {
	proxies, err := ParseTrustedProxies(" 127.0.0.10, 10.1.0.0/16 ,2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		peer string
		xff  []string
		want string
	}{
		{"127.0.0.10:4000", []string{"192.0.2.7"}, "192.0.2.7"},                                  // HAProxy's option forwardfor
		{"127.0.0.10:4000", []string{"203.0.113.9, 192.0.2.7"}, "192.0.2.7"},                     // the client's own entry is not believed
		{"127.0.0.10:4000", []string{"203.0.113.9", "192.0.2.7, 10.1.2.3"}, "192.0.2.7"},         // two proxies, two header lines
		{"127.0.0.10:4000", []string{"2001:db8:1:2::5"}, "2001:db8:1:2::/64"},                    // an IPv6 client by its /64
		{"127.0.0.10:4000", nil, "127.0.0.10"},                                                   // no header: the proxy itself
		{"127.0.0.10:4000", []string{"192.0.2.7, not-an-address"}, "127.0.0.10"},                 // garbage where the proxy writes: not believed
		{"127.0.0.10:4000", []string{"10.1.0.1, 10.1.0.2"}, "10.1.0.1"},                          // every hop a proxy: the farthest
		{"[2001:db8:ffff::1]:443", []string{"::ffff:192.0.2.8"}, "192.0.2.8"},                    // an IPv6 proxy, a mapped client
		{"127.0.0.11:4000", []string{"192.0.2.7"}, "127.0.0.11"},                                 // an untrusted peer's header is ignored
		{"192.0.2.99:4000", []string{"127.0.0.10"}, "192.0.2.99"},                                // forging a proxy's address changes nothing
		{"127.0.0.10:4000", []string{strings.Repeat("10.1.0.1,", 100) + "10.1.0.1"}, "10.1.0.1"}, // a long chain is cut short
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := proxies.clientAddress(r); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %q, want %q", c.peer, c.xff, got, c.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.1:80"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTrustedProxies(%q): %v", bad, err)
		}
	}
}

func TestCheckRequestJSON(t *testing.T) {
	cases := map[string]string{
		`{"query": "{ viewer { name } }"}`:                             "",
		`{"query": "{ a }", "variables": null, "operationName": null}`: "",
		`{"query": "{ a }", "variables": {"x": 1}, "extensions": {}}`:  "",
		` [{"query": "{ a }"}]`:                                        "batch",
		`{"query": "{ a }"`:                                            "not valid JSON (at byte",
		`{"query": "{ a }"} trailing`:                                  "not valid JSON",
		`"{ a }"`:                                                      "not a JSON object",
		`{"query": ""}`:                                                `no "query"`,
		`{"query": 7}`:                                                 `no "query"`,
		`{"query": "{ a }", "operationName": 1}`:                       `"operationName" must be a string`,
		`{"query": "{ a }", "variables": "x"}`:                         `"variables" must be`,
		`{"query": "{ a }", "extensions": []}`:                         `"extensions" must be`,
		`{"query": "{ a }", "variables": {"v": "` + strings.Repeat("x", 9999) + ``: "not valid JSON",
	}
	for body, want := range cases {
		got := checkRequestJSON([]byte(body))
		if want == "" && got != "" || !strings.Contains(got, want) || len(got) > 200 {
			t.Errorf("checkRequestJSON(%.60s) = %q, want %q", body, got, want)
		}
	}
}

const limitsSchema = `
type Query { node(name: String!, count: Int): Node }
type Mutation { touch(name: String!): Node }
type Node { name: String child: Node }
input In { name: String! }
`

// gqlErrors parses and validates q against limitsSchema as gqlgen does.
func gqlErrors(t *testing.T, q string) gqlerror.List {
	t.Helper()
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: limitsSchema})
	doc, errs := gqlparser.LoadQuery(schema, q)
	if errs != nil {
		return errs
	}
	_, err := validator.VariableValues(schema, doc.Operations[0], map[string]any{})
	if err != nil {
		return gqlerror.List{err.(*gqlerror.Error)}
	}
	return nil
}

func TestGraphQLErrorsSayWhatToFix(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	long := strings.Repeat("z", 5000)
	cases := map[string]string{
		`{ node(name: "a") { nam } }`:                                             `the query is not valid: Cannot query field "nam" on type "Node". Did you mean "name"? (line 1, column 21)`,
		`{ node(name: "a") { name `:                                               "the query does not parse: Expected Name, found <EOF> (line 1, column 26)",
		`query($n: String!) { node(name: $n) { name } }`:                          "variable $n is missing: give it a value",
		`{ node(name: "a", count: 1` + strings.Repeat("9", 5000) + `) { name } }`: "the query is not valid: Int cannot represent non 32-bit signed integer value: 1999",
		`{ node(name: "a", count: "` + long + `") { name } }`:                     `the query is not valid: Int cannot represent non-integer value: "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz…" (line 1`,
	}
	for q, want := range cases {
		errs := gqlErrors(t, q)
		if len(errs) == 0 {
			t.Fatalf("%.60s: no error", q)
		}
		for _, e := range errs {
			// gqlgen marks its own errors with a code; the presenter sees them like this.
			if e.Extensions == nil {
				e.Extensions = map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}
				if strings.HasPrefix(e.Message, "Expected") {
					e.Extensions["code"] = "GRAPHQL_PARSE_FAILED"
				}
			}
		}
		got := presentError(context.Background(), log, errs[0])
		if strings.Contains(got.Message, strings.Repeat("z", apperr.QuoteLimit+1)) {
			t.Errorf("%.60s: quotes more than a short prefix: %q", q, got.Message)
		}
		if got.Extensions["code"] != "INVALID_INPUT" || !strings.HasPrefix(got.Message, want) || len(got.Message) > maxQuotedMessage || strings.Contains(got.Message, long[:200]) {
			t.Errorf("%.60s:\n got %q %v\nwant %q", q, got.Message, got.Extensions, want)
		}
	}
	for msg, want := range map[string]string{
		"operation  not found":     "the document holds several operations: name the one to run in operationName",
		"operation Nope not found": `the document has no operation named "Nope": check operationName`,
		"no operation provided":    `the request holds no operation`,
	} {
		got := presentError(context.Background(), log, &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}})
		if got.Message != want && !strings.HasPrefix(got.Message, want) || got.Extensions["code"] != "INVALID_INPUT" {
			t.Errorf("%q presented as %q", msg, got.Message)
		}
	}
	got := presentError(context.Background(), log, &gqlerror.Error{Message: "operation has complexity 2345, which exceeds the limit of 2000", Extensions: map[string]any{"code": "COMPLEXITY_LIMIT_EXCEEDED"}})
	if got.Extensions["code"] != "INVALID_INPUT" || !strings.Contains(got.Message, "ask for fewer fields") {
		t.Errorf("complexity presented as %q %v", got.Message, got.Extensions)
	}
	// gqlgen's own execution errors (a path, no code) are the server's fault.
	got = presentError(context.Background(), log, &gqlerror.Error{Message: "must not be null", Path: ast.Path{ast.PathName("node")}})
	if got.Extensions["code"] != "INTERNAL" {
		t.Errorf("execution error presented as %q %v", got.Message, got.Extensions)
	}
}

func TestRootFieldLimitCountsAliasesAndFragments(t *testing.T) {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: limitsSchema})
	count := func(q string) int {
		doc, errs := gqlparser.LoadQuery(schema, q)
		if errs != nil {
			t.Fatal(errs)
		}
		n := 0
		walkRootFields(doc, doc.Operations[0].SelectionSet, func(*ast.Field) { n++ })
		return n
	}
	cases := map[string]int{
		`mutation { a: touch(name: "x") { name } b: touch(name: "y") { name } }`:                     2,
		`mutation { ...F ...F } fragment F on Mutation { a: touch(name: "x") { name } }`:             2,
		`mutation { ... on Mutation { a: touch(name: "x") { name } } c: touch(name: "z") { name } }`: 2,
		`{ node(name: "a") { child { child { name } } } }`:                                           1,
	}
	for q, want := range cases {
		if got := count(q); got != want {
			t.Errorf("%s: %d root fields, want %d", q, got, want)
		}
	}
	// An invalid document (a fragment cycle) still ends.
	doc, err := parser.ParseQuery(&ast.Source{Input: `mutation { ...A } fragment A on Mutation { ...B } fragment B on Mutation { ...A touch(name: "x") { name } }`})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	walkRootFields(doc, doc.Operations[0].SelectionSet, func(*ast.Field) { n++ })
	if n != 1 {
		t.Fatalf("cycle: %d fields", n)
	}
}
