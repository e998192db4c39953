package maas

import (
	"context"
	"errors"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/flight"
)

// Ports adapts the MAAS client to what the domain packages ask of MAAS, and turns
// MAAS's errors into administrator's errors. MAAS's messages never carry the key (the
// client redacts them).
type Ports struct {
	c *Client
	// list: the whole machine list, one call in flight at a time for all callers
	// (internal/flight; make Ports with NewPorts).
	list *flight.Call[[]Machine]
}

// NewPorts makes the ports on c. Every change through c, made or planned, passes
// c's seam (plan.Writes), which then has the shared list forget its call in flight: no
// port write can forget to.
func NewPorts(c *Client) *Ports {
	p := &Ports{c: c, list: &flight.Call[[]Machine]{}}
	c.Writes().AfterEach(func(s plan.System, _ bool) {
		if s == plan.MAAS {
			p.wrote()
		}
	})
	return p
}

// wrote runs after every step that changes a machine (the seam's hook): a list after it
// starts a new call rather than share one that began before the change.
func (p Ports) wrote() { p.list.Forget() }

func (p Ports) listMachines(ctx context.Context) ([]Machine, error) {
	return p.list.Do(ctx, func(ctx context.Context) ([]Machine, error) { return p.c.Machines(ctx, MachineFilter{}) })
}

var (
	_ provisioning.MAAS            = Ports{}
	_ provisioning.ImageSource     = Ports{}
	_ provisioning.HardwareDetails = Ports{}
	_ machines.MAASLookup          = Ports{}
	_ admission.HardwareTests      = Ports{}
	_ fleet.MAASMachine            = Ports{}
)

// within says how long a call waited: "within 10s" for a call that ran out of its own
// bound (the request timeout), "in time" when the caller's context ended first.
func within(err error) string {
	var mt *TimeoutError
	if errors.As(err, &mt) {
		return "within " + mt.After.String()
	}
	return "in time"
}

func maasErr(err error, doing string) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	msg := ""
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return apperr.Wrap(err, apperr.NotFound, "cannot %s: MAAS knows no such machine; check the system id", doing)
	case errors.Is(err, ErrUnauthorized):
		return apperr.Wrap(err, apperr.Unavailable, "cannot %s: MAAS rejected Apelora's API key (APELORA_MAAS_API_KEY); generate a new key for the MAAS user and restart", doing)
	case errors.Is(err, ErrForbidden):
		return apperr.Wrap(err, apperr.FailedPrecondition, "cannot %s: MAAS refused it for the user behind Apelora's key, or the machine is locked in MAAS", doing)
	case errors.Is(err, ErrConflict), errors.Is(err, ErrBadRequest):
		return apperr.Wrap(err, apperr.FailedPrecondition, "MAAS refused to %s: %s", doing, msg)
	case errors.Is(err, ErrCACertificateServed):
		return apperr.Wrap(err, apperr.Unavailable, "cannot %s: MAAS serves a certificate marked as a CA, which Apelora refuses; give MAAS a proper leaf certificate", doing)
	case UntrustedCertificate(err):
		return apperr.Wrap(err, apperr.Unavailable, "cannot %s: MAAS's certificate is not trusted (it changed, or APELORA_MAAS_CA_FILE holds another CA); put the CA that signed it, or MAAS's new certificate itself, in APELORA_MAAS_CA_FILE: the file is re-read on the next call, no restart needed", doing)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return apperr.Wrap(err, apperr.Unavailable, "MAAS did not answer %s to %s: check that MAAS is up and reachable (if it was only slow, it may still carry the step out: look at the machine before trying again), or raise APELORA_REQUEST_TIMEOUT", within(err), doing)
	default:
		return apperr.Wrap(err, apperr.Unavailable, "MAAS could not be reached to %s: check APELORA_MAAS_URL, its certificate (APELORA_MAAS_CA_FILE) and that MAAS is up", doing)
	}
}

func toMAASMachine(m Machine) provisioning.MAASMachine {
	return provisioning.MAASMachine{
		SystemID: m.SystemID, Hostname: m.Hostname, FQDN: m.FQDN,
		Status: provisioning.Status(m.Status), StatusName: m.StatusName, StatusMessage: m.StatusMessage,
		PowerState: string(m.PowerState), PowerType: m.PowerType, HardwareUUID: m.HardwareUUID,
		Architecture: m.Architecture, CPUCount: m.CPUCount, MemoryMiB: m.MemoryMiB, StorageMB: m.StorageMB,
		OSystem: m.OSystem, DistroSeries: m.DistroSeries, Owner: m.Owner, Zone: m.Zone, Pool: m.Pool,
		Tags: m.Tags, IPAddresses: m.IPAddresses, Locked: m.Locked,
		TestingStatus: int(m.TestingStatus), TestingStatusName: m.TestingStatusName,
	}
}

