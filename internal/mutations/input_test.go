package mutations

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

const inputSchema = `
directive @set on INPUT_FIELD_DEFINITION
directive @planIgnores(reason: String!) on INPUT_FIELD_DEFINITION
scalar Time
enum Perm { A B C }
type Query { x: Int }
type Mutation { doIt(input: DoItInput!): Int }
input Entry { key: String! value: String! }
input DoItInput {
  name: String!
  perms: [Perm!]! @set
  order: [String!]
  entries: [Entry!] @set
  count: Int = 3
  note: String @planIgnores(reason: "shown to the operator only")
  at: Time
  id: ID
  dryRun: Boolean = false
  planHash: String
}
`

// A call's input, as a plan's hash covers it: every field, defaults filled, sets sorted,
// scalars in one form; dryRun, planHash and @planIgnores fields left out.
func TestInputIsTheCallAsItsHashCoversIt(t *testing.T) {
	schema, err := gqlparser.LoadSchema(&ast.Source{Name: "s", Input: inputSchema})
	if err != nil {
		t.Fatal(err)
	}
	f := schema.Mutation.Fields.ForName("doIt")
	in := func(m map[string]any) map[string]any { return Input(schema, f, map[string]any{"input": m}) }
	got := in(map[string]any{"name": "a", "perms": []any{"C", "A"}, "order": []any{"y", "x"}, "note": "hi",
		"entries": []any{map[string]any{"key": "k2", "value": "v"}, map[string]any{"value": "v", "key": "k1"}},
		"at":      "2030-01-02T03:04:05+02:00", "id": json.Number("7"), "dryRun": true, "planHash": "sha256:x"})
	want := map[string]any{"input": map[string]any{"name": "a", "perms": []any{"A", "C"}, "order": []any{"y", "x"},
		"entries": []any{map[string]any{"key": "k1", "value": "v"}, map[string]any{"key": "k2", "value": "v"}},
		"count":   int64(3), "at": "2030-01-02T01:04:05Z", "id": "7"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Input =\n%#v\nwant\n%#v", got, want)
	}
	// The same call written otherwise is the same input; another value is another.
	same := in(map[string]any{"name": "a", "perms": []any{"A", "C"}, "order": []any{"y", "x"}, "count": json.Number("3"),
		"entries": []any{map[string]any{"key": "k1", "value": "v"}, map[string]any{"key": "k2", "value": "v"}},
		"at":      "2030-01-02T01:04:05Z", "id": int64(7)})
	if !reflect.DeepEqual(same, want) {
		t.Fatalf("the same call written otherwise: %#v", same)
	}
	for name, other := range map[string]map[string]any{
		"a sequence reordered": {"name": "a", "perms": []any{"A", "C"}, "order": []any{"x", "y"}},
		"another count":        {"name": "a", "perms": []any{"A", "C"}, "count": 4},
		"null for a default":   {"name": "a", "perms": []any{"A", "C"}, "count": nil},
	} {
		if reflect.DeepEqual(in(other), in(map[string]any{"name": "a", "perms": []any{"A", "C"}})) {
			t.Errorf("%s: the same input", name)
		}
	}
	note := schema.Types["DoItInput"].Fields.ForName("note")
	if reason, ok := Ignored(note); !ok || reason != "shown to the operator only" || Covered("input.note", note) {
		t.Errorf("note: %q %v", reason, ok)
	}
	if Covered(DryRun, schema.Types["DoItInput"].Fields.ForName("dryRun")) {
		t.Error("dryRun is covered")
	}
}
