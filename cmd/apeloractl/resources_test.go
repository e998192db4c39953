package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// The hardware profile and fence mapping commands against a real server: each change
// plans with -dry-run and changes nothing then, is made, and reads back as made.
func TestHardwareProfileAndFenceMappingCommands(t *testing.T) {
	e := producttest.Start(t)
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	must := func(says string, args ...string) string {
		t.Helper()
		out, err := do(args...)
		if err != nil || !strings.Contains(out, says) {
			t.Fatalf("apeloractl %s: %v\n%s\nwant it to say %q", strings.Join(args, " "), err, out, says)
		}
		return out
	}
	if _, err := do("register", "node-1"); err != nil {
		t.Fatal(err)
	}

	must("INSERT hardware_profiles", "set-hardware-profile", "gen2", "-architecture", "amd64", "-min-cpu-cores", "8", "-dry-run")
	must("PROFILE", "hardware-profiles")
	if out, _ := do("hardware-profiles"); strings.Contains(out, "gen2") {
		t.Fatalf("a planned profile was declared:\n%s", out)
	}
	must("declared hardware profile gen2: x86_64, 8 CPUs", "set-hardware-profile", "gen2", "-architecture", "amd64", "-min-cpu-cores", "8", "-min-disks", "2", "-min-disk-size-gb", "500")
	must("replaced hardware profile gen2", "set-hardware-profile", "gen2", "-architecture", "x86_64", "-min-cpu-cores", "16", "-description", "rack 4")
	must("assigned hardware profile gen2 to node-1", "assign-hardware-profile", "node-1", "gen2")
	if out := must("gen2", "hardware-profiles"); !regexp.MustCompile(`gen2\s+x86_64, 16 CPUs\s+node-1\s`).MatchString(out) {
		t.Fatalf("hardware-profiles:\n%s", out)
	}
	// Removing a profile still assigned is refused by the plan, and the exit status says so.
	if out, err := do("remove-hardware-profile", "gen2", "-dry-run"); err == nil || !strings.Contains(out, "would be refused") || exitStatus(err) != exitError {
		t.Fatalf("remove-hardware-profile of an assigned profile -dry-run: %v (exit %d)\n%s", err, exitStatus(err), out)
	}
	must("cleared the hardware profile of node-1 (it had gen2)", "clear-hardware-profile", "node-1")
	must("removed hardware profile gen2", "remove-hardware-profile", "gen2")
	var profiles []any
	if out, err := do("-json", "hardware-profiles"); err != nil || json.Unmarshal([]byte(out), &profiles) != nil || len(profiles) != 0 {
		t.Fatalf("hardware-profiles -json after the removal: %v\n%s", err, out)
	}

	const uuid = "4c4c4544-0042-3510-8052-b7c04f4e0001"
	must("plan (nothing was changed)", "set-fence-mapping", "node-1", "-maas-system-id", "aaaa01", "-hardware-uuid", uuid, "-dry-run")
	if out := must("MEMBER", "fence-mappings"); strings.Contains(out, "aaaa01") {
		t.Fatalf("a planned mapping was set:\n%s", out)
	}
	must("mapped member node-1 to MAAS machine aaaa01", "set-fence-mapping", "node-1", "-maas-system-id", "aaaa01", "-hardware-uuid", uuid)
	if out := must("aaaa01", "fence-mappings"); !regexp.MustCompile(`node-1\s+aaaa01\s+` + uuid + `\s+not drilled yet\s`).MatchString(out) {
		t.Fatalf("fence-mappings:\n%s", out)
	}
	must("removed the fence mapping of node-1", "remove-fence-mapping", "node-1")
	if out := must("MEMBER", "fence-mappings"); strings.Contains(out, "aaaa01") {
		t.Fatalf("the mapping stayed after its removal:\n%s", out)
	}
	// Every change above was one audit event; the dry runs none.
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action IN ('setHardwareProfile', 'assignHardwareProfile', 'clearHardwareProfile', 'removeHardwareProfile', 'setFenceMapping', 'removeFenceMapping') AND outcome = 'SUCCEEDED'`).(int64); n != 7 {
		t.Errorf("%d audited changes, want 7", n)
	}
}
