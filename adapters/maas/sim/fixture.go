package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"

	"github.com/apelora/fabric/domain/machines"
)

// Fixture is the simulator's starting state, read from JSON:
//
//	{
//	  "config":   {"enable_disk_erasing_on_release": false, "default_distro_series": "jammy"},
//	  "machines": [ {MachineSpec}, … ]
//	}
//
// A bare JSON array of machines is accepted too.
type Fixture struct {
	Config   map[string]any `json:"config,omitempty"`
	Machines []MachineSpec  `json:"machines"`
}

// MachineSpec describes one machine: what MAAS shows now, what its hardware
// really is (revealed by commissioning), and how scripted actions will end.
type MachineSpec struct {
	SystemID string `json:"system_id"`
	Hostname string `json:"hostname"`
	Domain   string `json:"domain,omitempty"` // default "maas"
	Status   int    `json:"status"`           // NODE_STATUS number, default 0 (New)
	Owner    string `json:"owner,omitempty"`

	// PowerType: "ipmi", "redfish", "virsh", "lxd" (controller-backed),
	// "manual", or "" (unset).
	PowerType       string            `json:"power_type"`
	PowerState      string            `json:"power_state,omitempty"` // default from status and type
	PowerParameters map[string]string `json:"power_parameters,omitempty"`

	// Hardware as commissioning finds it.
	HardwareUUID string            `json:"hardware_uuid,omitempty"`
	Architecture string            `json:"architecture,omitempty"` // default amd64/generic
	CPUCount     int               `json:"cpu_count,omitempty"`
	CPUSpeed     int               `json:"cpu_speed,omitempty"`
	Memory       int               `json:"memory,omitempty"`        // MiB
	StorageBytes int64             `json:"storage_bytes,omitempty"` // default: the disks' sizes added up
	HardwareInfo map[string]string `json:"hardware_info,omitempty"`
	// Disks are the physical disks commissioning finds; default one disk "sda" of
	// StorageBytes (none when StorageBytes is 0).
	Disks []DiskSpec `json:"disks,omitempty"`
	// Interfaces are the physical NICs; the first is the boot interface, which MAAS knows
	// from enlistment (its MAC), the rest only after commissioning. Default: one 1 Gbit/s
	// "eno1" with a MAC derived from the system id.
	Interfaces []InterfaceSpec `json:"interfaces,omitempty"`
	// Commissioned says a commissioning run has finished before, so MAAS
	// shows the hardware. Default: true unless Status is New or Commissioning.
	Commissioned *bool `json:"commissioned,omitempty"`

	OSystem      string   `json:"osystem,omitempty"`
	DistroSeries string   `json:"distro_series,omitempty"`
	Zone         string   `json:"zone,omitempty"` // default "default"
	Pool         string   `json:"pool,omitempty"` // default "default"
	Tags         []string `json:"tag_names,omitempty"`
	IPAddresses  []string `json:"ip_addresses,omitempty"`
	Locked       bool     `json:"locked,omitempty"`
	Description  string   `json:"description,omitempty"`

	// LastTests are the results of the last testing run (script name →
	// passed|failed|timedout|degraded|skipped); empty means never tested.
	LastTests map[string]string `json:"last_tests,omitempty"`
	// TestOutcomes say how future runs of a script end; unlisted scripts pass.
	TestOutcomes map[string]string `json:"test_outcomes,omitempty"`

	FailCommissioning bool `json:"fail_commissioning,omitempty"`
	FailDeployment    bool `json:"fail_deployment,omitempty"`
	FailRelease       bool `json:"fail_release,omitempty"`
	// PowerOffIneffective: MAAS accepts power_off, the machine stays on.
	PowerOffIneffective bool `json:"power_off_ineffective,omitempty"`
}

// DiskSpec is one physical disk of a machine.
type DiskSpec struct {
	Name      string `json:"name"` // "sda", "nvme0n1"
	SizeBytes int64  `json:"size_bytes"`
	Model     string `json:"model,omitempty"`
	Serial    string `json:"serial,omitempty"`
}

// InterfaceSpec is one physical network interface of a machine.
type InterfaceSpec struct {
	Name       string `json:"name"`                  // "eno1"
	MACAddress string `json:"mac_address,omitempty"` // default derived from the system id
	// LinkSpeed is the negotiated speed commissioning sees (Mbit/s; 0: no link or unknown);
	// InterfaceSpeed the most the interface can do (default LinkSpeed).
	LinkSpeed      int   `json:"link_speed,omitempty"`
	InterfaceSpeed int   `json:"interface_speed,omitempty"`
	LinkConnected  *bool `json:"link_connected,omitempty"` // default: LinkSpeed > 0
	// Fabric and VID are the VLAN a connected interface is on: default "fabric-0", 0
	// (untagged). A disconnected interface is on none (MAAS's vlan null).
	Fabric string `json:"fabric,omitempty"`
	VID    int    `json:"vid,omitempty"`
}

// LoadFixture reads a fixture file.
func LoadFixture(path string) (Fixture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Fixture{}, fmt.Errorf("read MAAS simulator fixture: %w", err)
	}
	return ParseFixture(b)
}

// ParseFixture parses fixture JSON; unknown fields are errors so typos in a
// fixture do not silently change a test.
func ParseFixture(b []byte) (Fixture, error) {
	var f Fixture
	trimmed := bytes.TrimSpace(b)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var err error
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = dec.Decode(&f.Machines)
	} else {
		err = dec.Decode(&f)
	}
	if err != nil {
		return Fixture{}, fmt.Errorf("parse MAAS simulator fixture: %w", err)
	}
	return f, nil
}

