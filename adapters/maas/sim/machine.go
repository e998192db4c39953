package sim

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"slices"
	"strings"
	"time"
)

type machine struct {
	internalID int
	systemID   string
	hostname   string
	domain     string
	status     int
	// prevStatus is where test and abort return to.
	prevStatus    int
	statusMessage string
	owner         string
	agentName     string
	description   string

	powerType           string
	powerState          string
	powerParameters     map[string]string
	powerOffIneffective bool
	powerOffRequests    int
	pendingOff          int // on→off transitions whose hook has not run yet
	pendingOn           int // off→on transitions whose hook has not run yet

	// Hardware as it really is; shown only once hwKnown.
	hwKnown      bool
	hardwareUUID string
	architecture string
	cpuCount     int
	cpuSpeed     int
	memory       int
	storageBytes int64
	hardwareInfo map[string]string
	disks        []DiskSpec
	nics         []InterfaceSpec // nics[0] is the boot interface, known before commissioning

	osystem, distroSeries string
	zone, pool            string
	tags, ipAddresses     []string
	locked                bool
	userData              []byte
	annotations           map[string]string

	commissioning []scriptResult
	testing       []scriptResult
	testOutcomes  map[string]int

	failCommissioning, failDeployment, failRelease bool

	lastRelease ReleaseRecord
	enableSSH   bool // for the running commissioning or test
	// pendingBoot: deployed, and the first boot (which runs the user data) not yet handed
	// to the deploy hook.
	pendingBoot bool
	timer       Timer
	gen         int // bumped on every transition; stale timers check it
}

func newMachine(sp MachineSpec, internalID int) *machine {
	m := &machine{
		internalID: internalID, systemID: sp.SystemID, hostname: sp.Hostname, domain: sp.Domain,
		status: sp.Status, prevStatus: sp.Status, owner: sp.Owner, description: sp.Description,
		powerType: sp.PowerType, powerState: sp.PowerState, powerParameters: sp.PowerParameters,
		powerOffIneffective: sp.PowerOffIneffective,
		hardwareUUID:        sp.HardwareUUID, architecture: sp.Architecture, cpuCount: sp.CPUCount,
		cpuSpeed: sp.CPUSpeed, memory: sp.Memory, storageBytes: sp.StorageBytes,
		hardwareInfo: sp.HardwareInfo, osystem: sp.OSystem, distroSeries: sp.DistroSeries,
		zone: sp.Zone, pool: sp.Pool, tags: append([]string{}, sp.Tags...),
		ipAddresses: append([]string{}, sp.IPAddresses...), locked: sp.Locked,
		annotations:       map[string]string{},
		testOutcomes:      map[string]int{},
		failCommissioning: sp.FailCommissioning, failDeployment: sp.FailDeployment, failRelease: sp.FailRelease,
	}
	// MAAS remembers where an operation started; for fixtures that begin
	// mid-operation, assume the usual origin.
	switch m.status {
	case StatusCommissioning:
		m.prevStatus = StatusNew
	case StatusTesting:
		m.prevStatus = StatusReady
	}
	if m.domain == "" {
		m.domain = "maas"
	}
	if m.zone == "" {
		m.zone = "default"
	}
	if m.pool == "" {
		m.pool = "default"
	}
	if m.architecture == "" {
		m.architecture = "amd64/generic"
	}
	m.disks = append([]DiskSpec(nil), sp.Disks...)
	if len(m.disks) == 0 && m.storageBytes > 0 {
		m.disks = []DiskSpec{{Name: "sda", SizeBytes: m.storageBytes}}
	}
	m.storageBytes = 0
	for i := range m.disks {
		d := &m.disks[i]
		m.storageBytes += d.SizeBytes
		if d.Model == "" {
			d.Model = "SIM SSD"
		}
		if d.Serial == "" {
			d.Serial = fmt.Sprintf("SIM%s%02d", strings.ToUpper(m.systemID), i)
		}
	}
	m.nics = append([]InterfaceSpec(nil), sp.Interfaces...)
	if len(m.nics) == 0 {
		m.nics = []InterfaceSpec{{Name: "eno1", LinkSpeed: 1000}}
	}
	for i := range m.nics {
		n := &m.nics[i]
		if n.MACAddress == "" {
			n.MACAddress = derivedMAC(m.systemID, i)
		}
		if n.InterfaceSpeed == 0 {
			n.InterfaceSpeed = n.LinkSpeed
		}
		if n.LinkConnected == nil {
			connected := n.LinkSpeed > 0
			n.LinkConnected = &connected
		}
	}
	if sp.Commissioned != nil {
		m.hwKnown = *sp.Commissioned
	} else {
		m.hwKnown = sp.Status != StatusNew && sp.Status != StatusCommissioning
	}
	if m.hwKnown {
		m.commissioning = []scriptResult{{name: "00-maas-01-commissioning", hwType: hwNode, status: ScriptPassed}}
	}
	if m.powerState == "" {
		switch {
		case !m.hasController():
			m.powerState = "unknown"
		case m.status == StatusDeployed || m.status == StatusDeploying || m.status == StatusCommissioning || m.status == StatusTesting:
			m.powerState = "on"
		default:
			m.powerState = "off"
		}
	}
	for _, name := range sortedKeys(sp.LastTests) {
		sc, _ := scriptByName(name)
		m.testing = append(m.testing, scriptResult{name: name, hwType: sc.hwType, status: outcomeNames[sp.LastTests[name]]})
	}
	for name, outcome := range sp.TestOutcomes {
		m.testOutcomes[name] = outcomeNames[outcome]
	}
	return m
}

