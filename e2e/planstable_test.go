package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/testkit/incuslab"
)

// changeExamples is one well-formed input per declared change (internal/mutations, from
// the @change declarations), for a world made by startChangeWorld: the tests that walk
// every change read it, and fail when a change is declared without an example here.
func changeExamples(x *changeWorld) map[string]map[string]any {
	profile := map[string]any{"profile": "small", "description": "two cores", "architecture": "x86_64", "minCpuCores": 2,
		"minMemoryMiB": 1024, "minDisks": 1, "minDiskSizeGB": 10, "minNics": 1, "minNicSpeedMbps": 1000}
	return map[string]map[string]any{
		"registerMachine":        {"name": "node-new", "provisioner": "MAAS", "maasSystemId": "nnnn03", "description": "the new one"},
		"unregisterMachine":      {"name": "node-z"},
		"approveEnrolment":       {"name": "node-z", "memberConfig": []any{map[string]any{"entity": "storage-pool", "name": "local", "key": "source", "value": ""}}},
		"revokeJoinToken":        {"name": "node-z"},
		"admitMember":            {"name": "m2"},
		"removeMember":           {"name": "m2", "force": false},
		"evacuateMember":         {"name": "m2", "mode": "STOP"},
		"restoreMember":          {"name": "m2"},
		"installOperatingSystem": {"name": "node-a", "series": "noble", "memberConfig": []any{map[string]any{"entity": "storage-pool", "name": "local", "key": "source", "value": ""}}},
		"commissionMachine":      {"systemId": "aaaa01", "tests": []any{"smartctl-validate"}},
		"runHardwareTests":       {"systemId": "aaaa01", "hostname": "node-a", "tests": []any{"smartctl-validate"}},
		"releaseMachine":         {"systemId": "dddd04", "erase": false, "comment": "back to the pool"},
		"setFenceMapping":        {"member": "m2", "maasSystemId": "mmmm02", "hardwareUuid": uuidM2},
		"removeFenceMapping":     {"member": "m2"},
		"setHardwareProfile":     profile,
		"removeHardwareProfile":  {"profile": "small"},
		"assignHardwareProfile":  {"machine": "node-z", "profile": "small"},
		"clearHardwareProfile":   {"machine": "node-z"},
		"createIdentity": {"name": "ops", "permissions": []any{"VIEW_INFRASTRUCTURE", "MANAGE_INFRASTRUCTURE"}, "expiresIn": "30d",
			"grants": []any{map[string]any{"permission": "MANAGE_INFRASTRUCTURE", "cluster": "default"}}},
		"revokeIdentity":      {"name": "viewer"},
		"setPlacementGuard":   {"enabled": true},
		"startRollingReboot":  {"members": []any{"m2"}},
		"pauseRollingReboot":  {"id": "1"},
		"resumeRollingReboot": {"id": "1"},
		"cancelRollingReboot": {"id": "1"},
		"registerCluster":     {"name": "rack2", "url": x.rack2.URL, "clusterCertificate": x.rack2.ClusterCertificatePEM()},
		"removeCluster":       {"name": "rack2"},
	}
}

// changeWorld is startChangeWorld's world: the planned product, and a second lab (rack2)
// that trusts the product's client identity, for registerCluster.
type changeWorld struct {
	*planned
	rack2 *incuslab.Cluster
}

// startChangeWorld is a world in which every example of changeExamples plans something
// worth planning: a two-member lab, the MAAS simulator, records for node-a (MAAS, Ready),
// m2 (MAAS, a member), node-busy (MAAS, Deployed) and node-z (manual), a hardware profile,
// m2's fence mapping, a viewer to revoke, and a one-member lab to register as rack2.
func startChangeWorld(t *testing.T) *changeWorld {
	t.Helper()
	p := startPlanned(t, true)
	x := &changeWorld{planned: p, rack2: incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: p.lab.Identity()})}
	for _, r := range []struct{ name, prov, id string }{{"node-a", "MAAS", "aaaa01"}, {"m2", "MAAS", "mmmm02"}, {"node-busy", "MAAS", "dddd04"}, {"node-z", "MANUAL", ""}} {
		if resp := x.register(t, r.name, r.prov, r.id); len(resp.Errors) > 0 {
			t.Fatalf("register %s: %+v", r.name, resp.Errors)
		}
	}
	x.e.Identity("viewer", identity.ViewInfrastructure)
	x.must(t, `mutation { setHardwareProfile(input: {profile: "small", architecture: "x86_64", minCpuCores: 1}) { profile { name } } }`, nil)
	x.must(t, setMapping, mappingVars("m2", "mmmm02", uuidM2))
	return x
}

