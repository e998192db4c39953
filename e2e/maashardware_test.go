package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// The machine page's MAAS hardware tab: storage, interfaces and per-script results read
// from MAAS for the one machine asked about, and never for the fleet's rows.
func TestMAASHardwareIsReadOnlyForTheMachineAskedAbout(t *testing.T) {
	parallel(t)
	f := maasFleet()
	f.Machines[0].StorageBytes = 0 // the disks say
	f.Machines[0].Disks = []sim.DiskSpec{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336, Model: "PM9A3", Serial: "S64GNA0R"}, {Name: "sdb", SizeBytes: 480_103_981_056}}
	f.Machines[0].Interfaces = []sim.InterfaceSpec{{Name: "ens1f0", LinkSpeed: 25000, Fabric: "fabric-1", VID: 120}, {Name: "ens1f1", InterfaceSpeed: 25000}}
	f.Machines[0].LastTests = map[string]string{"smartctl-validate": "passed", "stress-ng-cpu-short": "failed"}
	m := producttest.StartMAAS(t, f)
	e := producttest.Start(t, producttest.WithMAAS(m.Config))
	viewer := e.Identity("viewer", identity.ViewInfrastructure)

	nodeReads := func() int {
		n := 0
		for _, r := range m.Requests() {
			if strings.HasPrefix(r.Path, "/MAAS/api/2.0/nodes/") {
				n++
			}
		}
		return n
	}
	e.MustGQL(viewer, `{ fleet { machines { name maas { systemId testingStatus } } } }`, nil)
	if n := nodeReads(); n != 0 {
		t.Fatalf("the fleet query read %d node details from MAAS", n)
	}

	d := e.MustGQL(viewer, `{ machine(name: "node-a") { maas {
		storageDevices { name type model serial sizeBytes }
		networkInterfaces { name macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }
		scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds } } } }`, nil)
	got, _ := json.Marshal(d["machine"].(map[string]any)["maas"])
	var hw struct {
		StorageDevices []struct {
			Name, Type string
			Model      *string
			SizeBytes  float64
		}
		NetworkInterfaces []struct {
			Name                              string
			LinkConnected                     bool
			LinkSpeedMbps, InterfaceSpeedMbps *int
			Fabric, Vlan                      *string
		}
		ScriptResults []struct {
			Name, Kind, Status string
			Failed             bool
			HardwareType       *string
			Started, Ended     *string
			DurationSeconds    *int
		}
	}
	if err := json.Unmarshal(got, &hw); err != nil {
		t.Fatal(err)
	}
	if len(hw.StorageDevices) != 2 || hw.StorageDevices[0].SizeBytes != 3_840_755_982_336 || *hw.StorageDevices[0].Model != "PM9A3" ||
		hw.StorageDevices[0].Type != "physical" {
		t.Fatalf("storage: %s", got)
	}
	nics := hw.NetworkInterfaces
	if len(nics) != 2 || *nics[0].LinkSpeedMbps != 25000 || *nics[0].Fabric != "fabric-1" || *nics[0].Vlan != "120" ||
		nics[1].LinkConnected || nics[1].LinkSpeedMbps != nil || *nics[1].InterfaceSpeedMbps != 25000 || nics[1].Vlan != nil {
		t.Fatalf("interfaces: %s", got)
	}
	rs := hw.ScriptResults
	if len(rs) != 3 || rs[0].Kind != "COMMISSIONING" || rs[0].Failed || rs[0].Started == nil || *rs[0].DurationSeconds != 180 {
		t.Fatalf("commissioning results: %s", got)
	}
	failed := 0
	for _, r := range rs[1:] {
		if r.Kind != "TESTING" || r.Ended == nil || r.DurationSeconds == nil {
			t.Fatalf("testing results: %s", got)
		}
		if r.Failed {
			failed++
			if r.Name != "stress-ng-cpu-short" || r.Status != "Failed" || *r.HardwareType != "CPU" {
				t.Fatalf("failed script: %s", got)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("want one failed script: %s", got)
	}
	// Storage (1), interfaces (1), results (commissioning and testing: 2), for node-a only.
	if n := nodeReads(); n != 4 {
		t.Fatalf("%d node reads for one machine's hardware, want 4", n)
	}
	for _, r := range m.Requests() {
		if strings.HasPrefix(r.Path, "/MAAS/api/2.0/nodes/") && !strings.HasPrefix(r.Path, "/MAAS/api/2.0/nodes/aaaa01/") {
			t.Fatalf("read another machine: %s", r.Path)
		}
	}

	// Never commissioned: nothing inventoried, nothing run; the boot interface, no speed.
	d = e.MustGQL(viewer, `{ machine(name: "node-new") { maas { storageDevices { name } networkInterfaces { linkSpeedMbps } scriptResults { name } } } }`, nil)
	if got, _ := json.Marshal(d); string(got) != `{"machine":{"maas":{"networkInterfaces":[{"linkSpeedMbps":null}],"scriptResults":[],"storageDevices":[]}}}` {
		t.Fatalf("a New machine: %s", got)
	}
}