// hasController: power types MAAS can drive and query. "manual" and unset
// ("") have no controller.
func (m *machine) hasController() bool {
	return m.powerType != "" && m.powerType != "manual"
}

// setPower records a power state; an on→off change on a controller-backed
// machine queues the power-off hook.
func (m *machine) setPower(state string) {
	if m.hasController() && m.powerState == "on" && state == "off" {
		m.pendingOff++
	}
	if m.hasController() && m.powerState == "off" && state == "on" {
		m.pendingOn++
	}
	m.powerState = state
}

func (m *machine) cancelTimer() {
	m.gen++
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

func (s *Server) takeHooks(ms ...*machine) []func() {
	var out []func()
	for _, m := range ms {
		for ; m.pendingOff > 0; m.pendingOff-- {
			if f, id := s.onPowerOff, m.systemID; f != nil {
				out = append(out, func() { f(id) })
			}
		}
		for ; m.pendingOn > 0; m.pendingOn-- {
			if f, id := s.onPowerOn, m.systemID; f != nil {
				out = append(out, func() { go f(id) })
			}
		}
		if m.pendingBoot {
			m.pendingBoot = false
			if f, id, ud := s.onDeploy, m.systemID, bytes.Clone(m.userData); f != nil {
				out = append(out, func() { go f(id, ud) })
			}
		}
	}
	return out
}

func (s *Server) runHooks(hooks []func()) {
	for _, h := range hooks {
		h()
	}
}

// schedule runs f under the lock after d, unless the machine moved on.
func (s *Server) schedule(m *machine, d time.Duration, f func()) {
	m.cancelTimer()
	gen := m.gen
	m.timer = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		if m.gen != gen {
			s.mu.Unlock()
			return
		}
		m.timer = nil
		f()
		hooks := s.takeHooks(m)
		s.mu.Unlock()
		s.runHooks(hooks)
	})
}

// powerOffLater models the controller: off after the configured delay,
// unless the machine ignores power-off.
func (s *Server) powerOffLater(m *machine) {
	if !m.hasController() || m.powerOffIneffective {
		return
	}
	id := m.systemID
	s.clock.AfterFunc(s.durations.PowerOff, func() {
		s.mu.Lock()
		mm, ok := s.byID[id]
		if ok && !mm.powerOffIneffective {
			mm.setPower("off")
		}
		var hooks []func()
		if ok {
			hooks = s.takeHooks(mm)
		}
		s.mu.Unlock()
		s.runHooks(hooks)
	})
}

func (m *machine) powerOnNow() {
	if m.hasController() {
		m.setPower("on")
	}
}

// derivedMAC is a stable, locally administered MAC for interface i of a machine.
func derivedMAC(systemID string, i int) string {
	h := sha1.Sum([]byte(systemID))
	return fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", h[0], h[1], h[2], byte(i))
}

func randString(n int) string {
	const chars = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// ---- JSON shape (DISPLAYED_MACHINE_FIELDS + resource_uri) ----

type domainJSON struct {
	ID                  int    `json:"id"`
	Name                string `json:"name"`
	TTL                 *int   `json:"ttl"`
	Authoritative       bool   `json:"authoritative"`
	IsDefault           bool   `json:"is_default"`
	ResourceRecordCount int    `json:"resource_record_count"`
	ResourceURI         string `json:"resource_uri"`
}

type zoneJSON struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	ResourceURI string `json:"resource_uri"`
}

type gatewayJSON struct {
	GatewayIP *string `json:"gateway_ip"`
	LinkID    *int    `json:"link_id"`
}

type empty struct{}

var emptyList = []empty{}

