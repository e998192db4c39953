package sim

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
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
	SystemID        string    `json:"system_id"`
	ID              int       `json:"id"`
	Name            string    `json:"name"`
	Type            string    `json:"type"`
	VLAN            *vlanJSON `json:"vlan"`
	MACAddress      string    `json:"mac_address"`
	Parents         []string  `json:"parents"`
	Children        []string  `json:"children"`
	Tags            []string  `json:"tags"`
	Enabled         bool      `json:"enabled"`
	Links           []empty   `json:"links"`
	Params          string    `json:"params"`
	Discovered      *empty    `json:"discovered"`
	EffectiveMTU    int       `json:"effective_mtu"`
	Vendor          *string   `json:"vendor"`
	Product         *string   `json:"product"`
	FirmwareVersion *string   `json:"firmware_version"`
	LinkConnected   bool      `json:"link_connected"`
	InterfaceSpeed  int       `json:"interface_speed"`
	LinkSpeed       int       `json:"link_speed"`
	NUMANode        int       `json:"numa_node"`
	ResourceURI     string    `json:"resource_uri"`
}

// vlanJSON is MAAS's VLAN object as an interface embeds it: every field gomaasapi's vlan
// parser requires.
type vlanJSON struct {
	ID            int     `json:"id"`
	Name          string  `json:"name"`
	VID           int     `json:"vid"`
	Fabric        string  `json:"fabric"`
	FabricID      int     `json:"fabric_id"`
	MTU           int     `json:"mtu"`
	DHCPOn        bool    `json:"dhcp_on"`
	PrimaryRack   *string `json:"primary_rack"`
	SecondaryRack *string `json:"secondary_rack"`
	ResourceURI   string  `json:"resource_uri"`
}

