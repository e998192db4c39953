package main

import (
	"os"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
)

// The committed table and TypeScript module are what the schema makes now.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	goSrc, tsSrc, err := generateFrom("../../../schema")
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]byte{goFile: goSrc, tsFile: tsSrc} {
		got, err := os.ReadFile("../../../" + file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go generate ./... and commit it", file)
		}
	}
}

// A small schema with one declared change, to which each case adds a flaw.
const base = `
directive @change(about: String, cluster: String, systemId: String, rollingReboot: String, lock: ChangeLock!) on FIELD_DEFINITION
directive @set on INPUT_FIELD_DEFINITION
directive @planIgnores(reason: String!) on INPUT_FIELD_DEFINITION
enum ChangeLock { MACHINE IDENTITIES HARDWARE_PROFILES }
type Query { x: Int }
type Plan { refused: Boolean! }
type Mutation {
  doIt(input: DoItInput!): DoItPayload! @change(about: "input.name", lock: MACHINE)
  %s
}
input DoItInput {
  name: String!
  count: Int
  "Plan only."
  dryRun: Boolean = false
  "The plan shown."
  planHash: String
}
type DoItPayload {
  "The plan."
  plan: Plan
}
`

func TestDeclarationsRefuseWhatCannotBeRead(t *testing.T) {
	decls, err := declarations(&ast.Source{Name: "ok", Input: strings.Replace(base, "%s", "", 1)})
	if err != nil || len(decls) != 1 || decls[0].about != "input.name" || decls[0].lock != "MACHINE" || decls[0].payload != "DoItPayload" {
		t.Fatalf("the base schema: %+v, %v", decls, err)
	}
	for _, c := range []struct{ name, extra, types, want string }{
		{"no declaration", `other(input: DoItInput!): DoItPayload!`, "", "has no @change declaration"},
		{"no such argument", `other(input: DoItInput!): DoItPayload! @change(about: "name", lock: MACHINE)`, "", `has no argument "name"`},
		{"no such field", `other(input: DoItInput!): DoItPayload! @change(about: "input.member", lock: MACHINE)`, "", `DoItInput has no field "member"`},
		{"not a string", `other(input: DoItInput!): DoItPayload! @change(about: "input.count", lock: MACHINE)`, "", "the machine is named by a String"},
		{"no dryRun", `other(input: NoDry!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "input NoDry { a: Int }", "lacks `dryRun: Boolean = false`"},
		{"no plan", `other(input: DoItInput!): NoPlan! @change(lock: HARDWARE_PROFILES)`, "type NoPlan { a: Int }", "lacks `plan: Plan`"},
		{"another dryRun text", `other(input: Other!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "input Other { \"Dry.\"\n dryRun: Boolean = false\n \"The plan shown.\"\n planHash: String }", "Other.dryRun's description differs"},
		{"no planHash", `other(input: NoHash!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "input NoHash { \"Plan only.\"\n dryRun: Boolean = false }", "lacks `planHash: String`"},
		{"another planHash text", `other(input: OtherHash!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "input OtherHash { \"Plan only.\"\n dryRun: Boolean = false\n \"Hash.\"\n planHash: String }", "OtherHash.planHash's description differs"},
		{"cluster not declared", `other(input: InCluster!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "input InCluster { cluster: String \"Plan only.\"\n dryRun: Boolean = false\n \"The plan shown.\"\n planHash: String }", `has a cluster field that @change does not declare`},
		{"cluster not a string", `other(input: DoItInput!): DoItPayload! @change(cluster: "input.count", lock: MACHINE)`, "", "it must be a String"},
		{"rolling reboot not an ID", `other(input: DoItInput!): DoItPayload! @change(rollingReboot: "input.name", lock: MACHINE)`, "", "it must be a ID"},
		{"no input", `other(name: String!): DoItPayload! @change(lock: HARDWARE_PROFILES)`, "", "no input object argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := declarations(&ast.Source{Name: "flawed", Input: strings.Replace(base, "%s", c.extra, 1) + c.types})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Mutation.other") {
				t.Fatalf("got %v, want an error about Mutation.other saying %q", err, c.want)
			}
		})
	}
}

// What an input field says about a plan's hash is refused when it cannot mean anything.
func TestHashDeclarationsRefuseWhatCannotBeRead(t *testing.T) {
	for _, c := range []struct{ name, types, want string }{
		{"a set that is no list", "input Flawed { a: String @set }", "Flawed.a (flawed:24): @set on a String"},
		{"ignored without a reason", `input Flawed { a: String @planIgnores(reason: " ") }`, "Flawed.a (flawed:24): @planIgnores without its reason"},
		{"dryRun ignored", `input Flawed { dryRun: Boolean @planIgnores(reason: "mode") }`, "@planIgnores on dryRun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := declarations(&ast.Source{Name: "flawed", Input: strings.Replace(base, "%s", "", 1) + c.types})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	ok := `input Fine { a: [String!] @set b: String @planIgnores(reason: "shown to the operator only") }`
	if _, err := declarations(&ast.Source{Name: "fine", Input: strings.Replace(base, "%s", "", 1) + ok}); err != nil {
		t.Fatalf("a set and an ignored field with its reason: %v", err)
	}
}
