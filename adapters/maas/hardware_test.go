package maas_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestHardwareReadsGiveEachMachineItsOwnInventory(t *testing.T) {
	big := spec("big001", sim.StatusReady, "ipmi")
	big.StorageBytes = 0
	big.Disks = []sim.DiskSpec{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336, Model: "PM9A3", Serial: "S64"}, {Name: "nvme1n1", SizeBytes: 3_840_755_982_336}}
	big.Interfaces = []sim.InterfaceSpec{{Name: "ens1f0", MACAddress: "b4:96:91:00:00:01", LinkSpeed: 25000}, {Name: "ens1f1", InterfaceSpeed: 25000}}
	small := spec("sml001", sim.StatusReady, "ipmi")
	e := newEnv(t, withMachines(big, small, neverCommissioned(spec("new001", sim.StatusNew, "ipmi"))))

	disks, err := e.client.BlockDevices(ctx, "big001")
	if err != nil {
		t.Fatal(err)
	}
	if len(disks) != 2 || disks[0].Name != "nvme0n1" || disks[0].Type != "physical" || disks[0].SizeBytes != 3_840_755_982_336 ||
		disks[0].Model != "PM9A3" || disks[0].Serial != "S64" || disks[0].Path != "/dev/disk/by-dname/nvme0n1" || disks[0].BlockSize != 512 {
		t.Fatalf("block devices %+v", disks)
	}
	nics, err := e.client.Interfaces(ctx, "big001")
	if err != nil {
		t.Fatal(err)
	}
	want := []maas.Interface{
		{ID: nics[0].ID, Name: "ens1f0", Type: "physical", MACAddress: "b4:96:91:00:00:01", Enabled: true, LinkConnected: true, LinkSpeedMbps: 25000, InterfaceSpeedMbps: 25000, Fabric: "fabric-0", VLAN: "untagged"},
		{ID: nics[1].ID, Name: "ens1f1", Type: "physical", MACAddress: nics[1].MACAddress, Enabled: true, InterfaceSpeedMbps: 25000},
	}
	if !reflect.DeepEqual(nics, want) || nics[1].MACAddress == "" {
		t.Fatalf("interfaces\n got %+v\nwant %+v", nics, want)
	}
	if r := e.lastRequest(""); r.Method != "GET" || r.Path != "/MAAS/api/2.0/nodes/big001/interfaces/" {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}

	// Another machine, other hardware (the fixture's defaults: one disk, one 1 Gbit/s NIC).
	disks, _ = e.client.BlockDevices(ctx, "sml001")
	nics, _ = e.client.Interfaces(ctx, "sml001")
	if len(disks) != 1 || disks[0].SizeBytes != 960197124000 || len(nics) != 1 || nics[0].LinkSpeedMbps != 1000 {
		t.Fatalf("default hardware: %+v %+v", disks, nics)
	}

	// Commissioning reveals the disks and the links; before, MAAS knows the boot NIC only.
	if disks, _ := e.client.BlockDevices(ctx, "new001"); len(disks) != 0 {
		t.Fatalf("a New machine has disks: %+v", disks)
	}
	if nics, _ := e.client.Interfaces(ctx, "new001"); len(nics) != 1 || nics[0].LinkSpeedMbps != 0 {
		t.Fatalf("a New machine's interfaces: %+v", nics)
	}
	if _, err := e.client.Commission(ctx, "new001", maas.CommissionOptions{TestingScripts: []string{"none"}}); err != nil {
		t.Fatal(err)
	}
	if disks, _ := e.client.BlockDevices(ctx, "new001"); len(disks) != 0 {
		t.Fatal("disks shown while still Commissioning")
	}
	e.clock.Advance(testDurations.Commissioning)
	if disks, _ := e.client.BlockDevices(ctx, "new001"); len(disks) != 1 {
		t.Fatalf("after commissioning: %+v", disks)
	}
	if nics, _ := e.client.Interfaces(ctx, "new001"); nics[0].LinkSpeedMbps != 1000 {
		t.Fatalf("after commissioning: %+v", nics)
	}

	if _, err := e.client.BlockDevices(ctx, "zzzz99"); !errors.Is(err, maas.ErrNotFound) {
		t.Fatalf("unknown machine: %v", err)
	}
	n := len(e.sim.Requests())
	if _, err := e.client.Interfaces(ctx, "../machines"); err == nil || len(e.sim.Requests()) != n {
		t.Fatalf("a system id with URL syntax must be refused before sending: %v", err)
	}
}
