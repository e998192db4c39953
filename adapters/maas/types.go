package maas

import "strconv"

// Status is MAAS's NODE_STATUS. The numbers and labels are identical in
// MAAS 3.4–3.7 (see /work/shared/reference/maas-api.md §5).
type Status int

const (
	StatusNew                      Status = 0
	StatusCommissioning            Status = 1
	StatusFailedCommissioning      Status = 2
	StatusMissing                  Status = 3
	StatusReady                    Status = 4
	StatusReserved                 Status = 5
	StatusDeployed                 Status = 6
	StatusRetired                  Status = 7
	StatusBroken                   Status = 8
	StatusDeploying                Status = 9
	StatusAllocated                Status = 10
	StatusFailedDeployment         Status = 11
	StatusReleasing                Status = 12
	StatusFailedReleasing          Status = 13
	StatusDiskErasing              Status = 14
	StatusFailedDiskErasing        Status = 15
	StatusRescueMode               Status = 16
	StatusEnteringRescueMode       Status = 17
	StatusFailedEnteringRescueMode Status = 18
	StatusExitingRescueMode        Status = 19
	StatusFailedExitingRescueMode  Status = 20
	StatusTesting                  Status = 21
	StatusFailedTesting            Status = 22
)

var statusLabels = [...]string{
	"New", "Commissioning", "Failed commissioning", "Missing", "Ready",
	"Reserved", "Deployed", "Retired", "Broken", "Deploying", "Allocated",
	"Failed deployment", "Releasing", "Releasing failed", "Disk erasing",
	"Failed disk erasing", "Rescue mode", "Entering rescue mode",
	"Failed to enter rescue mode", "Exiting rescue mode",
	"Failed to exit rescue mode", "Testing", "Failed testing",
}

// filter names differ from labels in places (13 is "failed_releasing").
var statusFilterNames = [...]string{
	"new", "commissioning", "failed_commissioning", "missing", "ready",
	"reserved", "deployed", "retired", "broken", "deploying", "allocated",
	"failed_deployment", "releasing", "failed_releasing", "disk_erasing",
	"failed_disk_erasing", "rescue_mode", "entering_rescue_mode",
	"failed_entering_rescue_mode", "exiting_rescue_mode",
	"failed_exiting_rescue_mode", "testing", "failed_testing",
}

// String returns MAAS's status_name label.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusLabels) {
		return statusLabels[s]
	}
	return "Unknown status " + strconv.Itoa(int(s))
}

// FilterName is the value MAAS's list filter `status=` expects.
func (s Status) FilterName() string {
	if s >= 0 && int(s) < len(statusFilterNames) {
		return statusFilterNames[s]
	}
	return ""
}

// Valid reports whether s is one of MAAS's 23 statuses.
func (s Status) Valid() bool { return s >= 0 && int(s) < len(statusLabels) }

// ScriptStatus is MAAS's SCRIPT_STATUS, plus the -1 "Unknown" that the
// machine-level aggregates use when nothing has run.
type ScriptStatus int

const (
	ScriptStatusUnknown               ScriptStatus = -1
	ScriptStatusPending               ScriptStatus = 0
	ScriptStatusRunning               ScriptStatus = 1
	ScriptStatusPassed                ScriptStatus = 2
	ScriptStatusFailed                ScriptStatus = 3
	ScriptStatusTimedOut              ScriptStatus = 4
	ScriptStatusAborted               ScriptStatus = 5
	ScriptStatusDegraded              ScriptStatus = 6
	ScriptStatusInstalling            ScriptStatus = 7
	ScriptStatusFailedInstalling      ScriptStatus = 8
	ScriptStatusSkipped               ScriptStatus = 9
	ScriptStatusApplyingNetconf       ScriptStatus = 10
	ScriptStatusFailedApplyingNetconf ScriptStatus = 11
)

// scriptStatusLabels[0] is the label of -1.
var scriptStatusLabels = [...]string{
	"Unknown", "Pending", "Running", "Passed", "Failed",
	"Timed out", "Aborted", "Degraded", "Installing dependencies",
	"Failed installing dependencies", "Skipped",
	"Applying custom network configuration",
	"Failed to apply custom network configuration",
}

// String returns MAAS's label for the script status.
func (s ScriptStatus) String() string {
	if s >= ScriptStatusUnknown && s <= ScriptStatusFailedApplyingNetconf {
		return scriptStatusLabels[int(s)+1]
	}
	return "Unknown script status " + strconv.Itoa(int(s))
}

// PowerState is what MAAS last learnt from the power controller.
type PowerState string

const (
	PowerOn      PowerState = "on"
	PowerOff     PowerState = "off"
	PowerUnknown PowerState = "unknown"
	PowerError   PowerState = "error"
)

// StopMode selects how power_off stops a machine.
type StopMode string

const (
	// StopHard cuts power at once; MAAS's default.
	StopHard StopMode = "hard"
	// StopSoft asks the OS to shut down first where the driver supports it.
	StopSoft StopMode = "soft"
)

