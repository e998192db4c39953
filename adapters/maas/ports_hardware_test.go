package maas

import (
	"reflect"
	"testing"

	"github.com/apelora/fabric/domain/hardware"
)

// The MAAS inventory counts what a hardware profile means: physical disks, connected
// physical interfaces (a bond is not a card).
func TestMAASInventoryCountsWhatAProfileMeans(t *testing.T) {
	var got, want hardware.Inventory
	got = maasInventory(Machine{Architecture: "amd64/generic", CPUCount: 64, MemoryMiB: 262144},
		[]BlockDevice{{Name: "sda", Type: "physical", SizeBytes: 960e9}, {Name: "md0", Type: "virtual", SizeBytes: 1920e9}},
		[]Interface{
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