func (p Ports) machine(m Machine, err error, doing string) (provisioning.MAASMachine, error) {
	if err != nil {
		return provisioning.MAASMachine{}, maasErr(err, doing)
	}
	return toMAASMachine(m), nil
}

// Every call is bounded by the client (the request timeout, retries included), so an
// unreachable MAAS is reported instead of holding the answer.

func (p Ports) Machines(ctx context.Context) ([]provisioning.MAASMachine, error) {
	ms, err := p.listMachines(ctx)
	if err != nil {
		return nil, maasErr(err, "list the MAAS machines")
	}
	out := make([]provisioning.MAASMachine, len(ms))
	for i, m := range ms {
		out[i] = toMAASMachine(m)
	}
	return out, nil
}

// MachinesNamed lists the machines MAAS calls hostname (GET machines/?hostname=…): the
// fleet's one-machine read for a row with no MAAS system id.
func (p Ports) MachinesNamed(ctx context.Context, hostname string) ([]provisioning.MAASMachine, error) {
	ms, err := p.c.Machines(ctx, MachineFilter{Hostnames: []string{hostname}})
	if err != nil {
		return nil, maasErr(err, "list the MAAS machines called "+hostname)
	}
	out := make([]provisioning.MAASMachine, len(ms))
	for i, m := range ms {
		out[i] = toMAASMachine(m)
	}
	return out, nil
}

func (p Ports) Machine(ctx context.Context, id string) (provisioning.MAASMachine, error) {
	m, err := p.c.Machine(ctx, id)
	return p.machine(m, err, "read MAAS machine "+id)
}

func (p Ports) Commission(ctx context.Context, id string, o provisioning.CommissionOptions) (provisioning.MAASMachine, error) {
	opts := CommissionOptions{TestingScripts: o.Tests}
	if o.Tests != nil && len(o.Tests) == 0 {
		opts.TestingScripts = []string{"none"}
	}
	m, err := p.c.Commission(ctx, id, opts)
	return p.machine(m, err, "commission MAAS machine "+id)
}

func (p Ports) Test(ctx context.Context, id string, tests []string) (provisioning.MAASMachine, error) {
	m, err := p.c.Test(ctx, id, TestOptions{TestingScripts: tests})
	return p.machine(m, err, "test MAAS machine "+id)
}

func (p Ports) Allocate(ctx context.Context, id string) (provisioning.MAASMachine, error) {
	m, err := p.c.Allocate(ctx, id, AllocateOptions{Comment: "Apelora: install and enrol"})
	return p.machine(m, err, "allocate MAAS machine "+id)
}

func (p Ports) Deploy(ctx context.Context, id, series string, userData provisioning.UserData) (provisioning.MAASMachine, error) {
	m, err := p.c.Deploy(ctx, id, DeployOptions{DistroSeries: series, UserData: userData.Bytes, UserDataShown: userData.Shown, Comment: "Apelora: install and enrol"})
	return p.machine(m, err, "deploy MAAS machine "+id)
}

func (p Ports) Release(ctx context.Context, id string, erase bool, comment string) (provisioning.MAASMachine, error) {
	m, err := p.c.Release(ctx, id, ReleaseOptions{Erase: erase, Comment: comment})
	return p.machine(m, err, "release MAAS machine "+id)
}

func (p Ports) BootResources(ctx context.Context) ([]provisioning.BootResource, error) {
	rs, err := p.c.BootResources(ctx)
	if err != nil {
		return nil, maasErr(err, "list the images MAAS holds")
	}
	out := make([]provisioning.BootResource, len(rs))
	for i, r := range rs {
		out[i] = provisioning.BootResource{Type: r.Type, Name: r.Name, Architecture: r.Architecture}
	}
	return out, nil
}

func (p Ports) EraseOnRelease(ctx context.Context) (bool, error) {
	on, err := p.c.GetConfigBool(ctx, "enable_disk_erasing_on_release")
	return on, maasErr(err, "read MAAS's enable_disk_erasing_on_release setting")
}

// HardwareUUID is what registering a MAAS machine copies: "" for a machine MAAS has not
// commissioned yet (the fleet's reads copy it once MAAS reports it).
func (p Ports) HardwareUUID(ctx context.Context, id string) (string, error) {
	m, err := p.c.Machine(ctx, id)
	if err != nil {
		return "", maasErr(err, "read MAAS machine "+id)
	}
	return m.HardwareUUID, nil
}

// TestingStatus is what the admission's hardware-test check reads.
func (p Ports) TestingStatus(ctx context.Context, id string) (int, string, error) {
	m, err := p.c.Machine(ctx, id)
	if err != nil {
		return 0, "", maasErr(err, "read MAAS machine "+id)
	}
	return int(m.TestingStatus), m.TestingStatusName, nil
}

var _ admission.MAASInventory = Ports{}

