package resolvers_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/graph"
)

// An old client still works: the documents the Go client and Fabric Console sent before
// the API's words changed (testdata/oldclient: plan steps, a rolling reboot's step, member
// operations, the memberOperation subscription) are valid against today's schema. That
// they are answered, and answer what the new names answer, is proven against a real server
// (e2e: TestEvacuateAndRestoreAMember, TestRollingRebootOnARealCluster,
// TestEveryFieldOfEveryAnswer, which asks every field, deprecated ones included).
func TestAnOldClientsDocumentsAreStillValid(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	for client, pattern := range map[string]string{"Go client": "go-*.graphql", "Fabric Console": "console.graphql"} {
		files, err := filepath.Glob(filepath.Join("testdata", "oldclient", pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no documents (%v)", client, err)
		}
		var doc strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc.Write(b)
			doc.WriteString("\n")
		}
		q, errs := gqlparser.LoadQuery(schema, doc.String())
		if len(errs) > 0 {
			t.Errorf("%s's old documents are no longer valid: %v", client, errs)
			continue
		}
		deprecated := 0
		walkFields(q, func(f *ast.Field) {
			if f.Definition != nil && f.Definition.Directives.ForName("deprecated") != nil {
				deprecated++
			}
		})
		if deprecated == 0 {
			t.Errorf("%s's old documents ask for no deprecated field: the test asks nothing", client)
		}
		t.Logf("%s: %d operations, %d fragments, %d deprecated fields asked", client, len(q.Operations), len(q.Fragments), deprecated)
	}
}

// Every deprecated field says what replaces it ("use NAME …"): a field of the same type (for
// a root field, of any root type) that is not deprecated itself, so a client knows where
// to move.
func TestEveryDeprecatedFieldNamesItsReplacement(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	use := regexp.MustCompile(`^(?i:use) ([a-zA-Z]+)\b`)
	roots := []*ast.Definition{schema.Query, schema.Mutation, schema.Subscription}
	n := 0
	for _, def := range schema.Types {
		if strings.HasPrefix(def.Name, "__") {
			continue
		}
		for _, f := range def.Fields {
			d := f.Directives.ForName("deprecated")
			if d == nil {
				continue
			}
			n++
			reason := ""
			if a := d.Arguments.ForName("reason"); a != nil {
				reason = a.Value.Raw
			}
			m := use.FindStringSubmatch(reason)
			if m == nil {
				t.Errorf("%s.%s: deprecated with reason %q, want \"use FIELD …\"", def.Name, f.Name, reason)
				continue
			}
			by := def.Fields.ForName(m[1])
			for _, r := range roots {
				if by == nil && slices.Contains(roots, def) {
					by = r.Fields.ForName(m[1])
				}
			}
			if by == nil || by.Directives.ForName("deprecated") != nil {
				t.Errorf("%s.%s: its replacement %s.%s is not a field in use", def.Name, f.Name, def.Name, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no deprecated field in the schema")
	}
}

// walkFields calls fn for every field of every operation and fragment of q.
func walkFields(q *ast.QueryDocument, fn func(*ast.Field)) {
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				fn(s)
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			}
		}
	}
	for _, o := range q.Operations {
		walk(o.SelectionSet)
	}
	for _, f := range q.Fragments {
		walk(f.SelectionSet)
	}
}
