package maas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

// The MAAS hardware tab's reads, over TLS as a real MAAS is reached: per-script results of
// the latest commissioning and testing runs, and the VLAN each connected interface is on.
func TestScriptResultsFollowEachRunAndMarkTheFailedScript(t *testing.T) {
	m := spec("tst001", sim.StatusReady, "ipmi")
	m.TestOutcomes = map[string]string{"stress-ng-cpu-short": "failed"}
	m.Interfaces = []sim.InterfaceSpec{{Name: "eno1", LinkSpeed: 10000, Fabric: "fabric-2", VID: 100}, {Name: "eno2"}}
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf), withMachines(m, neverCommissioned(spec("new001", sim.StatusNew, "ipmi"))))

	if rs, err := e.client.ScriptResults(ctx, "new001"); err != nil || len(rs) != 0 {
		t.Fatalf("a never-commissioned machine has results: %+v %v", rs, err)
	}
	if r := e.lastRequest(""); r.Path != "/MAAS/api/2.0/nodes/new001/results/" || r.Form.Get("type") != "testing" {
		t.Fatalf("request %s %s?%s", r.Method, r.Path, r.Form.Encode())
	}

	// The fixture's machine was commissioned an hour before the clock's start.
	rs, err := e.client.ScriptResults(ctx, "tst001")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Kind != maas.ResultCommissioning || rs[0].Name != "00-maas-01-commissioning" ||
		rs[0].Status != maas.ScriptStatusPassed || rs[0].StatusName != "Passed" || rs[0].HardwareType != "Node" ||
		rs[0].Runtime() != 3*time.Minute {
		t.Fatalf("results of the fixture's commissioning: %+v", rs)
	}

	start := e.clock.Now()
	if _, err := e.client.Test(ctx, "tst001", maas.TestOptions{TestingScripts: []string{"stress-ng-cpu-short", "smartctl-validate"}}); err != nil {
		t.Fatal(err)
	}
	rs, _ = e.client.ScriptResults(ctx, "tst001")
	if len(rs) != 3 || rs[1].Kind != maas.ResultTesting || rs[1].Status != maas.ScriptStatusRunning ||
		!rs[1].Started.Equal(start) || !rs[1].Ended.IsZero() || rs[1].Runtime() != 0 {
		t.Fatalf("while testing: %+v", rs)
	}
	e.clock.Advance(testDurations.Testing)
	e.wantStatus("tst001", sim.StatusFailedTesting)
	rs, _ = e.client.ScriptResults(ctx, "tst001")
	byName := map[string]maas.ScriptResult{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	failed, passed := byName["stress-ng-cpu-short"], byName["smartctl-validate"]
	if failed.Status != maas.ScriptStatusFailed || failed.StatusName != "Failed" || failed.HardwareType != "CPU" ||
		failed.Runtime() != testDurations.Testing || !failed.Ended.Equal(start.Add(testDurations.Testing)) ||
		passed.Status != maas.ScriptStatusPassed || passed.HardwareType != "Storage" {
		t.Fatalf("after the failed test: %+v", rs)
	}

	nics, err := e.client.Interfaces(ctx, "tst001")
	if err != nil {
		t.Fatal(err)
	}
	if nics[0].Fabric != "fabric-2" || nics[0].VLAN != "100" || nics[1].Fabric != "" || nics[1].VLAN != "" {
		t.Fatalf("VLANs: %+v", nics)
	}

	if _, err := e.client.ScriptResults(ctx, "zzzz99"); !errors.Is(err, maas.ErrNotFound) {
		t.Fatalf("unknown machine: %v", err)
	}
}