type machineJSON struct {
	SystemID                    string            `json:"system_id"`
	Hostname                    string            `json:"hostname"`
	FQDN                        string            `json:"fqdn"`
	Domain                      domainJSON        `json:"domain"`
	Description                 string            `json:"description"`
	ErrorDescription            string            `json:"error_description"`
	Status                      int               `json:"status"`
	StatusName                  string            `json:"status_name"`
	StatusMessage               *string           `json:"status_message"`
	StatusAction                *string           `json:"status_action"`
	PowerState                  string            `json:"power_state"`
	PowerType                   string            `json:"power_type"`
	HardwareUUID                *string           `json:"hardware_uuid"`
	Architecture                *string           `json:"architecture"`
	MinHWEKernel                *string           `json:"min_hwe_kernel"`
	HWEKernel                   *string           `json:"hwe_kernel"`
	CPUCount                    int               `json:"cpu_count"`
	CPUSpeed                    int               `json:"cpu_speed"`
	Memory                      int               `json:"memory"`
	Storage                     float64           `json:"storage"`
	SwapSize                    *int              `json:"swap_size"`
	AddressTTL                  *int              `json:"address_ttl"`
	OSystem                     string            `json:"osystem"`
	DistroSeries                string            `json:"distro_series"`
	Netboot                     bool              `json:"netboot"`
	DisableIPv4                 bool              `json:"disable_ipv4"`
	EphemeralDeploy             bool              `json:"ephemeral_deploy"`
	EnableHWSync                bool              `json:"enable_hw_sync"`
	EnableKernelCrashDump       bool              `json:"enable_kernel_crash_dump"`
	Locked                      bool              `json:"locked"`
	Zone                        zoneJSON          `json:"zone"`
	Pool                        zoneJSON          `json:"pool"`
	TagNames                    []string          `json:"tag_names"`
	Owner                       *string           `json:"owner"`
	OwnerData                   map[string]string `json:"owner_data"`
	WorkloadAnnotations         map[string]string `json:"workload_annotations"`
	IPAddresses                 []string          `json:"ip_addresses"`
	BootInterface               *interfaceJSON    `json:"boot_interface"`
	InterfaceSet                []interfaceJSON   `json:"interface_set"`
	BootDisk                    *blockDeviceJSON  `json:"boot_disk"`
	BlockdeviceSet              []blockDeviceJSON `json:"blockdevice_set"`
	PhysicalblockdeviceSet      []blockDeviceJSON `json:"physicalblockdevice_set"`
	VirtualblockdeviceSet       []empty           `json:"virtualblockdevice_set"`
	VolumeGroups                []empty           `json:"volume_groups"`
	Raids                       []empty           `json:"raids"`
	Bcaches                     []empty           `json:"bcaches"`
	CacheSets                   []empty           `json:"cache_sets"`
	SpecialFilesystems          []empty           `json:"special_filesystems"`
	NumanodeSet                 []empty           `json:"numanode_set"`
	CommissioningStatus         int               `json:"commissioning_status"`
	CommissioningStatusName     string            `json:"commissioning_status_name"`
	TestingStatus               int               `json:"testing_status"`
	TestingStatusName           string            `json:"testing_status_name"`
	CPUTestStatus               int               `json:"cpu_test_status"`
	CPUTestStatusName           string            `json:"cpu_test_status_name"`
	MemoryTestStatus            int               `json:"memory_test_status"`
	MemoryTestStatusName        string            `json:"memory_test_status_name"`
	StorageTestStatus           int               `json:"storage_test_status"`
	StorageTestStatusName       string            `json:"storage_test_status_name"`
	NetworkTestStatus           int               `json:"network_test_status"`
	NetworkTestStatusName       string            `json:"network_test_status_name"`
	InterfaceTestStatus         int               `json:"interface_test_status"`
	InterfaceTestStatusName     string            `json:"interface_test_status_name"`
	OtherTestStatus             int               `json:"other_test_status"`
	OtherTestStatusName         string            `json:"other_test_status_name"`
	CurrentCommissioningResult  *int              `json:"current_commissioning_result_id"`
	CurrentTestingResultID      *int              `json:"current_testing_result_id"`
	CurrentInstallationResultID *int              `json:"current_installation_result_id"`
	HardwareInfo                map[string]string `json:"hardware_info"`
	NodeType                    int               `json:"node_type"`
	NodeTypeName                string            `json:"node_type_name"`
	BiosBootMethod              string            `json:"bios_boot_method"`
	DefaultGateways             struct {
		IPv4 gatewayJSON `json:"ipv4"`
		IPv6 gatewayJSON `json:"ipv6"`
	} `json:"default_gateways"`
	LastSync          *string         `json:"last_sync"`
	NextSync          *string         `json:"next_sync"`
	SyncInterval      *int            `json:"sync_interval"`
	Parent            *empty          `json:"parent"`
	Pod               *empty          `json:"pod"`
	VirtualmachineID  *int            `json:"virtualmachine_id"`
	ResourceURI       string          `json:"resource_uri"`
	ConstraintsByType *map[string]any `json:"constraints_by_type,omitempty"`
}