var deviceNameRE = regexp.MustCompile(`^[a-z][a-z0-9.-]{0,14}$`)

func (sp *MachineSpec) validate() error {
	if !machines.IsSystemID(sp.SystemID) {
		return fmt.Errorf("machine %q: system_id must be 4–16 lower-case letters and digits, as Apelora accepts it", sp.SystemID)
	}
	if sp.Hostname == "" {
		return fmt.Errorf("machine %s: hostname is required", sp.SystemID)
	}
	if sp.Status < 0 || sp.Status >= len(statusLabels) {
		return fmt.Errorf("machine %s: status %d is not a MAAS status (0–22)", sp.SystemID, sp.Status)
	}
	for _, m := range []map[string]string{sp.LastTests, sp.TestOutcomes} {
		for name, outcome := range m {
			if _, ok := scriptByName(name); !ok {
				return fmt.Errorf("machine %s: unknown test script %q", sp.SystemID, name)
			}
			if _, ok := outcomeNames[outcome]; !ok {
				return fmt.Errorf("machine %s: unknown outcome %q for %s (passed, failed, timedout, degraded, skipped)", sp.SystemID, outcome, name)
			}
		}
	}
	switch sp.PowerState {
	case "", "on", "off", "unknown", "error":
	default:
		return fmt.Errorf("machine %s: power_state %q (on, off, unknown, error)", sp.SystemID, sp.PowerState)
	}
	var total int64
	names := map[string]bool{}
	for _, d := range sp.Disks {
		if !deviceNameRE.MatchString(d.Name) || d.SizeBytes <= 0 || names[d.Name] {
			return fmt.Errorf("machine %s: disk %q: a unique name (sda, nvme0n1 …) and a size in bytes are required", sp.SystemID, d.Name)
		}
		names[d.Name] = true
		total += d.SizeBytes
	}
	if len(sp.Disks) > 0 && sp.StorageBytes != 0 && sp.StorageBytes != total {
		return fmt.Errorf("machine %s: storage_bytes %d is not the sum of its disks (%d): leave it out", sp.SystemID, sp.StorageBytes, total)
	}
	for _, n := range sp.Interfaces {
		if !deviceNameRE.MatchString(n.Name) || names[n.Name] || n.LinkSpeed < 0 || n.InterfaceSpeed < 0 {
			return fmt.Errorf("machine %s: interface %q: a unique name (eno1 …) and speeds of 0 or more are required", sp.SystemID, n.Name)
		}
		if n.MACAddress != "" && !macRE.MatchString(n.MACAddress) {
			return fmt.Errorf("machine %s: interface %s: mac_address %q is not a MAC address", sp.SystemID, n.Name, n.MACAddress)
		}
		names[n.Name] = true
	}
	return nil
}

// GenerateMachines returns n deterministic machines for benchmarks and load
// tests: mostly Ready and Deployed with IPMI, some manual, some still New.
func GenerateMachines(n int, seed uint64) []MachineSpec {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const idChars = "abcdefghjkmnpqrstwxy345678"
	out := make([]MachineSpec, 0, n)
	seen := map[string]bool{}
	statuses := []int{StatusReady, StatusReady, StatusReady, StatusDeployed, StatusDeployed, StatusAllocated, StatusNew, StatusBroken, StatusFailedTesting}
	for i := 0; len(out) < n; i++ {
		id := make([]byte, 6)
		for j := range id {
			id[j] = idChars[r.IntN(len(idChars))]
		}
		if seen[string(id)] {
			continue
		}
		seen[string(id)] = true
		st := statuses[r.IntN(len(statuses))]
		sp := MachineSpec{
			SystemID:     string(id),
			Hostname:     fmt.Sprintf("rack%d-node%02d", i/40+1, i%40+1),
			Domain:       "lab",
			Status:       st,
			PowerType:    "ipmi",
			HardwareUUID: fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Uint64()&(1<<48-1)),
			CPUCount:     []int{8, 16, 32, 64}[r.IntN(4)],
			CPUSpeed:     2400,
			Memory:       []int{32768, 65536, 131072}[r.IntN(3)],
			StorageBytes: 960197124096,
			Zone:         []string{"default", "az1", "az2"}[r.IntN(3)],
			Pool:         "default",
			Tags:         []string{"compute"},
			IPAddresses:  []string{fmt.Sprintf("10.20.%d.%d", i/250, i%250+2)},
			HardwareInfo: map[string]string{
				"system_vendor": "Simulated", "system_product": "SIM-1U",
				"system_serial": fmt.Sprintf("SN%06d", i), "cpu_model": "Simulated CPU @ 2.40GHz",
			},
			LastTests: map[string]string{"smartctl-validate": "passed"},
		}
		if i%10 == 9 {
			sp.PowerType = "manual"
		}
		switch st {
		case StatusDeployed:
			sp.Owner, sp.OSystem, sp.DistroSeries = "apelora", "ubuntu", "noble"
		case StatusAllocated:
			sp.Owner = "apelora"
		case StatusNew:
			sp.LastTests = nil
		case StatusFailedTesting:
			sp.LastTests = map[string]string{"smartctl-validate": "failed"}
		}
		out = append(out, sp)
	}
	return out
}
