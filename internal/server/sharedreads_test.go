package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/apelora/fabric/domain/identity"
)

// Identical queries in flight share one execution and its answer; another caller, other
// variables or a mutation in between each get their own.
func TestIdenticalQueriesInFlightShareOneExecution(t *testing.T) {
	var s sharedReads
	var runs atomic.Int32
	release := make(chan struct{})
	next := func(ctx context.Context) graphql.ResponseHandler {
		return func(ctx context.Context) *graphql.Response {
			n := runs.Add(1)
			<-release
			return &graphql.Response{Data: []byte(`{"run":` + string(rune('0'+n)) + `}`)}
		}
	}
	ask := func(who int64, vars map[string]any) context.Context {
		ctx := identity.WithIdentity(context.Background(), &identity.Identity{ID: who, Name: "viewer"})
		return graphql.WithOperationContext(ctx, &graphql.OperationContext{RawQuery: `query($n: String) { machine(name: $n) { name } }`, Variables: vars})
	}
	type answer struct {
		group string
		data  string
	}
	answers := make(chan answer, 12)
	var wg sync.WaitGroup
	start := func(group string, ctx context.Context) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := s.share(ctx, next)
			answers <- answer{group, string(h(ctx).Data)}
			if again := h(ctx); again != nil {
				t.Errorf("a query answered twice: %s", again.Data)
			}
		}()
	}
	for range 10 {
		start("same", ask(1, map[string]any{"n": "node-1"}))
	}
	start("other caller", ask(2, map[string]any{"n": "node-1"}))
	start("other variables", ask(1, map[string]any{"n": "node-2"}))
	deadline := time.Now().Add(10 * time.Second)
	for runs.Load() != 3 || s.group.Keys() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d executions, %d keys in flight; want 3 and 3", runs.Load(), s.group.Keys())
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(answers)
	same := map[string]bool{}
	for a := range answers {
		if a.group == "same" {
			same[a.data] = true
		}
	}
	if len(same) != 1 || runs.Load() != 3 {
		t.Fatalf("ten identical queries got %d different answers from %d executions; want one shared", len(same), runs.Load())
	}
	if s.group.Keys() != 0 {
		t.Fatalf("%d keys kept after the answers", s.group.Keys())
	}
}

// A caller without an identity (refused before it reaches here) or an operation context
// is never shared.
func TestReadKeyNeedsACallerAndAnOperation(t *testing.T) {
	if _, ok := readKey(context.Background()); ok {
		t.Fatal("a key without a caller")
	}
	ctx := graphql.WithOperationContext(context.Background(), &graphql.OperationContext{RawQuery: `{ fleet { machines { name } } }`})
	if _, ok := readKey(ctx); ok {
		t.Fatal("a key without an identity")
	}
	a, _ := readKey(identity.WithIdentity(ctx, &identity.Identity{ID: 1}))
	b, _ := readKey(identity.WithIdentity(ctx, &identity.Identity{ID: 2}))
	if a == "" || a == b {
		t.Fatalf("two callers share the key %q", a)
	}
}
