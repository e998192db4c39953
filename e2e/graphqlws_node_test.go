package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// nodeClient runs the reference graphql-ws client (testdata/graphql-ws, bundled: the same
// graphql-ws release and options as GraphiQL) with cfg, and returns its JSON lines as they
// come.
func nodeClient(t *testing.T, cfg map[string]any) <-chan map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed: scripts/test-deps.sh installs it (nodejs)")
		}
		t.Skip("SKIPPED: node is not installed, so the reference graphql-ws client cannot run (scripts/test-deps.sh installs nodejs)")
	}
	arg, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, node, "testdata/graphql-ws/dist/client.mjs", string(arg))
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("graphql-ws client printed %q", sc.Text())
				continue
			}
			out <- m
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("graphql-ws client stderr:\n%s", stderr.String())
		}
	})
	return out
}

// await returns the client's next line, failing after 20 s or when it ends.
func await(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-lines:
		if !ok {
			t.Fatal("the graphql-ws client ended early")
		}
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("the graphql-ws client said nothing for 20 s")
	}
	return nil
}

func TestTheReferenceGraphQLWSClientQueriesAndSubscribesThroughKeepAlives(t *testing.T) {
	parallel(t)
	const ping = 100 * time.Millisecond
	e := producttest.Start(t, producttest.WithPingInterval(ping))
	token := e.Identity("console", identity.ManageInfrastructure)
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	lines := nodeClient(t, map[string]any{
		"url": ws, "token": token,
		"origin": e.Base, // as GraphiQL's page, served by the server itself
		"operations": []map[string]any{
			{"query": `query { __typename }`},
			{"query": `subscription($m: String) { auditEventRecorded(machine: $m) { action machine actor } }`, "variables": map[string]any{"m": "node-9"}, "take": 1},
		},
	})
	if m := await(t, lines); m["connected"] != true {
		t.Fatalf("got %v, want connected", m)
	}
	if m := await(t, lines); m["op"] != 0.0 || m["next"].(map[string]any)["data"].(map[string]any)["__typename"] != "Query" {
		t.Fatalf("query: got %v", m)
	}
	if m := await(t, lines); m["op"] != 0.0 || m["complete"] != true {
		t.Fatalf("query: got %v, want complete", m)
	}
	// Many ping periods pass before anything happens: the client answers the pings. (The
	// lazy client closes its socket when the query ends and opens one for the
	// subscription.)
	quiet := time.After(15 * ping)
	for waiting := true; waiting; {
		select {
		case m := <-lines:
			if m["connected"] != true && m["closed"] != 1000.0 {
				t.Fatalf("during keep-alives: %v", m)
			}
		case <-quiet:
			waiting = false
		}
	}
	e.MustGQL(token, `mutation { registerMachine(input: {name: "node-8", provisioner: MANUAL}) { machine { name } } }`, nil)
	e.MustGQL(token, `mutation { registerMachine(input: {name: "node-9", provisioner: MANUAL}) { machine { name } } }`, nil)
	m := await(t, lines)
	ev, _ := m["next"].(map[string]any)["data"].(map[string]any)["auditEventRecorded"].(map[string]any)
	if m["op"] != 1.0 || ev["action"] != "registerMachine" || ev["machine"] != "node-9" || ev["actor"] != "console" {
		t.Fatalf("subscription: got %v, want node-9's registerMachine", m)
	}
	if m := await(t, lines); m["complete"] != true {
		t.Fatalf("got %v, want the client's complete", m)
	}
	if m := await(t, lines); m["done"] != true {
		t.Fatalf("got %v", m)
	}
}

func TestTheReferenceGraphQLWSClientIsRefusedFinallyWith4403(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	lines := nodeClient(t, map[string]any{
		"url": ws, "token": "apl_not-a-token", "origin": e.Base,
		"operations": []map[string]any{{"query": `subscription { auditEventRecorded { id } }`}},
	})
	closes := 0
	for {
		m := await(t, lines)
		if m["connected"] == true {
			t.Fatalf("connected with a bad token: %v", m)
		}
		if _, ok := m["closed"]; ok {
			closes++
			if m["closed"] != 4403.0 || m["reason"] != "Forbidden" {
				t.Fatalf("closed with %v, want 4403 Forbidden", m)
			}
		}
		if m["done"] == true {
			break
		}
	}
	if closes != 1 {
		t.Fatalf("%d closes: a refused client must not retry", closes)
	}
}

func TestACrossOriginPageCannotOpenASocket(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	token := e.Identity("console", identity.ViewInfrastructure)
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	lines := nodeClient(t, map[string]any{
		"url": ws, "token": token, "origin": "https://evil.example", "retryAttempts": 0,
		"operations": []map[string]any{{"query": `subscription { auditEventRecorded { id } }`}},
	})
	for {
		m := await(t, lines)
		if m["connected"] == true || m["next"] != nil {
			t.Fatalf("a cross-origin page got through: %v", m)
		}
		if m["done"] == true {
			break
		}
	}
}
