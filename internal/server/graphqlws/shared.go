package graphqlws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// streams are the shared subscriptions running, by key (see shareKey).
type streams struct {
	mu     sync.Mutex
	groups map[string]*group
}

// group is one execution of a shared subscription and the operations (on any socket) it
// feeds.
type group struct {
	key    string
	cancel context.CancelFunc

	mu      sync.Mutex
	members map[*operation]struct{} // nil once the stream has ended
}

// shareKey returns the key under which rc may share its execution, and whether it may: it
// is a subscription to a field in Options.Shared that gives no argument besides the ones
// declared as filters. Subscribers share when their query text, operation name and
// (coerced) variables are the same.
func (t *Transport) shareKey(rc *graphql.OperationContext) (string, bool) {
	if t.opts.Authorize == nil || rc.Operation == nil || rc.Operation.Operation != ast.Subscription {
		return "", false
	}
	fields := graphql.CollectFields(rc, rc.Operation.SelectionSet, []string{"Subscription"})
	if len(fields) != 1 || fields[0].Definition == nil {
		return "", false
	}
	f := fields[0]
	filters, ok := t.opts.Shared[f.Name]
	if !ok {
		return "", false
	}
	args := f.ArgumentMap(rc.Variables)
	for _, def := range f.Definition.Arguments {
		if args[def.Name] != nil && !slices.Contains(filters, def.Name) {
			return "", false
		}
	}
	return OperationKey(rc)
}

// OperationKey is what makes two operations the same one: the same query text, operation
// name and (coerced) variables. Shared streams key subscriptions by it; the server's shared
// reads key queries by it together with who asks. ok is false when the variables cannot be
// encoded (nothing is shared then).
func OperationKey(rc *graphql.OperationContext) (key string, ok bool) {
	vars, err := json.Marshal(rc.Variables) // map keys sorted: the same variables, the same bytes
	if err != nil {
		return "", false
	}
	h := sha256.New()
	for _, part := range []string{rc.OperationName, rc.RawQuery, string(vars)} {
		h.Write([]byte(strconv.Itoa(len(part)))) // lengths first: no two lists of parts give one text
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// join adds op to the stream of key, starting it (executing rc in a context that keeps
// ctx's values but not its end) when none runs.
func (s *streams) join(key string, ctx context.Context, rc *graphql.OperationContext, exec graphql.GraphExecutor, op *operation) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[key]
	if g == nil {
		gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g = &group{key: key, cancel: cancel, members: map[*operation]struct{}{}}
		s.groups[key] = g
		go s.run(gctx, g, rc, exec)
	}
	g.mu.Lock()
	g.members[op] = struct{}{}
	g.mu.Unlock()
	return g
}

// leave removes op from g; the last one out stops the execution.
func (s *streams) leave(g *group, op *operation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.mu.Lock()
	delete(g.members, op)
	empty := g.members != nil && len(g.members) == 0
	g.mu.Unlock()
	if empty && s.groups[g.key] == g {
		delete(s.groups, g.key)
		g.cancel()
	}
}

// run executes the stream and sends each result, encoded once, to every member.
func (s *streams) run(ctx context.Context, g *group, rc *graphql.OperationContext, exec graphql.GraphExecutor) {
	var failure gqlerror.List
	defer func() {
		if r := recover(); r != nil {
			failure = recovered(ctx, rc, exec, r)
		}
		s.end(g, failure)
	}()
	responses, ctx := exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(ctx)
		if resp == nil {
			return
		}
		payload, err := json.Marshal(resp)
		if err != nil {
			failure = gqlerror.List{{Message: "the result could not be encoded"}}
			return
		}
		g.mu.Lock()
		for op := range g.members {
			op.conn.sendNext(op, payload)
		}
		g.mu.Unlock()
	}
}

// end completes (or fails) every member once the stream has ended.
func (s *streams) end(g *group, failure gqlerror.List) {
	s.mu.Lock()
	if s.groups[g.key] == g {
		delete(s.groups, g.key)
	}
	g.mu.Lock()
	members := g.members
	g.members = nil
	g.mu.Unlock()
	s.mu.Unlock()
	g.cancel()
	for op := range members {
		if failure != nil {
			op.conn.fail(op, failure)
		} else {
			op.conn.completed(op)
		}
	}
}
