package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/testkit/producttest"
)

// mutationCall is one Mutation field called with made-up but well-formed arguments.
type mutationCall struct {
	field string
	query string
	// machine is what its audit event must name: the walk's string where the mutation's
	// declaration (internal/mutations) says an argument names its machine, else "".
	machine string
}

// everyMutation walks the schema, so a mutation added later is covered without anyone
// remembering to add it here; each must be declared (@change).
func everyMutation(t *testing.T) []mutationCall {
	t.Helper()
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	if schema.Mutation == nil || len(schema.Mutation.Fields) == 0 {
		t.Fatal("the schema has no mutations to walk")
	}
	var calls []mutationCall
	for _, f := range schema.Mutation.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		var args []string
		for _, a := range f.Arguments {
			if a.Type.NonNull && a.DefaultValue == nil {
				args = append(args, a.Name+": "+literal(schema, a.Type, 0))
			}
		}
		q := "mutation { " + f.Name
		if len(args) > 0 {
			q += "(" + strings.Join(args, ", ") + ")"
		}
		if def := schema.Types[f.Type.Name()]; def != nil && (def.Kind == ast.Object || def.Kind == ast.Interface || def.Kind == ast.Union) {
			q += " { __typename }"
		}
		decl, ok := mutations.Of(f.Name)
		if !ok {
			t.Fatalf("Mutation.%s has no declaration: add @change beside it in schema/ and run go generate ./...", f.Name)
		}
		call := mutationCall{field: f.Name, query: q + " }"}
		if decl.About != "" {
			call.machine = walkTarget
		}
		calls = append(calls, call)
	}
	if n := len(mutations.All()); n != len(calls) {
		t.Fatalf("%d declared mutations, %d in the schema: run go generate ./...", n, len(calls))
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].field < calls[j].field })
	return calls
}

// literal returns a GraphQL literal of type t. Strings are valid machine names, so an
// allowed call would really act: the refusal is what stops it.
func literal(schema *ast.Schema, t *ast.Type, depth int) string {
	if t.Elem != nil {
		return "[" + literal(schema, t.Elem, depth) + "]"
	}
	def := schema.Types[t.NamedType]
	switch {
	case def == nil:
		return `"x"`
	case def.Kind == ast.Enum:
		return def.EnumValues[0].Name
	case def.Kind == ast.InputObject:
		var fields []string
		for _, f := range def.Fields {
			if f.Type.NonNull && f.DefaultValue == nil {
				fields = append(fields, f.Name+": "+literal(schema, f.Type, depth+1))
			}
		}
		return "{" + strings.Join(fields, ", ") + "}"
	}
	switch t.NamedType {
	case "Int":
		return "1"
	case "Float":
		return "1.0"
	case "Boolean":
		return "false"
	case "ID":
		return `"1"`
	case "Time":
		return `"` + time.Now().UTC().Format(time.RFC3339) + `"`
	case "Map":
		return "{}"
	default:
		return `"` + walkTarget + `"`
	}
}

// walkTarget is every string the walk sends.
const walkTarget = "walk-target"