// vlanOf is the VLAN an interface is on: the fabric's untagged VLAN unless the fixture
// says otherwise. Fabric ids follow the number in "fabric-N" (0 otherwise).
func vlanOf(n InterfaceSpec) *vlanJSON {
	fabric := n.Fabric
	if fabric == "" {
		fabric = "fabric-0"
	}
	var fabricID int
	fmt.Sscanf(fabric, "fabric-%d", &fabricID)
	id := 5001 + fabricID*4096 + n.VID
	name := "untagged"
	if n.VID != 0 {
		name = fmt.Sprint(n.VID)
	}
	return &vlanJSON{ID: id, Name: name, VID: n.VID, Fabric: fabric, FabricID: fabricID, MTU: 1500, DHCPOn: n.VID == 0,
		ResourceURI: fmt.Sprintf("%sfabrics/%d/vlans/%d/", apiPrefix, fabricID, n.VID)}
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
		if j.LinkConnected {
			j.VLAN = vlanOf(n)
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

// scriptSetJSON is one script set as GET nodes/{id}/results/ shows it (MAAS's
// NodeScriptResultHandler: its fields plus results, without output).
type scriptSetJSON struct {
	ID          int                `json:"id"`
	SystemID    string             `json:"system_id"`
	Type        int                `json:"type"`
	TypeName    string             `json:"type_name"`
	LastPing    *string            `json:"last_ping"`
	Status      int                `json:"status"`
	StatusName  string             `json:"status_name"`
	Started     *string            `json:"started"`
	Ended       *string            `json:"ended"`
	Runtime     string             `json:"runtime"`
	Results     []scriptResultJSON `json:"results"`
	ResourceURI string             `json:"resource_uri"`
}

// scriptResultJSON is one script's result in a set: started/ended in MAAS's display format,
// starttime/endtime as Unix seconds ("" when not started or ended), runtime as
// Python prints a timedelta ("0:05:00"), "" until it ended.
type scriptResultJSON struct {
	ID               int            `json:"id"`
	Name             string         `json:"name"`
	Status           int            `json:"status"`
	StatusName       string         `json:"status_name"`
	ExitStatus       *int           `json:"exit_status"`
	Started          *string        `json:"started"`
	Ended            *string        `json:"ended"`
	Runtime          string         `json:"runtime"`
	StartTime        any            `json:"starttime"`
	EndTime          any            `json:"endtime"`
	EstimatedRuntime string         `json:"estimated_runtime"`
	Parameters       map[string]any `json:"parameters"`
	ScriptID         int            `json:"script_id"`
	Suppressed       bool           `json:"suppressed"`
	HardwareType     int            `json:"hardware_type"`
	HardwareTypeName string         `json:"hardware_type_name"`
	Tags             string         `json:"tags"`
}

// MAAS's result types (RESULT_TYPE) that the simulator keeps.
const (
	resultCommissioning = 0
	resultTesting       = 2
)

// maasTime is MAAS's fmt_time: "Thu, 03 Dec. 2026 23:10:29" (UTC), or null.
func maasTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return strPtr(t.UTC().Format("Mon, 02 Jan. 2006 15:04:05"))
}

func unixOrEmpty(t time.Time) any {
	if t.IsZero() {
		return ""
	}
	return float64(t.UnixNano()) / 1e9
}

// pyDuration prints d as Python's str(timedelta) without microseconds: "0:05:00".
func pyDuration(d time.Duration) string {
	s := int(d / time.Second)
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}

func (s *Server) scriptSet(m *machine, kind int, rs []scriptResult) scriptSetJSON {
	id := m.internalID*4 + kind + 1
	set := scriptSetJSON{
		ID: id, SystemID: m.systemID, Type: kind, TypeName: map[int]string{resultCommissioning: "Commissioning", resultTesting: "Testing"}[kind],
		Status: aggregate(rs, nil), Results: []scriptResultJSON{},
		ResourceURI: fmt.Sprintf("%snodes/%s/results/%d/", apiPrefix, m.systemID, id),
	}
	set.StatusName = aggregateLabel(set.Status)
	var first, last time.Time
	for i, r := range rs {
		j := scriptResultJSON{
			ID: id*64 + i, Name: r.name, Status: r.status, StatusName: scriptLabel(r.status),
			Started: maasTime(r.started), Ended: maasTime(r.ended), StartTime: unixOrEmpty(r.started), EndTime: unixOrEmpty(r.ended),
			EstimatedRuntime: "0:05:00", Parameters: map[string]any{}, HardwareType: r.hwType,
			HardwareTypeName: hwTypeNames[r.hwType], Tags: hwTypeTags[r.hwType],
		}
		if sc, ok := scriptByName(r.name); ok {
			j.Tags = strings.Join(sc.tags, ",")
		}
		if !r.started.IsZero() && !r.ended.IsZero() {
			j.Runtime = pyDuration(r.ended.Sub(r.started))
		}
		switch r.status {
		case ScriptPassed:
			j.ExitStatus = new(int)
		case ScriptFailed:
			one := 1
			j.ExitStatus = &one
		}
		if !r.started.IsZero() && (first.IsZero() || r.started.Before(first)) {
			first = r.started
		}
		if r.ended.After(last) {
			last = r.ended
		}
		set.Results = append(set.Results, j)
	}
	set.Started = maasTime(first)
	if set.Status != ScriptRunning && set.Status != ScriptPending {
		set.Ended = maasTime(last)
		if !first.IsZero() && !last.IsZero() {
			set.Runtime = pyDuration(last.Sub(first))
		}
	}
	return set
}

// nodeResults serves GET nodes/{id}/results/: the machine's current commissioning and
// testing script sets, narrowed by type= (a name or RESULT_TYPE number), as MAAS lists them.
func (s *Server) nodeResults(method, op, systemID string, p url.Values, u *userKey) (any, *apiError) {
	if method != http.MethodGet || op != "" {
		return nil, unrecognised(method, op)
	}
	want := -1
	if v, ok := last(p, "type"); ok && v != "" {
		switch v {
		case "commissioning", "0":
			want = resultCommissioning
		case "testing", "2":
			want = resultTesting
		case "installation", "1", "release", "3":
			want = 1 // kept by no simulated machine: an empty list
		default:
			return nil, formError("type", fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", v))
		}
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
	out := []scriptSetJSON{}
	for _, k := range []int{resultCommissioning, resultTesting} {
		rs := m.commissioning
		if k == resultTesting {
			rs = m.testing
		}
		if len(rs) > 0 && (want == -1 || want == k) {
			out = append(out, s.scriptSet(m, k, rs))
		}
	}
	return out, nil
}

// hwTypeNames are MAAS's HARDWARE_TYPE labels.
var hwTypeNames = map[int]string{hwNode: "Node", hwCPU: "CPU", hwMemory: "Memory", hwStorage: "Storage", hwNetwork: "Network", hwGPU: "GPU"}
