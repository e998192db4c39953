package app

import (
	"context"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/admission"
	"github.com/apelora/fabric/hardware"
)

var _ admission.MAASInventory = maasPorts{}

// MemberHardware is Incus's view of a member's hardware, as hardware profiles count it.
func (p incusPorts) MemberHardware(ctx context.Context, member string) (hardware.Inventory, error) {
	r, err := p.c.Resources(ctx, member)
	if err != nil {
		return hardware.Inventory{}, incusErr(err, "read the hardware of member "+member)
	}
	return incusInventory(r), nil
}

// incusInventory counts disks that hold data (not optical, removable, read-only or empty
// drives: a card reader or a virtual DVD is no disk) and every port of every network card.
func incusInventory(r incus.Resources) hardware.Inventory {
	inv := hardware.Inventory{Architecture: r.Architecture, CPUCores: r.CPUs, MemoryMiB: int(r.MemoryBytes >> 20)}
	for _, d := range r.Disks {
		if d.Removable || d.ReadOnly || d.SizeBytes <= 0 || d.Type == "cdrom" {
			continue
		}
		inv.Disks = append(inv.Disks, hardware.Disk{Name: d.ID, SizeBytes: d.SizeBytes})
	}
	for _, c := range r.NetworkCards {
		if len(c.Ports) == 0 {
			// A card whose driver reports no ports is still one NIC, of unknown speed.
			inv.NICs = append(inv.NICs, hardware.NIC{Name: c.PCIAddress})
		}
		for _, port := range c.Ports {
			inv.NICs = append(inv.NICs, hardware.NIC{Name: port.ID, SpeedMbps: port.LinkSpeedMbps})
		}
	}
	return inv
}

func (noIncus) MemberHardware(context.Context, string) (hardware.Inventory, error) {
	return hardware.Inventory{}, errIncusNotConfigured
}

// HardwareInventory is what MAAS inventoried of a machine at commissioning: three reads
// (the machine, its block devices, its interfaces), each bounded by the request timeout.
func (p maasPorts) HardwareInventory(ctx context.Context, id string) (hardware.Inventory, error) {
	m, err := p.c.Machine(ctx, id)
	if err != nil {
		return hardware.Inventory{}, maasErr(err, "read MAAS machine "+id)
	}
	disks, err := p.c.BlockDevices(ctx, id)
	if err != nil {
		return hardware.Inventory{}, maasErr(err, "read the block devices of MAAS machine "+id)
	}
	nics, err := p.c.Interfaces(ctx, id)
	if err != nil {
		return hardware.Inventory{}, maasErr(err, "read the interfaces of MAAS machine "+id)
	}
	return maasInventory(m, disks, nics), nil
}

// maasInventory counts physical disks (not MAAS's virtual devices: RAID, LVM, bcache are
// built from them) and physical interfaces (bonds, bridges and VLANs are built on them).
// A link that was down at commissioning has no speed to count.
func maasInventory(m maas.Machine, disks []maas.BlockDevice, nics []maas.Interface) hardware.Inventory {
	inv := hardware.Inventory{Architecture: m.Architecture, CPUCores: m.CPUCount, MemoryMiB: m.MemoryMiB}
	for _, d := range disks {
		if d.Type == "physical" {
			inv.Disks = append(inv.Disks, hardware.Disk{Name: d.Name, SizeBytes: d.SizeBytes})
		}
	}
	for _, n := range nics {
		if n.Type != "physical" {
			continue
		}
		speed := 0
		if n.LinkConnected {
			speed = n.LinkSpeedMbps
		}
		inv.NICs = append(inv.NICs, hardware.NIC{Name: n.Name, SpeedMbps: speed})
	}
	return inv
}
