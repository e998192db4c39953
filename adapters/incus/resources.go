package incus

import "context"

// Resources is what GET /1.0/resources says about a member's hardware: the parts a
// hardware profile is compared with.
type Resources struct {
	Architecture string // the kernel's name: "x86_64", "aarch64" …
	CPUs         int    // logical CPUs (hardware threads)
	MemoryBytes  int64
	Disks        []ResourceDisk
	NetworkCards []NetworkCard
	// SystemType is "physical", "virtual-machine", "container" … as Incus detects it.
	SystemType string
}

// ResourceDisk is one disk Incus sees on the member.
type ResourceDisk struct {
	ID        string // kernel name: "sda", "nvme0n1", "vda"
	Type      string // "sata", "nvme", "scsi", "virtio", "cdrom", "usb" …
	Model     string
	SizeBytes int64
	Removable bool
	ReadOnly  bool
}

// NetworkCard is one network card; a card has one or more ports.
type NetworkCard struct {
	Driver     string
	PCIAddress string
	Ports      []NetworkPort
}

// NetworkPort is one port of a card. LinkSpeedMbps is 0 when Incus does not report one
// (no link, or a driver that does not say, as virtio).
type NetworkPort struct {
	ID            string // interface name: "eno1"
	MAC           string
	LinkDetected  bool
	LinkSpeedMbps int
}

type resourcesJSON struct {
	CPU struct {
		Architecture string `json:"architecture"`
		Total        int    `json:"total"`
	} `json:"cpu"`
	Memory struct {
		Total int64 `json:"total"`
	} `json:"memory"`
	Storage struct {
		Disks []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Model     string `json:"model"`
			Size      int64  `json:"size"`
			Removable bool   `json:"removable"`
			ReadOnly  bool   `json:"read_only"`
		} `json:"disks"`
	} `json:"storage"`
	Network struct {
		Cards []struct {
			Driver     string `json:"driver"`
			PCIAddress string `json:"pci_address"`
			Ports      []struct {
				ID           string `json:"id"`
				Address      string `json:"address"`
				LinkDetected bool   `json:"link_detected"`
				LinkSpeed    int    `json:"link_speed"`
			} `json:"ports"`
		} `json:"cards"`
	} `json:"network"`
	System struct {
		Type string `json:"type"`
	} `json:"system"`
}

// Resources reads GET /1.0/resources from the member the client talks to when target is
// "", or from member target (forwarded with ?target=). An unknown member gives an error
// matching ErrNotFound.
func (c *Client) Resources(ctx context.Context, target string) (Resources, error) {
	var w resourcesJSON
	if _, err := c.get(ctx, "/1.0/resources", targetQuery(target), &w); err != nil {
		return Resources{}, err
	}
	r := Resources{
		Architecture: w.CPU.Architecture, CPUs: w.CPU.Total, MemoryBytes: w.Memory.Total, SystemType: w.System.Type,
		Disks:        make([]ResourceDisk, 0, len(w.Storage.Disks)),
		NetworkCards: make([]NetworkCard, 0, len(w.Network.Cards)),
	}
	for _, d := range w.Storage.Disks {
		r.Disks = append(r.Disks, ResourceDisk{ID: d.ID, Type: d.Type, Model: d.Model, SizeBytes: d.Size, Removable: d.Removable, ReadOnly: d.ReadOnly})
	}
	for _, wc := range w.Network.Cards {
		card := NetworkCard{Driver: wc.Driver, PCIAddress: wc.PCIAddress, Ports: make([]NetworkPort, 0, len(wc.Ports))}
		for _, p := range wc.Ports {
			card.Ports = append(card.Ports, NetworkPort{ID: p.ID, MAC: p.Address, LinkDetected: p.LinkDetected, LinkSpeedMbps: p.LinkSpeed})
		}
		r.NetworkCards = append(r.NetworkCards, card)
	}
	return r, nil
}