// changeCall runs one declared change with in (plus extra input fields) and answers its
// plan, or the error's code.
func (x *planned) changeCall(t *testing.T, token, mutation string, in map[string]any) (plan map[string]any, code string, msg string) {
	t.Helper()
	decl, ok := mutations.Of(mutation)
	if !ok {
		t.Fatalf("%s is not a declared change", mutation)
	}
	q := fmt.Sprintf(`mutation($in: %s!) { %s(input: $in) { %s } }`, decl.Input, mutation, planFields)
	r := x.e.GQL(token, q, map[string]any{"in": in})
	if len(r.Errors) > 0 {
		return nil, r.Code(), r.Errors[0].Message
	}
	plan, _ = r.Data[mutation].(map[string]any)["plan"].(map[string]any)
	return plan, "", ""
}

// TestEveryPlanIsStableForTheSameInputAndWorld plans every declared change twice with the
// same input, more than two seconds apart, in a world that did not change: each has one
// hash (issue 24.1: nothing per call, such as a join token, its expiry or a clock, is in
// what a plan's hash covers). installOperatingSystem is the case that broke: its user data
// holds a new token, expiring to the second, at every call.
func TestEveryPlanIsStableForTheSameInputAndWorld(t *testing.T) {
	parallel(t)
	x := startChangeWorld(t)
	examples := changeExamples(x)
	var names []string
	for _, m := range mutations.All() {
		if _, ok := examples[m.Name]; !ok {
			t.Errorf("%s is declared (@change) but changeExamples has no input for it", m.Name)
			continue
		}
		names = append(names, m.Name)
	}
	sort.Strings(names)
	first := map[string]map[string]any{}
	for _, name := range names {
		p, code, msg := x.changeCall(t, x.admin, name, mapsWith(examples[name], "dryRun", true))
		if code != "" {
			t.Fatalf("%s dry run: %s %s", name, code, msg)
		}
		first[name] = p
		t.Logf("%s: refused %v %v, %d calls", name, p["refused"], p["refusals"], len(p["calls"].([]any)))
	}
	if p := first["installOperatingSystem"]; p["refused"] != false {
		t.Fatalf("the install example is refused, so it proves nothing about its user data: %v", p["refusals"])
	}
	if ud := fmt.Sprint(callsTo(first["installOperatingSystem"], "MAAS")); !strings.Contains(ud, "user-data template sha256:") || !strings.Contains(ud, "enrol-member.sh sha256:") {
		t.Fatalf("install plan's MAAS calls do not show the user data as approved: %s", ud)
	}
	time.Sleep(2100 * time.Millisecond) // a human's pause between reading a plan and confirming it
	for _, name := range names {
		p, code, msg := x.changeCall(t, x.admin, name, mapsWith(examples[name], "dryRun", true))
		if code != "" {
			t.Fatalf("%s dry run again: %s %s", name, code, msg)
		}
		if p["planHash"] != first[name]["planHash"] {
			t.Errorf("%s planned twice 2 s apart hashed %v, then %v:\nfirst  %v\nsecond %v", name, first[name]["planHash"], p["planHash"], first[name], p)
		}
		// Plans list each call once.
		seen := map[string]bool{}
		for _, c := range p["calls"].([]any) {
			k := fmt.Sprint(c)
			if seen[k] {
				t.Errorf("%s plan lists a call twice: %v", name, k)
			}
			seen[k] = true
		}
	}
	// An evacuation's call names the member, not "state".
	for _, c := range callsTo(first["evacuateMember"], "INCUS") {
		if c["target"] != "m2" {
			t.Errorf("evacuate call %v: its target must be the member", c)
		}
	}
}
