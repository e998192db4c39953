package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/graph/model"
)

// fleetRows writes Fleet.machines itself; these tests prove it writes what gqlgen's own
// executor writes, byte for byte, errors included: for every fleet query the console and
// the Go client (apeloractl) send, read from their sources, for the benchmarks' queries,
// for a selection of every field, and for generated selections (aliases, fragments,
// @skip/@include, __typename, a field selected twice), each on rows filled from the
// schema with every kind of value (nulls where allowed, quotes, control characters,
// invalid UTF-8, floats, times in other zones) and on rows gqlgen answers with an error.

// Fields the model has no field for (answered by a resolver) and the Map scalar: a
// selection with one of them is left to gqlgen whole. A new resolver field on a type
// below Machine belongs here (TestFleetRowsAreWrittenAsGqlgenWrites says which).
var rowsLeftToGqlgen = []string{"Member.version", "MaasMachine.storageDevices",
	"MaasMachine.networkInterfaces", "MaasMachine.scriptResults", "FenceEvent.details",
	"Cluster.addresses", "Cluster.through", "Cluster.source", "Cluster.members", "Cluster.quorum",
	"Cluster.placementGuard", "Cluster.machineRecords", "Cluster.removeRefusal", "Cluster.fencing", "FenceMapping.cluster",
	"FenceEvent.cluster"}

func TestFleetRowsAreWrittenAsGqlgenWrites(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	rows := fixtureRows(schema, 1, 60)
	rows = append(rows, edgeRows()...)

	type selection struct {
		name, query string
		vars        map[string]any
	}
	var sels []selection
	consumers := map[string]bool{} // the console's and the client's selections
	for _, src := range []struct{ who, glob string }{
		{"console", "../../web/console/src/gql/gql.ts"},
		{"client", "../../client/operations/*.graphql"},
	} {
		read := graphqlFiles
		if src.who == "console" {
			read = consoleDocuments
		}
		qs := fleetQueries(t, src.glob, read)
		if len(qs) == 0 {
			t.Fatalf("found no fleet query in the %s's sources (%s); want each one it sends", src.who, src.glob)
		}
		for _, q := range qs {
			name := src.who + ": " + q.name
			t.Logf("%s", name)
			consumers[name] = true
			sels = append(sels, selection{name, q.text, nil})
		}
	}
	sels = append(sels,
		selection{"bench FleetQuery300", `{ fleet { sources { incus { available } maas { available } }
			machines { name phase cluster { name } warnings { code message } pendingJoinToken { expiresAt }
			record { name provisioner { kind } maasSystemId hardwareUuid registeredBy registeredAt }
			member { name status held roles groups failureDomain architecture }
			maas { systemId hostname status powerState powerType hardwareUuid cpuCount memoryMiB testingStatus zone pool tags } } } }`, nil},
		selection{"bench FleetReaders", `{ fleet { sources { incus { available } maas { available } } machines { name phase warnings { code } member { status } maas { systemId status powerState } } } }`, nil},
		selection{"every field", "{ fleet { machines " + everyField(schema, "Machine", nil) + " } }", nil},
		selection{"every field it writes", "{ fleet { machines " + everyField(schema, "Machine", leftToGqlgen()) + " } }", nil},
	)
	r := rand.New(rand.NewPCG(27, 3))
	for i := range 300 {
		g := &selectionGen{r: r, s: schema}
		rows := g.of("Machine", 0)
		var decl []string
		vars := map[string]any{}
		for name, v := range map[string]bool{"yes": true, "no": false} {
			if strings.Contains(rows, "$"+name) {
				decl, vars[name] = append(decl, "$"+name+": Boolean!"), v
			}
		}
		sort.Strings(decl)
		query := "{ fleet { machines " + rows + " } }"
		if len(decl) > 0 {
			query = "query(" + strings.Join(decl, ", ") + ") " + query
		}
		sels = append(sels, selection{fmt.Sprintf("generated %d", i), query, vars})
	}

	fixtures := map[string][]*model.Machine{"rich rows": rows, "no rows": {}}
	for name, bad := range errorRows(rows[0]) {
		fixtures[name] = bad
	}
	names := make([]string, 0, len(fixtures))
	for n := range fixtures {
		names = append(names, n)
	}
	sort.Strings(names)
	written := 0
	for _, fixture := range names {
		ms := fixtures[fixture]
		plain, fast := fixtureSchema(ms), fixtureSchema(ms)
		for _, sel := range sels {
			want, _ := execute(plain, nil, sel.query, sel.vars)
			got, gqlgenFields := execute(fast, fleetRows{schema}, sel.query, sel.vars)
			if len(want.Errors) > 0 && fixture == "rich rows" {
				t.Fatalf("%s on %s: gqlgen answered errors: %v\n%s", sel.name, fixture, want.Errors, sel.query)
			}
			if string(got.Data) != string(want.Data) || errorsJSON(got) != errorsJSON(want) {
				t.Fatalf("%s on %s: the rows are not written as gqlgen writes them\nquery: %s\ngqlgen: %s %s\nwritten: %s %s",
					sel.name, fixture, sel.query, want.Data, errorsJSON(want), got.Data, errorsJSON(got))
			}
			// The comparison proves something only where fleetRows wrote the rows: it must
			// on every selection without a field left to gqlgen, on rows without an error.
			mustWrite := fixture == "rich rows" && !selectsAny(sel.query, leftToGqlgen())
			if mustWrite && gqlgenFields > 0 {
				t.Fatalf("%s: gqlgen executed %d fields of the rows; fleetRows should have written them (a new resolver field below Machine belongs in rowsLeftToGqlgen)\n%s", sel.name, gqlgenFields, sel.query)
			}
			if gqlgenFields == 0 && len(ms) > 0 {
				written++
				if consumers[sel.name] && fixture == "rich rows" {
					t.Logf("%s: written by fleetRows, equal to gqlgen's (%d bytes)", sel.name, len(got.Data))
				}
			}
		}
	}
	t.Logf("%d selections on %d fixtures; fleetRows wrote %d answers, gqlgen the rest", len(sels), len(fixtures), written)
}