// Machine is our view of a MAAS machine: the fields the domain uses, in our
// own types. It deliberately has no field for power parameters, tokens or any
// other credential.
type Machine struct {
	SystemID      string
	Hostname      string
	FQDN          string
	Domain        string
	Status        Status
	StatusName    string // MAAS's own label, kept to show what MAAS said
	StatusMessage string // "" when MAAS reports null
	Description   string

	PowerState PowerState
	PowerType  string // "ipmi", "redfish", "manual", "" when unset …

	// HardwareUUID is "" while MAAS reports null, for example before the
	// first commissioning has finished.
	HardwareUUID string
	Architecture string // "amd64/generic"; "" when null
	CPUCount     int
	CPUSpeedMHz  int
	MemoryMiB    int
	StorageMB    float64 // decimal MB, as MAAS reports it

	OSystem      string
	DistroSeries string
	Owner        string // "" when unowned
	Zone         string
	Pool         string
	Tags         []string
	IPAddresses  []string
	Locked       bool

	CommissioningStatus ScriptStatus
	TestingStatus       ScriptStatus
	// Labels as MAAS sent them ("Unknown" for -1).
	CommissioningStatusName string
	TestingStatusName       string

	HardwareInfo HardwareInfo
}

// HardwareInfo is the identifying subset of MAAS's hardware_info. MAAS
// reports "Unknown" until commissioning has learnt a value.
type HardwareInfo struct {
	SystemVendor     string
	SystemProduct    string
	SystemSerial     string
	CPUModel         string
	MainboardVendor  string
	MainboardProduct string
}

// VersionInfo is GET version/.
type VersionInfo struct {
	Version      string
	Subversion   string
	Capabilities []string
}

// User is GET users/?op=whoami.
type User struct {
	Username    string
	Email       string
	IsSuperuser bool
	IsLocal     bool
}

// wire types mirror MAAS's JSON; only the fields we read.

// wireHardwareInfo is a struct, not a map: the decoder skips the keys we do
// not use instead of allocating them (see BenchmarkMachines300ClientOnly).
type wireHardwareInfo struct {
	SystemVendor     string `json:"system_vendor"`
	SystemProduct    string `json:"system_product"`
	SystemSerial     string `json:"system_serial"`
	CPUModel         string `json:"cpu_model"`
	MainboardVendor  string `json:"mainboard_vendor"`
	MainboardProduct string `json:"mainboard_product"`
}
type wireNamed struct {
	Name string `json:"name"`
}

type wireMachine struct {
	SystemID                string            `json:"system_id"`
	Hostname                string            `json:"hostname"`
	FQDN                    string            `json:"fqdn"`
	Domain                  wireNamed         `json:"domain"`
	Status                  int               `json:"status"`
	StatusName              string            `json:"status_name"`
	StatusMessage           *string           `json:"status_message"`
	Description             string            `json:"description"`
	PowerState              string            `json:"power_state"`
	PowerType               string            `json:"power_type"`
	HardwareUUID            *string           `json:"hardware_uuid"`
	Architecture            *string           `json:"architecture"`
	CPUCount                int               `json:"cpu_count"`
	CPUSpeed                int               `json:"cpu_speed"`
	Memory                  int               `json:"memory"`
	Storage                 float64           `json:"storage"`
	OSystem                 string            `json:"osystem"`
	DistroSeries            string            `json:"distro_series"`
	Owner                   *string           `json:"owner"`
	Zone                    wireNamed         `json:"zone"`
	Pool                    wireNamed         `json:"pool"`
	TagNames                []string          `json:"tag_names"`
	IPAddresses             []string          `json:"ip_addresses"`
	Locked                  bool              `json:"locked"`
	CommissioningStatus     *int              `json:"commissioning_status"`
	CommissioningStatusName string            `json:"commissioning_status_name"`
	TestingStatus           *int              `json:"testing_status"`
	TestingStatusName       string            `json:"testing_status_name"`
	HardwareInfo            *wireHardwareInfo `json:"hardware_info"`
}

func (w *wireMachine) machine() Machine {
	m := Machine{
		SystemID:                w.SystemID,
		Hostname:                w.Hostname,
		FQDN:                    w.FQDN,
		Status:                  Status(w.Status),
		StatusName:              w.StatusName,
		StatusMessage:           deref(w.StatusMessage),
		Description:             w.Description,
		PowerState:              PowerState(w.PowerState),
		PowerType:               w.PowerType,
		HardwareUUID:            deref(w.HardwareUUID),
		Architecture:            deref(w.Architecture),
		CPUCount:                w.CPUCount,
		CPUSpeedMHz:             w.CPUSpeed,
		MemoryMiB:               w.Memory,
		StorageMB:               w.Storage,
		OSystem:                 w.OSystem,
		DistroSeries:            w.DistroSeries,
		Owner:                   deref(w.Owner),
		Tags:                    w.TagNames,
		IPAddresses:             w.IPAddresses,
		Locked:                  w.Locked,
		CommissioningStatus:     scriptStatusOrUnknown(w.CommissioningStatus),
		CommissioningStatusName: w.CommissioningStatusName,
		TestingStatus:           scriptStatusOrUnknown(w.TestingStatus),
		TestingStatusName:       w.TestingStatusName,
	}
	m.Domain, m.Zone, m.Pool = w.Domain.Name, w.Zone.Name, w.Pool.Name
	if m.PowerState == "" {
		m.PowerState = PowerUnknown
	}
	if hi := w.HardwareInfo; hi != nil {
		m.HardwareInfo = HardwareInfo(*hi)
	}
	return m
}

func scriptStatusOrUnknown(p *int) ScriptStatus {
	if p == nil {
		return ScriptStatusUnknown
	}
	return ScriptStatus(*p)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
