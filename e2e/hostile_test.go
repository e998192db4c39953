package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/producttest"
)

// maxAuditRowBytes is the most one audit row's columns may hold: parameters and details
// (audit.MaxEventBytes of JSON; PostgreSQL's jsonb text adds a space after each colon and
// comma) and the text columns.
const maxAuditRowBytes = audit.MaxEventBytes*5/4 + audit.MaxErrorBytes + audit.MaxMachineBytes + 2*audit.MaxNameBytes + audit.MaxRequestIDBytes

// hostileCall is one Mutation field with every String or ID argument (and input field)
// taken from the variable $v, so that a hostile value reaches all of them at once.
type hostileCall struct {
	field, query string
	// dryRun: the same call with dryRun: true in its input (answered with a plan, or
	// refused as invalid input; never a change).
	dryRun bool
	// text: the call carries the hostile value (it has a String or ID argument; one such
	// as setPlacementGuard takes booleans only).
	text bool
}

func hostileMutations(t *testing.T) []hostileCall {
	t.Helper()
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	var calls []hostileCall
	for _, f := range schema.Mutation.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		vars := map[string]bool{}
		var args []string
		for _, a := range f.Arguments {
			if v := hostileLiteral(schema, a.Type, vars); v != "" {
				args = append(args, a.Name+": "+v)
			}
		}
		var decl []string
		if vars["v"] {
			decl = append(decl, "$v: String!")
		}
		if vars["id"] {
			decl = append(decl, "$id: ID!")
		}
		q := "mutation"
		if len(decl) > 0 {
			q += "(" + strings.Join(decl, ", ") + ")"
		}
		q += " { " + f.Name
		if len(args) > 0 {
			q += "(" + strings.Join(args, ", ") + ")"
		}
		if def := schema.Types[f.Type.Name()]; def != nil && (def.Kind == ast.Object || def.Kind == ast.Interface || def.Kind == ast.Union) {
			q += " { __typename }"
		}
		text := vars["v"] || vars["id"]
		calls = append(calls, hostileCall{field: f.Name, query: q + " }", text: text})
		// Every declared change takes dryRun where mutations.DryRun says (the gate reads it
		// there).
		if _, ok := mutations.Of(f.Name); !ok {
			t.Fatalf("Mutation.%s has no declaration (@change): the gate cannot read its dry run", f.Name)
		}
		if mutations.DryRun != "input.dryRun" || !strings.Contains(q, "(input: {") {
			t.Fatalf("mutation %s: its dryRun is at %s, which this walk cannot write", f.Name, mutations.DryRun)
		}
		dry := strings.Replace(q, "(input: {", "(input: {dryRun: true, ", 1)
		dry = strings.Replace(dry, "{ __typename }", "{ __typename plan { refused } }", 1)
		calls = append(calls, hostileCall{field: f.Name, query: dry + " }", dryRun: true, text: text})
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].field < calls[j].field })
	if len(calls) < 2 {
		t.Fatalf("walked %d mutations", len(calls))
	}
	return calls
}

// hostileLiteral writes a value of type t that uses $v for strings and $id for ids, or ""
// for an optional argument of another type (left out).
func hostileLiteral(schema *ast.Schema, t *ast.Type, vars map[string]bool) string {
	if t.Elem != nil {
		if v := hostileLiteral(schema, t.Elem, vars); v != "" {
			return "[" + v + "]"
		}
		return "[]"
	}
	switch t.NamedType {
	case "String":
		vars["v"] = true
		return "$v"
	case "ID":
		vars["id"] = true
		return "$id"
	}
	def := schema.Types[t.NamedType]
	switch {
	case def == nil:
		return ""
	case def.Kind == ast.InputObject:
		var fields []string
		for _, f := range def.Fields {
			if v := hostileLiteral(schema, f.Type, vars); v != "" && (f.Type.NonNull || f.Type.NamedType == "String" || f.Type.Elem != nil) {
				fields = append(fields, f.Name+": "+v)
			}
		}
		return "{" + strings.Join(fields, ", ") + "}"
	case !t.NonNull:
		return ""
	case def.Kind == ast.Enum:
		return def.EnumValues[0].Name
	}
	switch t.NamedType {
	case "Int":
		return "1"
	case "Boolean":
		return "false"
	}
	return ""
}