// What fleetRows cannot write exactly is gqlgen's, whole: @defer (on the rows or below
// them), a field a resolver answers, the Map scalar. Each answer is gqlgen's own, and
// gqlgen's executor resolved the rows' fields itself.
func TestFleetRowsLeaveToGqlgenWhatTheyCannotWrite(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	rows := fixtureRows(schema, 5, 20)
	for _, m := range rows {
		if m.Member == nil {
			m.Member = &model.Member{Name: "m", Roles: []string{}, Groups: []string{}}
		}
	}
	for name, q := range map[string]string{
		"@defer on the rows":      `{ fleet { machines { name ... @defer { phase } } } }`,
		"@defer below the rows":   `{ fleet { machines { name member { name ... @defer(label: "m") { status } } } } }`,
		"a resolver field":        `{ fleet { machines { name member { name version { incus } } } } }`,
		"a resolver field, alias": `{ fleet { machines { name m: member { v: version { os } } } } }`,
		"the Map scalar":          `{ fleet { machines { name fence { lastEvent { details } } } } }`,
	} {
		plain, fast := fixtureSchema(rows), fixtureSchema(rows)
		want, _ := execute(plain, nil, q, nil)
		got, gqlgenFields := execute(fast, fleetRows{schema}, q, nil)
		if len(want.Errors) > 0 {
			t.Fatalf("%s: gqlgen answered errors: %v", name, want.Errors)
		}
		if string(got.Data) != string(want.Data) || errorsJSON(got) != errorsJSON(want) {
			t.Fatalf("%s: not gqlgen's answer\ngqlgen: %s\nwritten: %s", name, want.Data, got.Data)
		}
		if gqlgenFields == 0 {
			t.Fatalf("%s: fleetRows wrote the rows; it must leave them to gqlgen\n%s", name, q)
		}
	}
}

