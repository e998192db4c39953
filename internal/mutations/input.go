package mutations

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
)

// The directives beside input fields that say how a plan's hash covers them
// (schema/change.graphqls).
const (
	// SetDirective marks a list whose order does not matter: the hash covers it sorted.
	SetDirective = "set"
	// IgnoredDirective marks a field the hash does not cover, with the reason why.
	IgnoredDirective = "planIgnores"
)

// Input is a call's arguments as a plan's hash covers them (and its audit event records
// them as approved): every field of the argument types walked from the schema, a default
// filled in where the call gave none (null where there is none), sets (@set) sorted, scalars
// in one form (Int a number, ID a string, Time UTC), and left out: dryRun and planHash
// (the call's own mode and confirmation) and fields declared @planIgnores. So two calls
// that ask for the same change have one Input, and any other call another.
func Input(schema *ast.Schema, field *ast.FieldDefinition, args map[string]any) map[string]any {
	out := make(map[string]any, len(field.Arguments))
	for _, a := range field.Arguments {
		v, given := args[a.Name]
		if !given && a.DefaultValue != nil {
			v, _ = a.DefaultValue.Value(nil)
		}
		out[a.Name] = normal(schema, a.Type, v, a.Name)
	}
	return out
}

// Ignored returns why a plan's hash does not cover the input field f (its @planIgnores
// reason), and whether it is so declared.
func Ignored(f *ast.FieldDefinition) (reason string, ignored bool) {
	d := f.Directives.ForName(IgnoredDirective)
	if d == nil {
		return "", false
	}
	if r := d.Arguments.ForName("reason"); r != nil && r.Value != nil {
		return r.Value.Raw, true
	}
	return "", true
}

// Covered reports whether a plan's hash covers the input field f at the argument path
// (such as "input.permissions"): false for dryRun, planHash and fields declared
// @planIgnores.
func Covered(path string, f *ast.FieldDefinition) bool {
	if path == DryRun || path == PlanHash {
		return false
	}
	_, ignored := Ignored(f)
	return !ignored
}

// IsSet reports whether the input field f is a set (@set): its order does not matter.
func IsSet(f *ast.FieldDefinition) bool { return f.Directives.ForName(SetDirective) != nil }

func normal(schema *ast.Schema, t *ast.Type, v any, path string) any {
	if v == nil {
		return nil
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			// GraphQL's input coercion: a single value stands for a list of one.
			list = []any{v}
		}
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = normal(schema, t.Elem, e, path)
		}
		return out
	}
	def := schema.Types[t.NamedType]
	if def == nil {
		return v
	}
	switch def.Kind {
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(def.Fields))
		for _, f := range def.Fields {
			fp := path + "." + f.Name
			if !Covered(fp, f) {
				continue
			}
			fv, given := m[f.Name]
			if !given && f.DefaultValue != nil {
				fv, _ = f.DefaultValue.Value(nil)
			}
			n := normal(schema, f.Type, fv, fp)
			if list, ok := n.([]any); ok && IsSet(f) {
				n = sortedByJSON(list)
			}
			out[f.Name] = n
		}
		return out
	case ast.Enum:
		return fmt.Sprint(v)
	}
	switch t.NamedType {
	case "Int":
		return integer(v)
	case "Float":
		if f, err := strconv.ParseFloat(fmt.Sprint(v), 64); err == nil {
			return f
		}
	case "ID":
		return fmt.Sprint(v)
	case "Time":
		if s, ok := v.(string); ok {
			if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return at.UTC().Format(time.RFC3339Nano)
			}
		}
	}
	return v
}

func integer(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
	case string:
		if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
			return i
		}
	}
	return v
}

// sortedByJSON sorts a set's members by their JSON (maps encode with sorted keys).
func sortedByJSON(list []any) []any {
	type keyed struct {
		key string
		v   any
	}
	ks := make([]keyed, len(list))
	for i, v := range list {
		b, _ := json.Marshal(v)
		ks[i] = keyed{string(b), v}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k.v
	}
	return out
}
