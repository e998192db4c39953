package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// The schema walk: selections of every field of a type, generated from schema/*.graphqls,
// so a question nobody wrote by hand is still asked (TestEveryFieldOfEveryAnswer).

// schemaDir holds the API contract, relative to this package.
const schemaDir = "../schema"

// walkDepth bounds how deep a generated selection goes below its root field. The schema
// has no type that contains itself today; the bound keeps a future cycle finite, and
// fields it leaves out are logged.
const walkDepth = 8

func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.graphqls"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files in %s: %v", schemaDir, err)
	}
	var srcs []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, &ast.Source{Name: f, Input: string(b)})
	}
	s, gerr := gqlparser.LoadSchema(srcs...)
	if gerr != nil {
		t.Fatalf("schema: %v", gerr)
	}
	return s
}

// selector writes the selection of every field of a type, recursively to walkDepth.
type selector struct {
	s   *ast.Schema
	cut map[string]bool // "Type.field" left out at the depth bound
}

func newSelector(s *ast.Schema) *selector { return &selector{s: s, cut: map[string]bool{}} }

// of is the selection set of every field of the named type (its possible types for an
// interface or a union). A field that needs an argument without a default cannot be
// generated: that is an error, so a schema change that adds one is noticed here.
func (x *selector) of(typeName string, depth int) (string, error) {
	def := x.s.Types[typeName]
	if def == nil {
		return "", fmt.Errorf("no type %s in the schema", typeName)
	}
	var parts []string
	if def.Kind == ast.Interface || def.Kind == ast.Union {
		parts = append(parts, "__typename")
		for _, p := range x.s.GetPossibleTypes(def) {
			sub, err := x.of(p.Name, depth)
			if err != nil {
				return "", err
			}
			parts = append(parts, "... on "+p.Name+" "+sub)
		}
		return "{ " + strings.Join(parts, " ") + " }", nil
	}
	for _, f := range def.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		for _, a := range f.Arguments {
			if a.Type.NonNull && a.DefaultValue == nil {
				return "", fmt.Errorf("%s.%s needs argument %s, which a generated selection cannot fill: teach the walk a value for it", typeName, f.Name, a.Name)
			}
		}
		inner := x.s.Types[f.Type.Name()]
		switch inner.Kind {
		case ast.Scalar, ast.Enum:
			parts = append(parts, f.Name)
		default:
			if depth >= walkDepth {
				x.cut[typeName+"."+f.Name] = true
				continue
			}
			sub, err := x.of(inner.Name, depth+1)
			if err != nil {
				return "", err
			}
			parts = append(parts, f.Name+" "+sub)
		}
	}
	if len(parts) == 0 {
		parts = []string{"__typename"}
	}
	return "{ " + strings.Join(parts, " ") + " }", nil
}

// call writes an operation asking root field f (of Query or Mutation) for every field of
// its type, with args as variables. A required argument missing from args is an error.
func (x *selector) call(kind string, f *ast.FieldDefinition, args map[string]any) (string, map[string]any, error) {
	var decl, pass []string
	vars := map[string]any{}
	for _, a := range f.Arguments {
		v, ok := args[a.Name]
		if !ok {
			if a.Type.NonNull && a.DefaultValue == nil {
				return "", nil, fmt.Errorf("%s.%s needs argument %s: give it one", kind, f.Name, a.Name)
			}
			continue
		}
		decl = append(decl, "$"+a.Name+": "+a.Type.String())
		pass = append(pass, a.Name+": $"+a.Name)
		vars[a.Name] = v
	}
	for name := range args {
		if f.Arguments.ForName(name) == nil {
			return "", nil, fmt.Errorf("%s.%s has no argument %s", kind, f.Name, name)
		}
	}
	sel := ""
	if inner := x.s.Types[f.Type.Name()]; inner.Kind != ast.Scalar && inner.Kind != ast.Enum {
		var err error
		if sel, err = x.of(inner.Name, 1); err != nil {
			return "", nil, err
		}
	}
	var b strings.Builder
	b.WriteString(strings.ToLower(kind))
	if len(decl) > 0 {
		b.WriteString("(" + strings.Join(decl, ", ") + ")")
	}
	b.WriteString(" { " + f.Name)
	if len(pass) > 0 {
		b.WriteString("(" + strings.Join(pass, ", ") + ")")
	}
	b.WriteString(" " + sel + " }")
	return b.String(), vars, nil
}

// schemaRootFields are the fields of a root type, in the schema's order, without introspection.
func schemaRootFields(def *ast.Definition) []*ast.FieldDefinition {
	var out []*ast.FieldDefinition
	for _, f := range def.Fields {
		if !strings.HasPrefix(f.Name, "__") {
			out = append(out, f)
		}
	}
	return out
}

// strip removes the named keys wherever they are in v (decoded JSON).
func strip(v any, keys map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if !keys[k] {
				out[k] = strip(x, keys)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = strip(x, keys)
		}
		return out
	}
	return v
}

// differences lists the paths at which a and b (decoded JSON) differ, each with both values.
func differences(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		var out []string
		for _, k := range names {
			out = append(out, differences(path+"."+k, am[k], bm[k])...)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, differences(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("%s: answered %s, read back %s", path, compact(a), compact(b))}
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