// execute runs query on es, with ext when it is not nil, as the server does (an
// operation context, then the operation); it counts the fields of the rows gqlgen's
// executor resolved itself.
func execute(es graphql.ExecutableSchema, ext graphql.HandlerExtension, query string, vars map[string]any) (*graphql.Response, int) {
	exec := executor.New(es)
	var rowFields atomic.Int64 // gqlgen resolves each row on a goroutine of its own
	exec.AroundFields(func(ctx context.Context, next graphql.Resolver) (any, error) {
		if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "Machine" {
			rowFields.Add(1)
		}
		return next(ctx)
	})
	if ext != nil {
		exec.Use(ext)
	}
	ctx := graphql.StartOperationTrace(context.Background())
	oc, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{Query: query, Variables: vars})
	if errs != nil {
		return exec.DispatchError(graphql.WithOperationContext(ctx, oc), errs), 0
	}
	h, ctx := exec.DispatchOperation(ctx, oc)
	return h(ctx), int(rowFields.Load())
}

func errorsJSON(r *graphql.Response) string {
	b, _ := json.Marshal(r.Errors)
	return string(b)
}

// fixtureSchema answers fleet with rows (and the resolver fields below them with fixed
// values).
func fixtureSchema(rows []*model.Machine) graphql.ExecutableSchema {
	return graph.NewExecutableSchema(graph.Config{Resolvers: fixtureRoot{rows: rows}})
}

type fixtureRoot struct {
	graph.ResolverRoot
	rows []*model.Machine
}

func (f fixtureRoot) Query() graph.QueryResolver               { return fixtureQuery{rows: f.rows} }
func (f fixtureRoot) Member() graph.MemberResolver             { return fixtureMember{} }
func (f fixtureRoot) MaasMachine() graph.MaasMachineResolver   { return fixtureMAAS{} }
func (f fixtureRoot) Cluster() graph.ClusterResolver           { return fixtureCluster{} }
func (f fixtureRoot) FenceMapping() graph.FenceMappingResolver { return fixtureFenceMapping{} }
func (f fixtureRoot) FenceEvent() graph.FenceEventResolver     { return fixtureFenceEvent{} }

// fixtureCluster answers a cluster's resolved fields with fixed values.
type fixtureCluster struct{}

func (fixtureCluster) Addresses(context.Context, *model.Cluster) ([]string, error) {
	return []string{"https://127.0.0.1:8443"}, nil
}
func (fixtureCluster) Through(context.Context, *model.Cluster) (*string, error) { return nil, nil }
func (fixtureCluster) Source(context.Context, *model.Cluster) (*model.SourceStatus, error) {
	return &model.SourceStatus{Configured: true, Available: true, Message: "ok"}, nil
}
func (fixtureCluster) Members(_ context.Context, c *model.Cluster) ([]*model.Member, error) {
	return []*model.Member{{Name: c.Name, Roles: []string{"database"}, Groups: []string{}}}, nil
}
func (fixtureCluster) Quorum(context.Context, *model.Cluster) (*model.ClusterQuorum, error) {
	return &model.ClusterQuorum{Voters: 1, VotersOnline: 1, Majority: 1}, nil
}
func (fixtureCluster) PlacementGuard(context.Context, *model.Cluster) (*model.PlacementGuard, error) {
	return nil, nil
}
func (fixtureCluster) MachineRecords(context.Context, *model.Cluster) (int, error) { return 2, nil }
func (fixtureCluster) RemoveRefusal(context.Context, *model.Cluster) (*string, error) {
	return nil, nil
}
func (fixtureCluster) Fencing(context.Context, *model.Cluster) (*model.ClusterFencing, error) {
	return &model.ClusterFencing{Acting: true, Mappings: 1}, nil
}

// fixtureFence names a fence mapping's or event's cluster.
type fixtureFence struct{}

func (fixtureFence) Cluster(context.Context, any) (*string, error) { c := "default"; return &c, nil }

type fixtureFenceMapping struct{}

func (fixtureFenceMapping) Cluster(ctx context.Context, _ *model.FenceMapping) (*string, error) {
	return fixtureFence{}.Cluster(ctx, nil)
}

type fixtureFenceEvent struct{}

