package sim

import (
	"fmt"
	"net/http"
	"net/url"
)

// blockDeviceJSON is DISPLAYED_BLOCKDEVICE_FIELDS (MAAS 3.x) + resource_uri: every field
// gomaasapi's block device parser requires.
type blockDeviceJSON struct {
	SystemID           string   `json:"system_id"`
	ID                 int      `json:"id"`
	Name               string   `json:"name"`
	UUID               *string  `json:"uuid"`
	Type               string   `json:"type"`
	Path               string   `json:"path"`
	Model              string   `json:"model"`
	Serial             string   `json:"serial"`
	IDPath             string   `json:"id_path"`
	Size               int64    `json:"size"`
	BlockSize          int      `json:"block_size"`
	AvailableSize      int64    `json:"available_size"`
	UsedSize           int64    `json:"used_size"`
	UsedFor            string   `json:"used_for"`
	Tags               []string `json:"tags"`
	Filesystem         *empty   `json:"filesystem"`
	PartitionTableType *string  `json:"partition_table_type"`
	Partitions         []empty  `json:"partitions"`
	FirmwareVersion    *string  `json:"firmware_version"`
	StoragePool        *string  `json:"storage_pool"`
	NUMANode           int      `json:"numa_node"`
	ResourceURI        string   `json:"resource_uri"`
}

// interfaceJSON is DISPLAYED_INTERFACE_FIELDS (MAAS 3.x) + resource_uri.
type interfaceJSON struct {
	SystemID        string   `json:"system_id"`
	ID              int      `json:"id"`
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	VLAN            *empty   `json:"vlan"`
	MACAddress      string   `json:"mac_address"`
	Parents         []string `json:"parents"`
	Children        []string `json:"children"`
	Tags            []string `json:"tags"`
	Enabled         bool     `json:"enabled"`
	Links           []empty  `json:"links"`
	Params          string   `json:"params"`
	Discovered      *empty   `json:"discovered"`
	EffectiveMTU    int      `json:"effective_mtu"`
	Vendor          *string  `json:"vendor"`
	Product         *string  `json:"product"`
	FirmwareVersion *string  `json:"firmware_version"`
	LinkConnected   bool     `json:"link_connected"`
	InterfaceSpeed  int      `json:"interface_speed"`
	LinkSpeed       int      `json:"link_speed"`
	NUMANode        int      `json:"numa_node"`
	ResourceURI     string   `json:"resource_uri"`
}

// blockDevices are what commissioning found; none before it has run.
func (s *Server) blockDevices(m *machine) []blockDeviceJSON {
	out := []blockDeviceJSON{}
	if !m.hwKnown {
		return out
	}
	for i, d := range m.disks {
		id := m.internalID*64 + i + 1
		out = append(out, blockDeviceJSON{
			SystemID: m.systemID, ID: id, Name: d.Name, Type: "physical",
			Path: "/dev/disk/by-dname/" + d.Name, Model: d.Model, Serial: d.Serial,
			IDPath: "/dev/disk/by-id/wwn-0x" + fmt.Sprintf("%016x", uint64(id)*0x9e3779b97f4a7c15),
			Size:   d.SizeBytes, BlockSize: 512, AvailableSize: d.SizeBytes, UsedFor: "Unused",
			Tags: []string{"ssd"}, Partitions: []empty{},
			ResourceURI: fmt.Sprintf("%snodes/%s/blockdevices/%d/", apiPrefix, m.systemID, id),
		})
	}
	return out
}

// interfaces: before commissioning MAAS knows only the boot interface, from enlistment (its
// MAC, no speeds); commissioning finds every interface and its link.
func (s *Server) interfaces(m *machine) []interfaceJSON {
	nics := m.nics
	if !m.hwKnown {
		nics = nics[:1]
	}
	out := make([]interfaceJSON, 0, len(nics))
	for i, n := range nics {
		id := m.internalID*64 + i + 1
		j := interfaceJSON{
			SystemID: m.systemID, ID: id, Name: n.Name, Type: "physical", MACAddress: n.MACAddress,
			Parents: []string{}, Children: []string{}, Tags: []string{}, Enabled: true, Links: []empty{},
			EffectiveMTU: 1500, LinkConnected: true,
			ResourceURI: fmt.Sprintf("%snodes/%s/interfaces/%d/", apiPrefix, m.systemID, id),
		}
		if m.hwKnown {
			j.LinkConnected, j.LinkSpeed, j.InterfaceSpeed = *n.LinkConnected, n.LinkSpeed, n.InterfaceSpeed
			j.Vendor, j.Product = strPtr("Simulated"), strPtr("SIM NIC")
		}
		out = append(out, j)
	}
	return out
}

// errNodeNotFound is what MAAS's node handlers (nodes/{id}/…) answer for an unknown id.
var errNodeNotFound = textError(http.StatusNotFound, "No Node matches the given query.")

// nodeReads serves GET nodes/{id}/blockdevices/ and GET nodes/{id}/interfaces/.
func (s *Server) nodeReads(method, sub, op, systemID string, _ url.Values, u *userKey) (any, *apiError) {
	if method != http.MethodGet || op != "" {
		return nil, unrecognised(method, op)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[systemID]
	if !ok {
		return nil, errNodeNotFound
	}
	if !canView(m, u) {
		return nil, errForbidden
	}
	if sub == "blockdevices" {
		return s.blockDevices(m), nil
	}
	return s.interfaces(m), nil
}
