// Command gen writes every mutation's declaration (the @change directive of each Mutation
// field in schema/) as a Go table (internal/mutations/changes_gen.go) and a TypeScript module
// for the console (web/console/src/api/changes.gen.ts). `go generate ./...` runs it from
// the module root. It refuses a schema where a Mutation field has no declaration, where
// `about` names no String argument, or where a change cannot take a dry run: its input
// lacks `dryRun: Boolean = false` or its payload `plan: Plan`, or their descriptions differ
// from the other changes' (GraphQL has no shared input fragment, so the one text is
// checked here instead).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// The files it writes, from the module root.
const (
	goFile = "internal/mutations/changes_gen.go"
	tsFile = "web/console/src/api/changes.gen.ts"
)

func main() {
	goSrc, tsSrc, err := generateFrom("schema")
	if err == nil {
		err = errors.Join(os.WriteFile(goFile, goSrc, 0o644), os.WriteFile(tsFile, tsSrc, 0o644))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "internal/mutations/gen:", err)
		os.Exit(1)
	}
}

// generateFrom reads dir's *.graphqls and returns the two files.
func generateFrom(dir string) (goSrc, tsSrc []byte, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.graphqls"))
	if err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no schema files in %s: run go generate from the module root", dir)
	}
	var sources []*ast.Source
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, &ast.Source{Name: filepath.ToSlash(n), Input: string(b)})
	}
	decls, err := declarations(sources...)
	if err != nil {
		return nil, nil, err
	}
	goSrc, err = goTable(decls)
	return goSrc, tsModule(decls), err
}

// decl is one Mutation field's declaration.
type decl struct {
	name, about, lock, input, payload string
	// The argument paths naming the cluster the call acts in: directly, or through a MAAS
	// system id's record, or a rolling reboot.
	cluster, systemID, rollingReboot string
}

// declarations reads and checks every Mutation field's @change.
func declarations(sources ...*ast.Source) ([]decl, error) {
	schema, gerr := gqlparser.LoadSchema(sources...)
	if gerr != nil {
		return nil, fmt.Errorf("schema: %w", gerr)
	}
	if schema.Mutation == nil {
		return nil, errors.New("the schema has no Mutation type")
	}
	var out []decl
	var errs []error
	// The one description every change's dryRun (and plan) has: the first one met.
	var dryRunText, planText, hashText, textFrom string
	for _, f := range schema.Mutation.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("Mutation.%s (%s): %s", f.Name, position(f.Position), fmt.Sprintf(format, a...)))
		}
		dir := f.Directives.ForName("change")
		if dir == nil {
			fail(`has no @change declaration: add @change(about: "input.name", lock: MACHINE) or what fits beside it (schema/change.graphqls)`)
			continue
		}
		d := decl{name: f.Name, payload: f.Type.Name()}
		if a := dir.Arguments.ForName("lock"); a != nil && a.Value != nil {
			d.lock = a.Value.Raw
		}
		if a := dir.Arguments.ForName("about"); a != nil && a.Value != nil && a.Value.Kind == ast.StringValue {
			d.about = a.Value.Raw
			if err := stringAt(schema, f, d.about); err != nil {
				fail("@change(about: %q): %v", d.about, err)
			}
		}
		for _, src := range []struct {
			arg  string
			to   *string
			kind string
		}{{"cluster", &d.cluster, "String"}, {"systemId", &d.systemID, "String"}, {"rollingReboot", &d.rollingReboot, "ID"}} {
			if a := dir.Arguments.ForName(src.arg); a != nil && a.Value != nil && a.Value.Kind == ast.StringValue {
				*src.to = a.Value.Raw
				if err := typeAt(schema, f, *src.to, src.kind, "it must be a "+src.kind); err != nil {
					fail("@change(%s: %q): %v", src.arg, *src.to, err)
				}
			}
		}
		// A change takes a dry run: input.dryRun, and the plan in its payload.
		in := f.Arguments.ForName("input")
		var inDef *ast.Definition
		if in != nil {
			inDef = schema.Types[in.Type.Name()]
		}
		if inDef == nil || inDef.Kind != ast.InputObject {
			fail("has no input object argument named input: a change takes its dryRun there")
			continue
		}
		d.input = inDef.Name
		// A cluster the input names is where the call acts: the gate must know it to check a
		// permission held in some clusters only.
		if inDef.Fields.ForName("cluster") != nil && d.cluster != "input.cluster" {
			fail(`its input %s has a cluster field that @change does not declare: add @change(cluster: "input.cluster", …) so the gate checks the permission in that cluster`, inDef.Name)
		}
		dry := inDef.Fields.ForName("dryRun")
		if dry == nil || dry.Type.String() != "Boolean" || dry.DefaultValue == nil || dry.DefaultValue.Raw != "false" {
			fail("its input %s lacks `dryRun: Boolean = false`: every change can be planned", inDef.Name)
			continue
		}
		hash := inDef.Fields.ForName("planHash")
		if hash == nil || hash.Type.String() != "String" {
			fail("its input %s lacks `planHash: String`: a confirmation names the plan it approves", inDef.Name)
			continue
		}
		pay := schema.Types[d.payload]
		var plan *ast.FieldDefinition
		if pay != nil {
			plan = pay.Fields.ForName("plan")
		}
		if plan == nil || plan.Type.String() != "Plan" {
			fail("its payload %s lacks `plan: Plan`: a dry run answers its plan there", d.payload)
			continue
		}
		if textFrom == "" {
			dryRunText, planText, hashText, textFrom = dry.Description, plan.Description, hash.Description, f.Name
		}
		if hash.Description != hashText {
			fail("%s.planHash's description differs from %s's; every change's is the same text: %q", inDef.Name, textFrom, hashText)
		}
		if dry.Description != dryRunText {
			fail("%s.dryRun's description differs from %s's; every change's is the same text: %q", inDef.Name, textFrom, dryRunText)
		}
		if plan.Description != planText {
			fail("%s.plan's description differs from %s's; every change's is the same text: %q", d.payload, textFrom, planText)
		}
		out = append(out, d)
	}
	errs = append(errs, hashDeclarations(schema)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b decl) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// hashDeclarations checks what input fields say about a plan's hash (internal/mutations