// hostileValue is a value as it appears inside a JSON string of the request body.
type hostileValue struct {
	name string
	raw  []byte // JSON string content, not quoted
}

func hostileValues() []hostileValue {
	return []hostileValue{
		{"NUL", []byte(`node\u0000-1`)},
		// JSON carries no invalid UTF-8 (decoders replace it), but a client can send the bytes.
		{"invalid UTF-8", []byte("node-\xff\xfe\xc3(")},
		{"control characters", []byte(`\u001b[31m\r\n\u202e`)},
		{"just under 1 MiB", bytes.Repeat([]byte("a"), server.MaxBodyBytes-8<<10)},
		{"10 MiB", bytes.Repeat([]byte("a"), 10<<20)},
	}
}

func hostileBody(query string, v hostileValue) []byte {
	var b bytes.Buffer
	q, _ := json.Marshal(query)
	b.WriteString(`{"query":`)
	b.Write(q)
	b.WriteString(`,"variables":{"v":"`)
	b.Write(v.raw)
	b.WriteString(`","id":"`)
	if len(v.raw) < 1<<10 {
		b.Write(v.raw)
	} else {
		b.WriteString("1") // the large value is sent once
	}
	b.WriteString(`"}}`)
	return b.Bytes()
}

// rawResponse is an answer read byte for byte.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to /graphql as it is.
func post(t *testing.T, e *producttest.Env, token, contentType string, body []byte) rawResponse {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.Base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %d bytes: %v", len(body), err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: raw}
}