func (fixtureFenceEvent) Cluster(ctx context.Context, _ *model.FenceEvent) (*string, error) {
	return fixtureFence{}.Cluster(ctx, nil)
}

type fixtureQuery struct {
	graph.QueryResolver
	rows []*model.Machine
}

func (q fixtureQuery) Fleet(context.Context, *string) (*model.Fleet, error) {
	since := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	return &model.Fleet{Machines: q.rows, Sources: &model.FleetSources{
		Incus: &model.SourceStatus{Configured: true, Available: true, Message: "ok"},
		Maas:  &model.SourceStatus{Configured: true, Message: "MAAS not answering", Since: &since}}}, nil
}

type fixtureMember struct{}

func (fixtureMember) Version(_ context.Context, m *model.Member) (*model.MemberVersion, error) {
	return &model.MemberVersion{Incus: "6.0.4", APIExtensions: 421, Kernel: "6.1.0", Os: m.Name}, nil
}

type fixtureMAAS struct{}

func (fixtureMAAS) StorageDevices(context.Context, *model.MaasMachine) ([]*model.MaasStorageDevice, error) {
	return []*model.MaasStorageDevice{{Name: "sda", Type: "physical", Path: "/dev/sda", SizeBytes: 480103981056}}, nil
}

func (fixtureMAAS) NetworkInterfaces(context.Context, *model.MaasMachine) ([]*model.MaasNetworkInterface, error) {
	return []*model.MaasNetworkInterface{{Name: "eno1", Type: "physical", MacAddress: "00:16:3e:00:00:01", LinkConnected: true}}, nil
}

func (fixtureMAAS) ScriptResults(context.Context, *model.MaasMachine) ([]*model.MaasScriptResult, error) {
	return []*model.MaasScriptResult{}, nil
}

// fixtureRows makes n rows whose every field is filled from the schema: each nullable
// field sometimes null, lists of zero to three, values from the pools below.
func fixtureRows(s *ast.Schema, seed uint64, n int) []*model.Machine {
	f := filler{r: rand.New(rand.NewPCG(seed, seed)), s: s}
	rows := make([]*model.Machine, n)
	for i := range rows {
		rows[i] = &model.Machine{}
		f.object(reflect.ValueOf(rows[i]).Elem(), s.Types["Machine"])
	}
	return rows
}

var (
	fixtureStrings = []string{"", "node-1", "quote \" backslash \\ slash /", "tab\tnewline\nreturn\r",
		"\x00\x01\x08\x0c\x1b\x1f\x7f", "é ü 日本 🚀", "\u2028\u2029", "<b>&amp;</b>", "\xff\xfe not UTF-8 \xc3",
		"a\u0000b", strings.Repeat("long ", 40)}
	fixtureFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 3, 123.456, 480103.981056, 1e5, 1e6, 1e20, 1e21,
		1e-4, 1e-5, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2}
	fixtureInts  = []int64{0, 1, -1, 42, 65536, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	fixtureTimes = []time.Time{
		time.Date(2026, 12, 6, 21, 38, 28, 0, time.UTC),
		time.Date(2026, 12, 6, 21, 38, 28, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("", 5*3600+1800)),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("EST", -5*3600)),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-44, 3, 15, 12, 0, 0, 0, time.UTC),
	}
)

type filler struct {
	r *rand.Rand
	s *ast.Schema
}

func (f *filler) object(v reflect.Value, def *ast.Definition) {
	for _, fd := range def.Fields {
		if sf, ok := structField(v.Type(), fd.Name); ok {
			f.value(v.FieldByIndex(sf.Index), fd.Type)
		}
	}
}

