package provisioning

import (
	"context"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// HardwareDetails reads what MAAS inventoried and tested of one machine, for the machine
// page: one MAAS read each, made only when asked.
type HardwareDetails interface {
	StorageDevices(ctx context.Context, systemID string) ([]StorageDevice, error)
	NetworkInterfaces(ctx context.Context, systemID string) ([]NetworkInterface, error)
	ScriptResults(ctx context.Context, systemID string) ([]ScriptResult, error)
}

// StorageDevice is a block device MAAS found at commissioning. Model and Serial are ""
// where MAAS recorded none (virtual devices have neither).
type StorageDevice struct {
	Name, Type, Path string
	Model, Serial    string
	SizeBytes        int64
}

// NetworkInterface is an interface MAAS knows. A speed of 0 is unknown (no link, or a
// driver that does not say); Fabric and VLAN are "" when MAAS knows no VLAN for it.
type NetworkInterface struct {
	Name, Type, MACAddress string
	LinkConnected          bool
	LinkSpeedMbps          int
	InterfaceSpeedMbps     int
	Fabric, VLAN           string
}

// ScriptKind is the run a script result belongs to.
type ScriptKind string

const (
	ScriptCommissioning ScriptKind = "COMMISSIONING"
	ScriptTesting       ScriptKind = "TESTING"
)

// ScriptResult is one script's outcome in the machine's latest commissioning or testing
// run. Status is MAAS's SCRIPT_STATUS number, StatusName its label.
type ScriptResult struct {
	Kind           ScriptKind
	Name           string
	Status         int
	StatusName     string
	HardwareType   string
	Started, Ended time.Time // zero until it started, ended
}

// MAAS's SCRIPT_STATUS values that mean the script found a fault or could not finish:
// failed, timed out, failed installing dependencies, failed to apply network configuration.
// The same four make MAAS's machine-level test status Failed.
var failedScriptStatuses = map[int]bool{3: true, 4: true, 8: true, 11: true}

// Failed reports whether the script failed: the one rule the API's failed flag and the
// console's highlighting follow.
func (r ScriptResult) Failed() bool { return failedScriptStatuses[r.Status] }

// Duration is how long the script ran; false until it ended.
func (r ScriptResult) Duration() (time.Duration, bool) {
	if r.Started.IsZero() || r.Ended.IsZero() {
		return 0, false
	}
	return r.Ended.Sub(r.Started), true
}

func (s *Service) hardware(systemID string) (HardwareDetails, error) {
	if s.Hardware == nil {
		return nil, apperr.NotConfigured(apperr.MAAS)
	}
	return s.Hardware, validateSystemID(systemID)
}

// StorageDevices lists the block devices MAAS found on a machine; none before its first
// commissioning.
func (s *Service) StorageDevices(ctx context.Context, systemID string) ([]StorageDevice, error) {
	h, err := s.hardware(systemID)
	if err != nil {
		return nil, err
	}
	return h.StorageDevices(ctx, systemID)
}

// NetworkInterfaces lists the interfaces MAAS knows on a machine: before commissioning,
// only the one it booted from.
func (s *Service) NetworkInterfaces(ctx context.Context, systemID string) ([]NetworkInterface, error) {
	h, err := s.hardware(systemID)
	if err != nil {
		return nil, err
	}
	return h.NetworkInterfaces(ctx, systemID)
}

// ScriptResults lists the script results of a machine's latest commissioning and testing
// runs, commissioning first.
func (s *Service) ScriptResults(ctx context.Context, systemID string) ([]ScriptResult, error) {
	h, err := s.hardware(systemID)
	if err != nil {
		return nil, err
	}
	return h.ScriptResults(ctx, systemID)
}