// reads it at run time): @set only on a list, @planIgnores only with its reason and never
// on dryRun or planHash (never covered anyway).
func hashDeclarations(schema *ast.Schema) []error {
	var errs []error
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range schema.Types {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		def := schema.Types[n]
		if def.Kind != ast.InputObject || def.BuiltIn {
			continue
		}
		for _, f := range def.Fields {
			fail := func(format string, a ...any) {
				errs = append(errs, fmt.Errorf("%s.%s (%s): %s", def.Name, f.Name, position(f.Position), fmt.Sprintf(format, a...)))
			}
			if f.Directives.ForName("set") != nil && f.Type.Elem == nil {
				fail("@set on a %s: only a list is a set", f.Type.String())
			}
			if d := f.Directives.ForName("planIgnores"); d != nil {
				r := d.Arguments.ForName("reason")
				if r == nil || r.Value == nil || strings.TrimSpace(r.Value.Raw) == "" {
					fail("@planIgnores without its reason: say why the field changes nothing the call does")
				}
				if f.Name == "dryRun" || f.Name == "planHash" {
					fail("@planIgnores on %s, which no plan's hash covers anyway", f.Name)
				}
			}
		}
	}
	return errs
}

// stringAt checks that path names a String argument (or input field) of f.
func stringAt(schema *ast.Schema, f *ast.FieldDefinition, path string) error {
	return typeAt(schema, f, path, "String", "the machine is named by a String")
}

// typeAt checks that path names an argument (or input field) of f of the scalar kind.
func typeAt(schema *ast.Schema, f *ast.FieldDefinition, path, kind, why string) error {
	parts := strings.Split(path, ".")
	a := f.Arguments.ForName(parts[0])
	if a == nil {
		return fmt.Errorf("%s has no argument %q", f.Name, parts[0])
	}
	t := a.Type
	for i, p := range parts[1:] {
		def := schema.Types[t.Name()]
		if t.Elem != nil || def == nil || def.Kind != ast.InputObject {
			return fmt.Errorf("%s is a %s, not an input object", strings.Join(parts[:i+1], "."), t.String())
		}
		fd := def.Fields.ForName(p)
		if fd == nil {
			return fmt.Errorf("%s has no field %q", def.Name, p)
		}
		t = fd.Type
	}
	if t.Elem != nil || t.Name() != kind {
		return fmt.Errorf("it is a %s; %s", t.String(), why)
	}
	return nil
}

func position(p *ast.Position) string {
	if p == nil || p.Src == nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", p.Src.Name, p.Line)
}

const notice = "Code generated by internal/mutations/gen from schema/*.graphqls (@change); DO NOT EDIT."

var goLock = map[string]string{"MACHINE": "LockMachine", "IDENTITIES": "LockIdentities", "HARDWARE_PROFILES": "LockHardwareProfiles",
	"PLACEMENT_GUARD": "LockPlacementGuard", "ROLLING_REBOOTS": "LockRollingReboots", "CLUSTERS": "LockClusters"}

func goTable(decls []decl) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\npackage mutations\n\n", notice)
	b.WriteString("// declared is every Mutation field's declaration, by name.\nvar declared = []Mutation{\n")
	for _, d := range decls {
		lock, ok := goLock[d.lock]
		if !ok {
			return nil, fmt.Errorf("Mutation.%s: lock %q has no Go name here: add it to goLock and to package mutations", d.name, d.lock)
		}
		fmt.Fprintf(&b, "\t{Name: %q, About: %q, Cluster: %q, SystemID: %q, RollingReboot: %q, Lock: %s, Input: %q, Payload: %q},\n",
			d.name, d.about, d.cluster, d.systemID, d.rollingReboot, lock, d.input, d.payload)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func tsModule(decls []decl) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n", notice)
	b.WriteString(`// Every mutation's declaration: the machine it is about (the argument path naming it, or
// null) and the lock it holds. Every one is a change: the console asks for its plan
// (dryRun) and a confirmation before it runs it.

export type ChangeLock = 'MACHINE' | 'IDENTITIES' | 'HARDWARE_PROFILES' | 'PLACEMENT_GUARD' | 'ROLLING_REBOOTS' | 'CLUSTERS';

export interface ChangeDeclaration {
  readonly about: string | null;
  readonly lock: ChangeLock;
  readonly input: string;
  readonly payload: string;
}

export const changes = {
`)
	for _, d := range decls {
		about := "null"
		if d.about != "" {
			about = strconv.Quote(d.about)
		}
		fmt.Fprintf(&b, "  %s: { about: %s, lock: %q, input: %q, payload: %q },\n", d.name, about, d.lock, d.input, d.payload)
	}
	b.WriteString(`} as const satisfies Record<string, ChangeDeclaration>;

// ChangeName is a Mutation field declared a change.
export type ChangeName = keyof typeof changes;
`)
	return b.Bytes()
}
