package server

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/internal/mutations"
)

// The gate reads each Mutation field's declaration for the audit event's machine and the
// dry run: a field without one would be audited about no machine and never planned.
func TestEveryMutationFieldIsDeclared(t *testing.T) {
	mutation := graph.NewExecutableSchema(graph.Config{}).Schema().Mutation
	fields := 0
	for _, f := range mutation.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		fields++
		m, ok := mutations.Of(f.Name)
		if !ok {
			t.Errorf("Mutation.%s has no declaration: add @change beside it in schema/ and run go generate ./...", f.Name)
			continue
		}
		args := map[string]any{"input": map[string]any{"dryRun": true}}
		if m.About != "" {
			// The path reaches the argument the schema has (the generator checked it).
			path := strings.Split(m.About, ".")
			at := args
			for _, p := range path[:len(path)-1] {
				next, _ := at[p].(map[string]any)
				if next == nil {
					next = map[string]any{}
					at[p] = next
				}
				at = next
			}
			at[path[len(path)-1]] = "node-7"
		}
		if got, want := m.MachineIn(args), map[bool]string{true: "node-7", false: ""}[m.About != ""]; got != want {
			t.Errorf("%s is about %q, want %q", f.Name, got, want)
		}
		if !m.DryRunIn(args) || m.DryRunIn(map[string]any{"input": map[string]any{"dryRun": false}}) {
			t.Errorf("%s: dryRun not read from %s", f.Name, mutations.DryRun)
		}
	}
	if n := len(mutations.All()); n != fields {
		t.Errorf("%d declarations for %d Mutation fields: run go generate ./...", n, fields)
	}
}