func (f *filler) value(v reflect.Value, t *ast.Type) {
	if v.Kind() == reflect.Pointer {
		if !t.NonNull && f.r.IntN(4) == 0 {
			return // null
		}
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
		if !t.NonNull && v.Type() == timeType && f.r.IntN(6) == 0 {
			return // a nullable time that is the zero time: gqlgen writes null
		}
	}
	if t.Elem != nil {
		if f.r.IntN(5) == 0 {
			return // a nil slice: [] where the list is non-null, null where it is not
		}
		n := f.r.IntN(4)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.value(v.Index(i), t.Elem)
		}
		return
	}
	def := f.s.Types[t.NamedType]
	switch {
	case def.Kind == ast.Enum:
		v.SetString(def.EnumValues[f.r.IntN(len(def.EnumValues))].Name)
	case def.Kind == ast.Object:
		f.object(v, def)
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(fixtureTimes[f.r.IntN(len(fixtureTimes))]))
	case v.Kind() == reflect.String:
		v.SetString(fixtureStrings[f.r.IntN(len(fixtureStrings))])
	case v.Kind() == reflect.Int:
		v.SetInt(fixtureInts[f.r.IntN(len(fixtureInts))])
	case v.Kind() == reflect.Float64:
		v.SetFloat(fixtureFloats[f.r.IntN(len(fixtureFloats))])
	case v.Kind() == reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case v.Kind() == reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{"reason": "<quorum>", "n": 3, "list": []any{1.5, "x"}}))
	default:
		panic(fmt.Sprintf("the fixture cannot fill %s (%s)", t, v.Type()))
	}
}

// edgeRows are rows the generated ones may miss: every nullable field null, and values
// gqlgen writes in its own ways (an enum value outside the enum is quoted as it is).
func edgeRows() []*model.Machine {
	empty := &model.Machine{Name: "empty", Phase: model.PhaseUnknown}
	odd := &model.Machine{Name: "odd\x00", Phase: model.Phase("NOT \"AN\" ENUM \u00e9\x01"), Warnings: []*model.Warning{},
		MaasSteps: []*model.MaasStepAvailability{}}
	return []*model.Machine{empty, odd}
}

// errorRows are fixtures gqlgen answers with an error (a null where the schema says
// non-null, a float JSON cannot hold): fleetRows must leave them to gqlgen.
func errorRows(like *model.Machine) map[string][]*model.Machine {
	clone := func(edit func(m *model.Machine)) []*model.Machine {
		m := *like
		edit(&m)
		return []*model.Machine{like, &m}
	}
	return map[string][]*model.Machine{
		"a null row":     {like, nil},
		"a null warning": clone(func(m *model.Machine) { m.Warnings = []*model.Warning{nil} }),
		"a zero non-null time": clone(func(m *model.Machine) {
			m.PendingJoinToken = &model.PendingJoinToken{}
		}),
		"a null provisioner": clone(func(m *model.Machine) {
			m.Record = &model.MachineRecord{Name: "r", RegisteredAt: fixtureTimes[0]}
		}),
		"a NaN": clone(func(m *model.Machine) {
			m.Maas = &model.MaasMachine{SystemID: "abc", StorageMb: math.NaN(), Tags: []string{}, IPAddresses: []string{}}
		}),
	}
}

