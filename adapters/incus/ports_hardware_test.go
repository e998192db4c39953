package app

import (
	"reflect"
	"testing"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/domain/hardware"
)

func TestInventoriesCountWhatAProfileMeans(t *testing.T) {
	got := incusInventory(incus.Resources{
		Architecture: "x86_64", CPUs: 64, MemoryBytes: 256 << 30,
		Disks: []incus.ResourceDisk{
			{ID: "nvme0n1", Type: "nvme", SizeBytes: 3_840_755_982_336},
			{ID: "sr0", Type: "cdrom", Removable: true, ReadOnly: true},
			{ID: "sdb", Type: "usb", SizeBytes: 32e9, Removable: true},
			{ID: "mmcblk0", Type: "mmc"},
		},
		NetworkCards: []incus.NetworkCard{
			{Driver: "ice", PCIAddress: "0000:41:00.0", Ports: []incus.NetworkPort{{ID: "eno1", LinkSpeedMbps: 25000}, {ID: "eno2"}}},
			{Driver: "odd", PCIAddress: "0000:42:00.0"},
		},
	})
	want := hardware.Inventory{Architecture: "x86_64", CPUCores: 64, MemoryMiB: 262144,
		Disks: []hardware.Disk{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336}},
		NICs:  []hardware.NIC{{Name: "eno1", SpeedMbps: 25000}, {Name: "eno2"}, {Name: "0000:42:00.0"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Incus inventory\n got %+v\nwant %+v", got, want)
	}

	got = maasInventory(maas.Machine{Architecture: "amd64/generic", CPUCount: 64, MemoryMiB: 262144},
		[]maas.BlockDevice{{Name: "sda", Type: "physical", SizeBytes: 960e9}, {Name: "md0", Type: "virtual", SizeBytes: 1920e9}},
		[]maas.Interface{
			{Name: "eno1", Type: "physical", LinkConnected: true, LinkSpeedMbps: 25000},
			{Name: "eno2", Type: "physical", LinkConnected: false, LinkSpeedMbps: 10000, InterfaceSpeedMbps: 25000},
			{Name: "bond0", Type: "bond", LinkConnected: true, LinkSpeedMbps: 50000},
		})
	want = hardware.Inventory{Architecture: "amd64/generic", CPUCores: 64, MemoryMiB: 262144,
		Disks: []hardware.Disk{{Name: "sda", SizeBytes: 960e9}},
		NICs:  []hardware.NIC{{Name: "eno1", SpeedMbps: 25000}, {Name: "eno2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MAAS inventory\n got %+v\nwant %+v", got, want)
	}
}