var hardwareInfoKeys = []string{
	"system_vendor", "system_product", "system_family", "system_version", "system_sku", "system_serial",
	"cpu_model", "mainboard_vendor", "mainboard_product", "mainboard_serial", "mainboard_version",
	"mainboard_firmware_vendor", "mainboard_firmware_date", "mainboard_firmware_version",
	"chassis_vendor", "chassis_type", "chassis_serial", "chassis_version",
}

const apiPrefix = "/MAAS/api/2.0/"

func strPtr(s string) *string { return &s }

func (s *Server) render(m *machine) machineJSON {
	j := machineJSON{
		SystemID:     m.systemID,
		Hostname:     m.hostname,
		FQDN:         m.hostname + "." + m.domain,
		Domain:       domainJSON{ID: 0, Name: m.domain, Authoritative: true, IsDefault: true, ResourceURI: apiPrefix + "domains/0/"},
		Description:  m.description,
		Status:       m.status,
		StatusName:   StatusLabel(m.status),
		PowerState:   m.powerState,
		PowerType:    m.powerType,
		Architecture: strPtr(m.architecture),
		OSystem:      m.osystem,
		DistroSeries: m.distroSeries,
		Locked:       m.locked,
		Zone: zoneJSON{ID: s.zones[m.zone], Name: m.zone, Description: "",
			ResourceURI: apiPrefix + "zones/" + m.zone + "/"},
		Pool:                  zoneJSON{ID: 0, Name: m.pool, Description: "Default pool", ResourceURI: apiPrefix + "resourcepool/0/"},
		TagNames:              nonNil(m.tags),
		OwnerData:             copyMap(m.annotations),
		WorkloadAnnotations:   copyMap(m.annotations),
		IPAddresses:           nonNil(m.ipAddresses),
		InterfaceSet:          s.interfaces(m),
		BlockdeviceSet:        s.blockDevices(m),
		VirtualblockdeviceSet: emptyList,
		VolumeGroups:          emptyList,
		Raids:                 emptyList,
		Bcaches:               emptyList,
		CacheSets:             emptyList,
		SpecialFilesystems:    emptyList,
		NumanodeSet:           emptyList,
		NodeType:              0,
		NodeTypeName:          "Machine",
		BiosBootMethod:        "uefi",
		ResourceURI:           apiPrefix + "machines/" + m.systemID + "/",
		HardwareInfo:          map[string]string{},
	}
	j.PhysicalblockdeviceSet = j.BlockdeviceSet
	if len(j.InterfaceSet) > 0 {
		j.BootInterface = &j.InterfaceSet[0]
	}
	if len(j.BlockdeviceSet) > 0 {
		j.BootDisk = &j.BlockdeviceSet[0]
	}
	if m.statusMessage != "" {
		j.StatusMessage = strPtr(m.statusMessage)
	}
	if m.owner != "" {
		j.Owner = strPtr(m.owner)
	}
	if m.hwKnown {
		if m.hardwareUUID != "" {
			j.HardwareUUID = strPtr(m.hardwareUUID)
		}
		j.CPUCount, j.CPUSpeed, j.Memory = m.cpuCount, m.cpuSpeed, m.memory
		j.Storage = float64(m.storageBytes) / 1e6
	}
	for _, k := range hardwareInfoKeys {
		v := "Unknown"
		if m.hwKnown && m.hardwareInfo[k] != "" {
			v = m.hardwareInfo[k]
		}
		j.HardwareInfo[k] = v
	}
	j.CommissioningStatus = aggregate(m.commissioning, nil)
	j.CommissioningStatusName = aggregateLabel(j.CommissioningStatus)
	j.TestingStatus = aggregate(m.testing, nil)
	j.TestingStatusName = aggregateLabel(j.TestingStatus)
	hw := func(types ...int) func(int) bool {
		return func(t int) bool { return slices.Contains(types, t) }
	}
	j.CPUTestStatus = aggregate(m.testing, hw(hwCPU))
	j.MemoryTestStatus = aggregate(m.testing, hw(hwMemory))
	j.StorageTestStatus = aggregate(m.testing, hw(hwStorage))
	j.NetworkTestStatus = aggregate(m.testing, hw(hwNetwork))
	j.InterfaceTestStatus = j.NetworkTestStatus
	j.OtherTestStatus = aggregate(m.testing, hw(hwNode, hwGPU))
	j.CPUTestStatusName = aggregateLabel(j.CPUTestStatus)
	j.MemoryTestStatusName = aggregateLabel(j.MemoryTestStatus)
	j.StorageTestStatusName = aggregateLabel(j.StorageTestStatus)
	j.NetworkTestStatusName = aggregateLabel(j.NetworkTestStatus)
	j.InterfaceTestStatusName = aggregateLabel(j.InterfaceTestStatus)
	j.OtherTestStatusName = aggregateLabel(j.OtherTestStatus)
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string{}, s...)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