// HardwareInventory is what MAAS inventoried of a machine at commissioning: three reads
// (the machine, its block devices, its interfaces), each bounded by the request timeout.
func (p Ports) HardwareInventory(ctx context.Context, id string) (hardware.Inventory, error) {
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

// StorageDevices, NetworkInterfaces and ScriptResults are the machine page's MAAS hardware
// tab: one MAAS read each.
func (p Ports) StorageDevices(ctx context.Context, id string) ([]provisioning.StorageDevice, error) {
	ds, err := p.c.BlockDevices(ctx, id)
	if err != nil {
		return nil, maasErr(err, "read the block devices of MAAS machine "+id)
	}
	out := make([]provisioning.StorageDevice, len(ds))
	for i, d := range ds {
		out[i] = provisioning.StorageDevice{Name: d.Name, Type: d.Type, Path: d.Path, Model: d.Model, Serial: d.Serial, SizeBytes: d.SizeBytes}
	}
	return out, nil
}

func (p Ports) NetworkInterfaces(ctx context.Context, id string) ([]provisioning.NetworkInterface, error) {
	ns, err := p.c.Interfaces(ctx, id)
	if err != nil {
		return nil, maasErr(err, "read the interfaces of MAAS machine "+id)
	}
	out := make([]provisioning.NetworkInterface, len(ns))
	for i, n := range ns {
		out[i] = provisioning.NetworkInterface{Name: n.Name, Type: n.Type, MACAddress: n.MACAddress, LinkConnected: n.LinkConnected,
			LinkSpeedMbps: n.LinkSpeedMbps, InterfaceSpeedMbps: n.InterfaceSpeedMbps, Fabric: n.Fabric, VLAN: n.VLAN}
	}
	return out, nil
}

func (p Ports) ScriptResults(ctx context.Context, id string) ([]provisioning.ScriptResult, error) {
	rs, err := p.c.ScriptResults(ctx, id)
	if err != nil {
		return nil, maasErr(err, "read the script results of MAAS machine "+id)
	}
	kinds := map[ResultKind]provisioning.ScriptKind{ResultCommissioning: provisioning.ScriptCommissioning, ResultTesting: provisioning.ScriptTesting}
	out := make([]provisioning.ScriptResult, len(rs))
	for i, r := range rs {
		out[i] = provisioning.ScriptResult{Kind: kinds[r.Kind], Name: r.Name, Status: int(r.Status), StatusName: r.StatusName,
			HardwareType: r.HardwareType, Started: r.Started, Ended: r.Ended}
	}
	return out, nil
}

// maasInventory counts physical disks (not MAAS's virtual devices: RAID, LVM, bcache are
// built from them) and physical interfaces (bonds, bridges and VLANs are built on them).
// A link that was down at commissioning has no speed to count.
func maasInventory(m Machine, disks []BlockDevice, nics []Interface) hardware.Inventory {
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

// FencePorts adapts the MAAS client to fencing's ports, classifying MAAS's errors with
// fencing's error classes while keeping MAAS's own words (which never carry the key).
type FencePorts struct{ c *Client }

// NewFencePorts makes fencing's MAAS ports on c (the fencing worker's client, which holds
// the power credential).
func NewFencePorts(c *Client) FencePorts { return FencePorts{c: c} }

var (
	_ fencing.MAAS          = FencePorts{}
	_ fencing.MachineReader = FencePorts{}
)

// classified keeps an error's text and adds the class fencing branches on.
type classified struct{ err, class error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.err, c.class} }

func classify(err error, refusedMeansRefused bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return classified{err, fencing.ErrMachineNotFound}
	case errors.Is(err, ErrPowerNotQueryable):
		return classified{err, fencing.ErrPowerNotQueryable}
	case refusedMeansRefused && (errors.Is(err, ErrBadRequest) || errors.Is(err, ErrForbidden) ||
		errors.Is(err, ErrConflict) || errors.Is(err, ErrUnauthorized)):
		// MAAS answered no: it did not power anything off.
		return classified{err, fencing.ErrMAASRefused}
	}
	return err
}

func (f FencePorts) Machine(ctx context.Context, systemID string) (fencing.MachineFacts, error) {
	m, err := f.c.Machine(ctx, systemID)
	if err != nil {
		return fencing.MachineFacts{}, classify(err, false)
	}
	return fencing.MachineFacts{SystemID: m.SystemID, Hostname: m.Hostname, HardwareUUID: m.HardwareUUID, PowerType: m.PowerType}, nil
}

func (f FencePorts) QueryPowerState(ctx context.Context, systemID string) (string, error) {
	s, err := f.c.QueryPowerState(ctx, systemID)
	return string(s), classify(err, false)
}

func (f FencePorts) PowerOff(ctx context.Context, systemID string) (bool, error) {
	sent, err := f.c.PowerOff(ctx, systemID, StopHard)
	return sent, classify(err, true)
}

// PowerOn is a rolling reboot's power-on (rolling.Power).
func (f FencePorts) PowerOn(ctx context.Context, systemID string) (bool, error) {
	sent, err := f.c.PowerOn(ctx, systemID)
	return sent, classify(err, true)
}