// errors returns the GraphQL errors of the answer, failing unless it is a JSON GraphQL
// response whose every error carries a documented code.
func (r rawResponse) errors(t *testing.T) []producttest.GQLError {
	t.Helper()
	var out struct {
		Errors []producttest.GQLError `json:"errors"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("answer %d is not JSON: %.300s", r.status, r.body)
	}
	for _, e := range out.Errors {
		code, _ := e.Extensions["code"].(string)
		if !slices.Contains(apperr.Codes, apperr.Code(code)) {
			t.Fatalf("error without a documented code (HTTP %d): %+v", r.status, e)
		}
	}
	return out.Errors
}

func (r rawResponse) code(t *testing.T) string {
	t.Helper()
	errs := r.errors(t)
	if len(errs) == 0 {
		return ""
	}
	return errs[0].Extensions["code"].(string)
}

// auditRow is an audit event as stored, with the bytes its columns hold.
type auditRow struct {
	id                                               int64
	actor, action, machine, outcome, errText, params string
	details                                          string
	bytes                                            int
}

func auditRowsAfter(t *testing.T, e *producttest.Env, after int64) []auditRow {
	t.Helper()
	rows, err := e.DB.Store.Pool().Query(t.Context(), `SELECT id, actor, action, coalesce(machine, ''), outcome, coalesce(error, ''),
		parameters::text, details::text,
		octet_length(actor) + octet_length(action) + coalesce(octet_length(machine), 0) + coalesce(octet_length(error), 0)
		  + octet_length(request_id) + octet_length(parameters::text) + octet_length(details::text)
		FROM audit_events WHERE id > $1 ORDER BY id`, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.id, &r.actor, &r.action, &r.machine, &r.outcome, &r.errText, &r.params, &r.details, &r.bytes); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func lastAuditID(t *testing.T, e *producttest.Env) int64 {
	t.Helper()
	return e.Scalar(`SELECT coalesce(max(id), 0) FROM audit_events`).(int64)
}

func auditTableBytes(t *testing.T, e *producttest.Env) int64 {
	t.Helper()
	return e.Scalar(`SELECT pg_total_relation_size('audit_events')`).(int64)
}

func serverUp(t *testing.T, e *producttest.Env) {
	t.Helper()
	resp, err := http.Get(e.Base + "/healthz")
	if err != nil {
		t.Fatalf("the server is down: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

// Whatever bytes a caller sends in whichever mutation, with or without a token, the audit
// keeps exactly one bounded event per call (none for an allowed caller's dry run), the answer carries a documented code and
// echoes no more than a short prefix, and the server stays up.
func TestHostileInputLeavesOneBoundedAuditEventPerCall(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	calls := hostileMutations(t)
	sizeBefore := auditTableBytes(t, e)
	sent, total, plans := 0, 0, 0
	for _, call := range calls {
		for _, v := range hostileValues() {
			for _, caller := range []struct{ name, token, actor string }{{"anonymous", "", "anonymous"}, {"manage-infrastructure", manager, "manager"}} {
				name := call.field
				if call.dryRun {
					name += "/dryRun"
				}
				t.Run(name+"/"+v.name+"/"+caller.name, func(t *testing.T) {
					before := lastAuditID(t, e)
					state := e.Snapshot()
					body := hostileBody(call.query, v)
					r := post(t, e, caller.token, "application/json", body)
					sent += len(body)
					errs := r.errors(t)
					// A dry run may answer a plan (refused here: no Incus) instead of an error.
					planned := call.dryRun && bytes.Contains(r.body, []byte(`"plan":{"refused":true}`))
					if planned {
						plans++
					}
					if len(errs) == 0 && !planned {
						t.Fatalf("hostile call succeeded: %.300s", r.body)
					}
					if call.dryRun && e.Snapshot() != state {
						t.Fatal("a hostile dry run changed the database")
					}
					if len(r.body) > 16<<10 || bytes.Contains(r.body, bytes.Repeat([]byte("a"), 2*apperr.QuoteLimit)) {
						t.Fatalf("answer of %d bytes echoes the value: %.500s", len(r.body), r.body)
					}
					rows := auditRowsAfter(t, e, before)
					// A dry run by a caller allowed to make the change (a plan, or INVALID_INPUT)
					// is no audit event; every other call is exactly one.
					if call.dryRun && caller.token != "" && len(body) <= server.MaxBodyBytes {
						if len(rows) != 0 {
							t.Fatalf("%d audit events for an allowed dry run (answer %d %.300s)", len(rows), r.status, r.body)
						}
						return
					}
					if len(rows) != 1 {
						t.Fatalf("%d audit events for one call (answer %d %.300s)", len(rows), r.status, r.body)
					}
					row := rows[0]
					total += row.bytes
					if row.bytes > maxAuditRowBytes || row.actor != caller.actor {
						t.Fatalf("audit event of %d bytes (limit %d) by %q", row.bytes, maxAuditRowBytes, row.actor)
					}
					wantAction := call.field
					if len(body) > server.MaxBodyBytes {
						wantAction = server.RejectedRequest
						if r.status != http.StatusRequestEntityTooLarge || r.code(t) != string(apperr.RequestTooLarge) {
							t.Fatalf("10 MiB body: %d %s", r.status, r.body)
						}
					}
					// A dry run refused by the gate (here: no Incus) is audited as REFUSED like any
					// refused call; only an allowed caller's dry run is no audit event.
					if row.action != wantAction || row.outcome == "SUCCEEDED" || (planned && row.outcome != "REFUSED") {
						t.Fatalf("audit event %s %s, want %s refused or failed (REFUSED for a refused plan)", row.action, row.outcome, wantAction)
					}
					if v.name == "NUL" && call.text && caller.token != "" && !strings.Contains(row.params, `"escaped": true`) {
						t.Fatalf("NUL value not marked escaped in %s", row.params)
					}
				})
			}
		}
	}
	serverUp(t, e)
	growth := auditTableBytes(t, e) - sizeBefore
	t.Logf("sent %d MiB in %d calls (half of them dry runs, %d answered a refused plan); audit rows hold %d KiB; audit_events grew by %d KiB", sent>>20, 2*len(calls)*len(hostileValues()), plans, total>>10, growth>>10)
	if plans == 0 {
		t.Fatal("no hostile dry run answered a plan: the walk did not reach the planning path")
	}
	if limit := int64(2*len(calls)*len(hostileValues())*maxAuditRowBytes) + 1<<20; growth > limit {
		t.Fatalf("audit_events grew by %d bytes, more than %d", growth, limit)
	}
}