// everyField selects every field of the type, recursively, but those in skip.
func everyField(s *ast.Schema, typeName string, skip map[string]bool) string {
	def := s.Types[typeName]
	var parts []string
	for _, f := range def.Fields {
		if strings.HasPrefix(f.Name, "__") || skip[typeName+"."+f.Name] {
			continue
		}
		part := f.Name
		if s.Types[f.Type.Name()].Kind == ast.Object {
			part += " " + everyField(s, f.Type.Name(), skip)
		}
		parts = append(parts, part)
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

func leftToGqlgen() map[string]bool {
	m := map[string]bool{}
	for _, f := range rowsLeftToGqlgen {
		m[f] = true
	}
	return m
}

// selectsAny says whether query (the rows' part of it) names one of the fields: by the
// field's name alone, which may say yes for a field of that name on another type (the
// selection is then only compared, not required to be written).
func selectsAny(query string, fields map[string]bool) bool {
	for f := range fields {
		_, name, _ := strings.Cut(f, ".")
		if regexp.MustCompile(`\b` + name + `\b`).MatchString(query) {
			return true
		}
	}
	return false
}

// selectionGen writes random selections of a type: fields chosen at random, some under
// an alias, some twice (their selections merged), some in an inline fragment or under
// @include/@skip, __typename here and there.
type selectionGen struct {
	r       *rand.Rand
	s       *ast.Schema
	aliases int
}

func (g *selectionGen) of(typeName string, depth int) string {
	def := g.s.Types[typeName]
	var parts []string
	for _, f := range def.Fields {
		if strings.HasPrefix(f.Name, "__") || g.r.IntN(3) == 0 {
			continue
		}
		if leftToGqlgen()[typeName+"."+f.Name] && g.r.IntN(4) != 0 {
			continue
		}
		part := f.Name
		if g.r.IntN(5) == 0 {
			g.aliases++
			part = "a" + strconv.Itoa(g.aliases) + ": " + part
		}
		switch g.r.IntN(8) {
		case 1:
			part += " @include(if: $yes)"
		case 2:
			part += " @skip(if: $yes)"
		}
		if s := g.s.Types[f.Type.Name()]; s.Kind == ast.Object {
			if depth > 4 {
				continue
			}
			part += " " + g.of(s.Name, depth+1)
			if g.r.IntN(6) == 0 {
				parts = append(parts, f.Name+" "+g.of(s.Name, depth+1)) // selected twice: merged
			}
		}
		switch g.r.IntN(8) {
		case 0:
			part = "... on " + typeName + " { " + part + " }"
		case 1:
			part = "... @include(if: $no) { " + part + " }"
		}
		parts = append(parts, part)
	}
	if g.r.IntN(4) == 0 {
		parts = append(parts, "__typename")
	}
	if len(parts) == 0 {
		parts = append(parts, "__typename")
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{ " + strings.Join(parts, " ") + " }"
}

type namedQuery struct{ name, text string }

// fleetQueries reads the operations and fragments in the files that match glob (read
// with read) and returns every query that selects fleet's machines, with the fragments
// it uses.
func fleetQueries(t *testing.T, glob string, read func(t *testing.T, path string) []string) []namedQuery {
	t.Helper()
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no documents at %s: %v", glob, err)
	}
	fragments := map[string]*ast.FragmentDefinition{}
	var ops []*ast.OperationDefinition
	for _, p := range paths {
		for _, src := range read(t, p) {
			doc, err := parser.ParseQuery(&ast.Source{Input: src})
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, f := range doc.Fragments {
				fragments[f.Name] = f
			}
			ops = append(ops, doc.Operations...)
		}
	}
	var out []namedQuery
	for _, op := range ops {
		if op.Operation != ast.Query || !selectsFleetMachines(op.SelectionSet, fragments) {
			continue
		}
		used := map[string]bool{}
		usedFragments(op.SelectionSet, fragments, used)
		text := sourceOf(op.Position) // the operation as written
		for name := range used {
			text += "\n" + sourceOf(fragments[name].Position)
		}
		out = append(out, namedQuery{op.Name, text})
	}
	return out
}

func sourceOf(p *ast.Position) string { return blockAt(p.Src.Input, p.Start) }

// blockAt is the definition that starts at offset start of src: up to its closing brace.
func blockAt(src string, start int) string {
	depth := 0
	for i := start; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[start : i+1]
			}
		}
	}
	return src[start:]
}

// selectsFleetMachines says whether the query selects fleet's machines: directly, under an
// alias, or through fragments (inline or named) on Query or on Fleet.
func selectsFleetMachines(set ast.SelectionSet, fragments map[string]*ast.FragmentDefinition) bool {
	return selectsPath(set, fragments, []string{"fleet", "machines"}, map[string]bool{})
}

func selectsPath(set ast.SelectionSet, fragments map[string]*ast.FragmentDefinition, path []string, seen map[string]bool) bool {
	if len(path) == 0 {
		return true
	}
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			if s.Name == path[0] && selectsPath(s.SelectionSet, fragments, path[1:], seen) {
				return true
			}
		case *ast.InlineFragment:
			if selectsPath(s.SelectionSet, fragments, path, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if f := fragments[s.Name]; f != nil && !seen[s.Name] {
				seen[s.Name] = true
				if selectsPath(f.SelectionSet, fragments, path, seen) {
					return true
				}
			}
		}
	}
	return false
}

