package incus

import (
	"reflect"
	"testing"

	"github.com/apelora/fabric/domain/hardware"
)

// The Incus inventory counts what a hardware profile means: fixed disks, not removable or
// read-only ones; each port of a card, or the card when it has none.
func TestIncusInventoryCountsWhatAProfileMeans(t *testing.T) {
	got := incusInventory(Resources{
		Architecture: "x86_64", CPUs: 64, MemoryBytes: 256 << 30,
		Disks: []ResourceDisk{
			{ID: "nvme0n1", Type: "nvme", SizeBytes: 3_840_755_982_336},
			{ID: "sr0", Type: "cdrom", Removable: true, ReadOnly: true},
			{ID: "sdb", Type: "usb", SizeBytes: 32e9, Removable: true},
			{ID: "mmcblk0", Type: "mmc"},
		},
		NetworkCards: []NetworkCard{
			{Driver: "ice", PCIAddress: "0000:41:00.0", Ports: []NetworkPort{{ID: "eno1", LinkSpeedMbps: 25000}, {ID: "eno2"}}},
			{Driver: "odd", PCIAddress: "0000:42:00.0"},
		},
	})
	want := hardware.Inventory{Architecture: "x86_64", CPUCores: 64, MemoryMiB: 262144,
		Disks: []hardware.Disk{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336}},
		NICs:  []hardware.NIC{{Name: "eno1", SpeedMbps: 25000}, {Name: "eno2"}, {Name: "0000:42:00.0"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Incus inventory\n got %+v\nwant %+v", got, want)
	}

}
