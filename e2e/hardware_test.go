package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

const setProfile = `mutation($in: SetHardwareProfileInput!) { setHardwareProfile(input: $in) {
	profile { name architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps setBy machines } previous { minCpuCores } } }`

func TestHardwareProfilesThroughTheAPI(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-1", provisioner: MANUAL}) { machine { name } } }`, nil)
	gen2 := map[string]any{"profile": "gen2", "architecture": "amd64", "minCpuCores": 32, "minMemoryMiB": 131072,
		"minDisks": 2, "minDiskSizeGB": 960, "minNics": 2, "minNicSpeedMbps": 25000}

	// Bad input: INVALID_INPUT naming the field, a bounded message, nothing changed, and
	// exactly one audit event per call.
	with := func(k string, v any) map[string]any {
		in := map[string]any{}
		for kk, vv := range gen2 {
			in[kk] = vv
		}
		in[k] = v
		return in
	}
	for _, c := range []struct {
		name  string
		input map[string]any
		field string
		says  string
	}{
		{"negative cores", with("minCpuCores", -4), "minCpuCores", "cannot be negative"},
		{"absurd memory", with("minMemoryMiB", 1_000_000_000), "minMemoryMiB", "check the unit"},
		{"absurd disk size", with("minDiskSizeGB", 2_000_000_000), "minDiskSizeGB", "check the unit"},
		{"disk size without a count", with("minDisks", 0), "minDisks", "how many disks"},
		{"unknown architecture", with("architecture", "sparc9000"), "architecture", "unknown architecture"},
		{"bad name", with("profile", "Gen 2"), "profile", "not valid"},
		{"NUL bytes", with("profile", "gen\x002"), "profile", "not valid"},
		{"half-megabyte architecture (the body cap is 1 MiB)", with("architecture", strings.Repeat("x", 512<<10)), "architecture", "unknown architecture"},
		{"half-megabyte description", with("description", strings.Repeat("d", 512<<10)), "description", "longer than 1024"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, events := e.Snapshot(), e.Count("audit_events")
			r := e.GQL(admin, setProfile, map[string]any{"in": c.input})
			if r.Code() != "INVALID_INPUT" || r.Errors[0].Extensions["field"] != c.field || !strings.Contains(r.Errors[0].Message, c.says) {
				t.Fatalf("got %+v; want INVALID_INPUT on %s saying %q", r.Errors, c.field, c.says)
			}
			if len(r.Errors[0].Message) > 600 {
				t.Fatalf("the error quotes %d bytes", len(r.Errors[0].Message))
			}
			if e.Snapshot() != before {
				t.Fatal("bad input changed the database")
			}
			if n := e.Count("audit_events"); n != events+1 {
				t.Fatalf("%d audit events for one call", n-events)
			}
		})
	}

	// Declare, read back, assign.
	d := e.MustGQL(admin, setProfile, map[string]any{"in": gen2})["setHardwareProfile"].(map[string]any)
	if fmt.Sprint(d) != "map[previous:<nil> profile:map[architecture:x86_64 machines:[] minCpuCores:32 minDiskSizeGB:960 minDisks:2 minMemoryMiB:131072 minNicSpeedMbps:25000 minNics:2 name:gen2 setBy:admin]]" {
		t.Fatalf("declared: %v", d)
	}
	assign := `mutation($m: String!, $p: String!) { assignHardwareProfile(input: {machine: $m, profile: $p}) { machine { name hardwareProfile { name } record { hardwareProfile } } previousProfile } }`
	if r := e.GQL(admin, assign, map[string]any{"m": "node-9", "p": "gen2"}); r.Code() != "NOT_FOUND" || r.Errors[0].Extensions["field"] != "machine" {
		t.Fatalf("assign to an unknown machine: %+v", r.Errors)
	}
	if r := e.GQL(admin, assign, map[string]any{"m": "node-1", "p": "gen9"}); r.Code() != "NOT_FOUND" || r.Errors[0].Extensions["field"] != "profile" {
		t.Fatalf("assign an unknown profile: %+v", r.Errors)
	}
	if r := e.GQL(viewer, assign, map[string]any{"m": "node-1", "p": "gen2"}); r.Code() != "FORBIDDEN" {
		t.Fatalf("assign without manage-infrastructure: %+v", r.Errors)
	}
	a := e.MustGQL(admin, assign, map[string]any{"m": "node-1", "p": "gen2"})["assignHardwareProfile"]
	if fmt.Sprint(a) != "map[machine:map[hardwareProfile:map[name:gen2] name:node-1 record:map[hardwareProfile:gen2]] previousProfile:<nil>]" {
		t.Fatalf("assigned: %v", a)
	}
	list := e.MustGQL(viewer, `{ hardwareProfiles { name machines } hardwareProfile(name: "gen2") { minNics } machines { name hardwareProfile { name minCpuCores } } }`, nil)
	if fmt.Sprint(list) != "map[hardwareProfile:map[minNics:2] hardwareProfiles:[map[machines:[node-1] name:gen2]] machines:[map[hardwareProfile:map[minCpuCores:32 name:gen2] name:node-1]]]" {
		t.Fatalf("reads: %v", list)
	}

	// Replacing a profile keeps its machines and says what it replaced.
	d = e.MustGQL(admin, setProfile, map[string]any{"in": with("minCpuCores", 16)})["setHardwareProfile"].(map[string]any)
	if fmt.Sprint(d["previous"]) != "map[minCpuCores:32]" || fmt.Sprint(d["profile"].(map[string]any)["machines"]) != "[node-1]" {
		t.Fatalf("replaced: %v", d)
	}

	// A profile still assigned is not removed; the refusal names the machine.
	remove := `mutation { removeHardwareProfile(input: {profile: "gen2"}) { removed { name } } }`
	if r := e.GQL(admin, remove, nil); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "still assigned to node-1") {
		t.Fatalf("remove an assigned profile: %+v", r.Errors)
	}
	c := e.MustGQL(admin, `mutation { clearHardwareProfile(input: {machine: "node-1"}) { machine { hardwareProfile { name } } previousProfile } }`, nil)
	if fmt.Sprint(c) != "map[clearHardwareProfile:map[machine:map[hardwareProfile:<nil>] previousProfile:gen2]]" {
		t.Fatalf("cleared: %v", c)
	}
	if d := e.MustGQL(admin, remove, nil); fmt.Sprint(d) != "map[removeHardwareProfile:map[removed:map[name:gen2]]]" {
		t.Fatalf("removed: %v", d)
	}
	if r := e.GQL(admin, remove, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("remove twice: %+v", r.Errors)
	}

	// The audit trail: profile steps name no machine; assignments name theirs. Invalid
	// input and every other refusal is REFUSED (nothing was tried), none FAILED.
	rows := e.Scalar(`SELECT string_agg(action || ':' || outcome || ':' || coalesce(machine, '-'), ' ' ORDER BY id) FROM audit_events
		WHERE action LIKE '%HardwareProfile'`).(string)
	want := strings.Repeat("setHardwareProfile:REFUSED:- ", 9) + "setHardwareProfile:SUCCEEDED:- " +
		"assignHardwareProfile:REFUSED:node-9 assignHardwareProfile:REFUSED:node-1 assignHardwareProfile:REFUSED:node-1 assignHardwareProfile:SUCCEEDED:node-1 " +
		"setHardwareProfile:SUCCEEDED:- removeHardwareProfile:REFUSED:- clearHardwareProfile:SUCCEEDED:node-1 removeHardwareProfile:SUCCEEDED:- removeHardwareProfile:REFUSED:-"
	if rows != want {
		t.Fatalf("audit trail\n got %s\nwant %s", rows, want)
	}
}
