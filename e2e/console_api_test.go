package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/internal/producttest"
)

// What the console needed from the API: the audit trail filtered by actor and outcome, and
// which MAAS steps a machine's state allows.

func TestAuditEventsFilterByActorAndOutcome(t *testing.T) {
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	reg := `mutation($n: String!) { registerMachine(input: {name: $n}) { machine { name } } }`
	e.MustGQL(admin, reg, map[string]any{"n": "node-1"})
	e.GQL(admin, reg, map[string]any{"n": "Bad_Name"})
	e.GQL(viewer, reg, map[string]any{"n": "node-2"})

	page := func(args string) []string {
		d := e.MustGQL(viewer, `{ auditEvents`+args+` { edges { node { actor action outcome machine } } } }`, nil)
		var out []string
		for _, edge := range d["auditEvents"].(map[string]any)["edges"].([]any) {
			n := edge.(map[string]any)["node"].(map[string]any)
			out = append(out, fmt.Sprintf("%s:%s:%s", n["actor"], n["machine"], n["outcome"]))
		}
		return out
	}
	for args, want := range map[string]string{
		`(first: 3)`:                           "viewer:node-2:REFUSED admin:Bad_Name:FAILED admin:node-1:SUCCEEDED",
		`(actor: "admin")`:                     "admin:Bad_Name:FAILED admin:node-1:SUCCEEDED",
		`(outcome: REFUSED)`:                   "viewer:node-2:REFUSED",
		`(actor: "admin", outcome: SUCCEEDED)`: "admin:node-1:SUCCEEDED",
		`(actor: "admin", machine: "node-2")`:  "",
		`(actor: "nobody")`:                    "",
		`(actor: "admin", first: 1)`:           "admin:Bad_Name:FAILED",
	} {
		if got := strings.Join(page(args), " "); got != want {
			t.Errorf("auditEvents%s = %q, want %q", args, got, want)
		}
	}
	if r := e.GQL(viewer, `{ auditEvents(outcome: MAYBE) { edges { cursor } } }`, nil); len(r.Errors) == 0 {
		t.Error("an unknown outcome was accepted")
	}
}

func TestMachinesSayWhichMAASStepsTheirStateAllows(t *testing.T) {
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	steps := func(name string) map[string]string {
		d := e.MustGQL(admin, `query($n: String!) { machine(name: $n) { maasSteps { step allowed reason } } }`, map[string]any{"n": name})
		out := map[string]string{}
		for _, s := range d["machine"].(map[string]any)["maasSteps"].([]any) {
			s := s.(map[string]any)
			if s["allowed"] == true {
				out[s["step"].(string)] = "allowed"
			} else {
				out[s["step"].(string)] = s["reason"].(string)
			}
		}
		return out
	}
	a := steps("node-a") // Ready, not registered
	if a["COMMISSION"] != "allowed" || a["HARDWARE_TESTS"] != "allowed" || a["RELEASE"] != "allowed" || !strings.Contains(a["INSTALL"], "register it from MAAS first") {
		t.Fatalf("node-a: %v", a)
	}
	busy := steps("node-busy") // Deployed
	if !strings.Contains(busy["HARDWARE_TESTS"], "release it first") || !strings.Contains(busy["COMMISSION"], "commissions only") {
		t.Fatalf("node-busy: %v", busy)
	}
	// The step itself refuses with the same words.
	r := e.GQL(admin, `mutation { runHardwareTests(input: {systemId: "dddd04", hostname: "node-busy"}) { maas { status } } }`, nil)
	if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, busy["HARDWARE_TESTS"]) {
		t.Fatalf("runHardwareTests on node-busy: %+v, the fleet said %q", r.Errors, busy["HARDWARE_TESTS"])
	}
	reg := e.MustGQL(admin, `{ machine(name: "node-a") { record { name } } }`, nil)
	if reg["machine"].(map[string]any)["record"] != nil {
		t.Fatal("node-a has a record")
	}
	manual := e.MustGQL(admin, `mutation { registerMachine(input: {name: "manual-1"}) { machine { maasSteps { step } } } }`, nil)
	if s := manual["registerMachine"].(map[string]any)["machine"].(map[string]any)["maasSteps"].([]any); len(s) != 0 {
		t.Fatalf("a machine MAAS does not report has MAAS steps: %v", s)
	}
}
