package main

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// Each machine's call of a bulk step carries the hash of the plan shown for it (issue 18,
// as the console's bulk dialog does): a machine another administrator changed between the
// plan and the run is refused PLAN_CHANGED, nothing done to it, and the rest go ahead.
func TestBulkConfirmsEachMachinesPlanShown(t *testing.T) {
	lab := incuslab.Start(t, 1)
	var specs []sim.MachineSpec
	for i := range 3 {
		specs = append(specs, sim.MachineSpec{SystemID: fmt.Sprintf("ph%04d", i), Hostname: fmt.Sprintf("node-%02d", i), Status: 0, PowerType: "ipmi",
			HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-b7c04f4f%04d", i)})
	}
	m := producttest.StartMAAS(t, sim.Fixture{Machines: specs})
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	token := e.Identity("ops", identity.ManageInfrastructure)
	other := e.Identity("other", identity.ManageInfrastructure)
	endpoint := e.Base + "/graphql"

	var out bytes.Buffer
	b := &bulkRun{step: "register", concurrency: 2, out: &out, requestID: "bulk-planhash-test", planID: "bulk-planhash-plan"}
	b.gql = client.New(endpoint, token, &http.Client{Transport: withRequestID{id: b.requestID, next: http.DefaultTransport}})
	b.planGQL = client.New(endpoint, token, &http.Client{Transport: withRequestID{id: b.planID, next: http.DefaultTransport}})
	if err := b.resolve(t.Context(), client.New(endpoint, token, nil), []string{"node-00", "node-01", "node-02"}); err != nil {
		t.Fatal(err)
	}
	planned := b.runAll(t.Context(), b.targets, true, nil)
	for _, p := range planned {
		if p.Outcome != outcomeAhead || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(p.planHash) {
			t.Fatalf("plan for %s: %+v, want it ahead with its plan hash", p.Machine, p)
		}
	}
	// Another administrator registers node-01 after the plan was shown.
	e.MustGQL(other, `mutation { registerMachine(input: {name: "node-01", provisioner: MAAS, maasSystemId: "ph0001"}) { machine { name } } }`, nil)

	b.confirmShown(planned)
	err := b.finish(b.runAll(t.Context(), b.targets, false, b.report))
	got := out.String()
	if err == nil || !regexp.MustCompile(`(?m)^refused\tnode-01\tPLAN_CHANGED: `).MatchString(got) {
		t.Fatalf("node-01, changed since its plan was shown: %v\n%s", err, got)
	}
	for _, n := range []string{"node-00", "node-02"} {
		if !regexp.MustCompile(`(?m)^done\t` + n + `$`).MatchString(got) {
			t.Errorf("%s, unchanged since its plan, not done\n%s", n, got)
		}
	}
	// The two done were confirmed with their plan (the audit keeps its hash); node-01's
	// call changed nothing (the one registration of it is the other administrator's).
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'registerMachine' AND request_id = $1 AND outcome = 'SUCCEEDED' AND details->>'planHash' LIKE 'sha256:%'`, b.requestID).(int64); n != 2 {
		t.Errorf("%d registrations under %s confirmed with a plan hash, want 2", n, b.requestID)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'registerMachine' AND outcome = 'SUCCEEDED' AND parameters->'input'->>'name' = 'node-01'`).(int64); n != 1 {
		t.Errorf("node-01 registered %d times, want once (by the other administrator)", n)
	}
}