func usedFragments(set ast.SelectionSet, fragments map[string]*ast.FragmentDefinition, used map[string]bool) {
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			usedFragments(s.SelectionSet, fragments, used)
		case *ast.InlineFragment:
			usedFragments(s.SelectionSet, fragments, used)
		case *ast.FragmentSpread:
			if !used[s.Name] && fragments[s.Name] != nil {
				used[s.Name] = true
				usedFragments(fragments[s.Name].SelectionSet, fragments, used)
			}
		}
	}
}

// consoleDocuments reads the documents GraphQL Code Generator found in the console's
// sources: the keys of gql.ts's Documents map, one string literal each.
func consoleDocuments(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "type Documents = {")
	body, _, ok2 := strings.Cut(rest, "\n};")
	if !ok || !ok2 {
		t.Fatalf("%s: no Documents map", path)
	}
	var docs []string
	for _, line := range strings.Split(body, "\n") {
		lit, _, ok := strings.Cut(strings.TrimSpace(line), ": typeof ")
		if !ok {
			continue
		}
		var doc string
		if err := json.Unmarshal([]byte(lit), &doc); err != nil {
			t.Fatalf("%s: %v in %s", path, err, lit)
		}
		docs = append(docs, doc)
	}
	return docs
}

func graphqlFiles(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return []string{string(b)}
}

// The scalars one by one against gqlgen's own marshallers, on every byte and many random
// values beyond the fixture's pools.
func TestRowsScalarsAreWrittenAsGqlgenWrites(t *testing.T) {
	gqlgen := func(m graphql.Marshaler) string {
		var b strings.Builder
		m.MarshalGQL(&b)
		return b.String()
	}
	r := rand.New(rand.NewPCG(27, 27))
	strs := []string{""}
	for c := range 256 {
		strs = append(strs, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"é")
	}
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		strs = append(strs, string(b), strings.ToValidUTF8(string(b), "\u2028"))
	}
	for _, s := range strs {
		if got, want := string(appendQuoted(nil, s)), gqlgen(graphql.MarshalString(s)); got != want {
			t.Fatalf("string %q: wrote %s, gqlgen %s", s, got, want)
		}
	}
	floats := slices.Clone(fixtureFloats)
	for range 20000 {
		floats = append(floats, math.Float64frombits(r.Uint64()), r.NormFloat64()*math.Pow(10, float64(r.IntN(60)-30)), float64(r.IntN(1e9))/1000)
	}
	enc := &valueEncoder{nonNull: true, scalar: floatScalar}
	for _, f := range floats {
		var want strings.Builder
		werr := graphql.MarshalFloatContext(f).MarshalGQLContext(context.Background(), &want)
		got, ok := enc.encode(nil, reflect.ValueOf(f))
		if ok != (werr == nil) || ok && string(got) != want.String() {
			t.Fatalf("float %v: wrote %s (%v), gqlgen %s (%v)", f, got, ok, want.String(), werr)
		}
	}
	times := slices.Clone(fixtureTimes)
	for range 5000 {
		zone := time.FixedZone("", (r.IntN(48)-24)*1800)
		times = append(times, time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)).In(zone))
	}
	enc = &valueEncoder{scalar: timeScalar}
	for _, tm := range append(times, time.Time{}) {
		got, ok := enc.encode(nil, reflect.ValueOf(&tm).Elem())
		if want := gqlgen(graphql.MarshalTime(tm)); !ok || string(got) != want {
			t.Fatalf("time %v: wrote %s, gqlgen %s", tm, got, want)
		}
	}
	for _, e := range []model.Phase{"", model.PhaseAdmitted, "é\x01\"\\\u2028\xff"} {
		got, _ := (&valueEncoder{scalar: enumScalar}).encode(nil, reflect.ValueOf(e))
		if want := gqlgen(e); string(got) != want {
			t.Fatalf("enum %q: wrote %s, gqlgen %s", e, got, want)
		}
	}
}
