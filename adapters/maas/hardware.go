package maas

import (
	"context"
	"fmt"
	"net/http"
)

// BlockDevice is one block device MAAS found on a machine at commissioning.
type BlockDevice struct {
	ID        int
	Name      string // "sda", "nvme0n1"
	Type      string // "physical" (a disk), "virtual" (md, LVM, bcache …), "iscsi"
	Path      string
	Model     string
	Serial    string
	SizeBytes int64
	BlockSize int
}

// Interface is one network interface MAAS knows on a machine.
type Interface struct {
	ID            int
	Name          string // "eno1"
	Type          string // "physical", "bond", "bridge", "vlan", "alias"
	MACAddress    string
	Enabled       bool
	LinkConnected bool
	// LinkSpeedMbps is the speed the link ran at when commissioning looked (Mbit/s), 0
	// when unknown or not connected; InterfaceSpeedMbps is the most the interface can do.
	LinkSpeedMbps      int
	InterfaceSpeedMbps int
	// Fabric and VLAN are where MAAS saw the interface connected: VLAN is the VLAN's name
	// ("untagged", "100"). Both "" when MAAS knows no VLAN for it (not connected).
	Fabric string
	VLAN   string
}

type wireBlockDevice struct {
	ID        int     `json:"id"`
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	Path      string  `json:"path"`
	Model     *string `json:"model"`
	Serial    *string `json:"serial"`
	Size      int64   `json:"size"`
	BlockSize int     `json:"block_size"`
}

type wireInterface struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	Type           string `json:"type"`
	MACAddress     string `json:"mac_address"`
	Enabled        bool   `json:"enabled"`
	LinkConnected  bool   `json:"link_connected"`
	LinkSpeed      int    `json:"link_speed"`
	InterfaceSpeed int    `json:"interface_speed"`
	VLAN           *struct {
		Name   string `json:"name"`
		Fabric string `json:"fabric"`
	} `json:"vlan"`
}

// BlockDevices lists a machine's block devices: GET nodes/{id}/blockdevices/. A machine
// that was never commissioned has none.
func (c *Client) BlockDevices(ctx context.Context, systemID string) ([]BlockDevice, error) {
	if err := checkSystemID(systemID); err != nil {
		return nil, err
	}
	var ws []wireBlockDevice
	if err := c.do(ctx, call{method: http.MethodGet, path: "nodes/" + systemID + "/blockdevices/"}, &ws); err != nil {
		return nil, fmt.Errorf("list the block devices of MAAS machine %s: %w", systemID, err)
	}
	out := make([]BlockDevice, len(ws))
	for i, w := range ws {
		out[i] = BlockDevice{ID: w.ID, Name: w.Name, Type: w.Type, Path: w.Path, Model: deref(w.Model),
			Serial: deref(w.Serial), SizeBytes: w.Size, BlockSize: w.BlockSize}
	}
	return out, nil
}

// Interfaces lists a machine's network interfaces: GET nodes/{id}/interfaces/.
func (c *Client) Interfaces(ctx context.Context, systemID string) ([]Interface, error) {
	if err := checkSystemID(systemID); err != nil {
		return nil, err
	}
	var ws []wireInterface
	if err := c.do(ctx, call{method: http.MethodGet, path: "nodes/" + systemID + "/interfaces/"}, &ws); err != nil {
		return nil, fmt.Errorf("list the interfaces of MAAS machine %s: %w", systemID, err)
	}
	out := make([]Interface, len(ws))
	for i, w := range ws {
		out[i] = Interface{ID: w.ID, Name: w.Name, Type: w.Type, MACAddress: w.MACAddress, Enabled: w.Enabled,
			LinkConnected: w.LinkConnected, LinkSpeedMbps: w.LinkSpeed, InterfaceSpeedMbps: w.InterfaceSpeed}
		if w.VLAN != nil {
			out[i].Fabric, out[i].VLAN = w.VLAN.Fabric, w.VLAN.Name
		}
	}
	return out, nil
}