func TestEveryMutationIsRefusedWithoutManageInfrastructure(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	eraser := e.UncheckedIdentity("eraser", identity.HardwareDelete)
	manager := e.Identity("manager", identity.ManageInfrastructure)

	callers := []struct {
		name, token, actor, code string
	}{
		{"no token", "", "anonymous", "UNAUTHENTICATED"},
		{"unknown token", "apl_not-a-real-token", "anonymous", "UNAUTHENTICATED"},
		{"view-infrastructure only", viewer, "viewer", "FORBIDDEN"},
		{"hardware.delete only", eraser, "eraser", "FORBIDDEN"},
	}
	calls := everyMutation(t)
	for _, call := range calls {
		for _, c := range callers {
			t.Run(call.field+"/"+c.name, func(t *testing.T) {
				before, audits := e.Snapshot(), e.Count("audit_events")
				r := e.GQL(c.token, call.query, nil)
				if r.Code() != c.code {
					t.Fatalf("%s: got %q (%+v), want %s", call.query, r.Code(), r.Errors, c.code)
				}
				if r.Data != nil && r.Data[call.field] != nil {
					t.Fatalf("refused mutation returned data: %v", r.Data)
				}
				if after := e.Snapshot(); after != before {
					t.Fatalf("refused mutation changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				if n := e.Count("audit_events"); n != audits+1 {
					t.Fatalf("refused mutation wrote %d audit events, want 1", n-audits)
				}
				var actor, action, machine, outcome, errText string
				row := e.DB.Store.Pool().QueryRow(t.Context(), `SELECT actor, action, coalesce(machine, ''), outcome, coalesce(error,'') FROM audit_events ORDER BY id DESC LIMIT 1`)
				if err := row.Scan(&actor, &action, &machine, &outcome, &errText); err != nil {
					t.Fatal(err)
				}
				if actor != c.actor || action != call.field || outcome != "REFUSED" || errText == "" {
					t.Fatalf("audit event = actor %q action %q outcome %q error %q; want %q %q REFUSED with a reason", actor, action, outcome, errText, c.actor, call.field)
				}
				if machine != call.machine {
					t.Fatalf("audit event is about machine %q; the declaration of %s says %q", machine, call.field, call.machine)
				}
			})
		}
		// The walk makes calls the gate lets through: with the permission, the same call
		// is not refused for want of it (so the refusals above are not accidents of
		// malformed queries).
		t.Run(call.field+"/manage-infrastructure gets past the gate", func(t *testing.T) {
			r := e.GQL(manager, call.query, nil)
			if c := r.Code(); c == "UNAUTHENTICATED" || c == "FORBIDDEN" || c == "INVALID_INPUT" && strings.HasPrefix(r.Errors[0].Message, "the query ") {
				t.Fatalf("%s with manage-infrastructure: %s %+v", call.query, c, r.Errors)
			}
		})
	}
	if len(calls) < 2 {
		t.Fatalf("walked %d mutations; the schema has more", len(calls))
	}
	t.Logf("walked %d mutations: %v", len(calls), fmt.Sprint(calls))
}

func TestReadsNeedAnAuthenticatedIdentity(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	eraser := e.UncheckedIdentity("eraser", identity.HardwareDelete)
	e.MustGQL(manager, `mutation { registerMachine(input: {name: "node-1", provisioner: MANUAL}) { machine { name } } }`, nil)

	for _, q := range []string{`{ machines { name } }`, `{ machine(name: "node-1") { name } }`, `{ auditEvents { edges { node { id } } } }`, `{ viewer { name } }`, `{ __schema { queryType { name } } }`} {
		for _, c := range []struct{ token, code string }{{"", "UNAUTHENTICATED"}, {"apl_wrong", "UNAUTHENTICATED"}, {eraser, "FORBIDDEN"}} {
			r := e.GQL(c.token, q, nil)
			if r.Code() != c.code || r.Data != nil {
				t.Errorf("%s with token %q: code %q data %v; want %s and no data", q, c.token, r.Code(), r.Data, c.code)
			}
		}
	}
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	d := e.MustGQL(viewer, `{ machines { name } viewer { name permissions } }`, nil)
	if got := fmt.Sprint(d["machines"]); got != "[map[name:node-1]]" {
		t.Errorf("viewer sees machines %s", got)
	}
	// manage-infrastructure implies view-infrastructure.
	e.MustGQL(manager, `{ machines { name } }`, nil)
}

// Without an Incus admin identity configured, every mutation is refused, audited, and
// changes nothing, even for an administrator with every permission.
func TestEveryMutationIsRefusedWithoutIncusConfigured(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithoutIncus())
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	for _, call := range everyMutation(t) {
		before, audits := e.Snapshot(), e.Count("audit_events")
		r := e.GQL(admin, call.query, nil)
		if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "Incus is not configured") {
			t.Fatalf("%s: %+v", call.field, r.Errors)
		}
		if e.Snapshot() != before || e.Count("audit_events") != audits+1 {
			t.Fatalf("%s: changed the database or did not audit once", call.field)
		}
		if got := e.Scalar(`SELECT outcome FROM audit_events ORDER BY id DESC LIMIT 1`); got != "REFUSED" {
			t.Fatalf("%s audited as %v", call.field, got)
		}
	}
	// Reads still answer, and say why membership is unknown.
	d := e.MustGQL(admin, `{ fleet { sources { incus { configured available message } } } }`, nil)
	if got := fmt.Sprint(d["fleet"].(map[string]any)["sources"]); !strings.Contains(got, "configured:false") || !strings.Contains(got, "not configured") {
		t.Fatalf("fleet sources without Incus: %s", got)
	}
}
