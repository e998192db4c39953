// Package admission holds the checks a member must pass before it is admitted to
// automatic placement, and the admit step itself. Checks re-read Incus every time; each
// result is published as soon as it is computed, so consoles watch a report fill in.
package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/internal/apperr"
)

// Result is a check's outcome.
type Result string

const (
	Pass       Result = "PASS"
	Fail       Result = "FAIL" // blocks admission
	Warn       Result = "WARN"
	Skipped    Result = "SKIPPED"
	NotChecked Result = "NOT_CHECKED" // Apelora cannot see it; the administrator checks it
)

// Verdict is the outcome of a whole report.
type Verdict string

const (
	Admissible Verdict = "ADMISSIBLE"
	Blocked    Verdict = "BLOCKED"
)

// Check names, stable for clients and the audit trail.
const (
	CheckOnline        = "online"
	CheckIncusVersion  = "incus-version"
	CheckKernel        = "kernel"
	CheckStoragePools  = "storage-pools"
	CheckNetworks      = "networks"
	CheckArchitecture  = "architecture"
	CheckHardwareTests = "hardware-tests"
	CheckProfileMAAS   = "hardware-profile-maas"
	CheckProfileIncus  = "hardware-profile-incus"
	CheckOVNChassis    = "ovn-chassis"
	CheckClock         = "clock"
	// CheckPlacementGuard says whether the placement guard keeps unadmitted members out of
	// untargeted placement: a WARN when it is not, never a FAIL (the member itself is fine).
	CheckPlacementGuard = "placement-guard"
)

// CheckNames lists every check, in the order a report runs them.
var CheckNames = []string{CheckOnline, CheckIncusVersion, CheckKernel, CheckStoragePools, CheckNetworks, CheckArchitecture,
	CheckHardwareTests, CheckProfileMAAS, CheckProfileIncus, CheckPlacementGuard, CheckOVNChassis, CheckClock}

// Check is one check's result.
type Check struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Result  Result `json:"result"`
	Message string `json:"message"`
	// Inconclusive marks a result that comes from a failed read (Incus or MAAS did not
	// answer, or answered an error): it says nothing about the machine itself. Admission
	// still counts its FAIL; drift keeps what it knew.
	Inconclusive bool `json:"inconclusive,omitempty"`
}

// Report is a complete run of the checks for one machine.
type Report struct {
	Machine string    `json:"machine"`
	RunID   string    `json:"runId"`
	Trigger Trigger   `json:"trigger"`
	At      time.Time `json:"at"`
	Checks  []Check   `json:"checks"`
	Verdict Verdict   `json:"verdict"`
}

// Failed returns the checks that block admission.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Result == Fail {
			out = append(out, c)
		}
	}
	return out
}

// Trigger says what ran the checks.
type Trigger string

const (
	TriggerReport    Trigger = "REPORT"    // admissionReport: nothing changes
	TriggerAdmission Trigger = "ADMISSION" // admitMember
	TriggerRestore   Trigger = "RESTORE"   // restoreMember: the checks run again before a member leaves maintenance
)

// Event is one published step of a run: check results, the verdict, or both. The
// checker publishes each result alone as it is computed; feeds may merge the results of
// one run that arrive close together, so many watchers get fewer messages.
type Event struct {
	Machine string    `json:"machine"`
	RunID   string    `json:"runId"`
	Trigger Trigger   `json:"trigger"`
	At      time.Time `json:"at"`
	Checks  []Check   `json:"checks,omitempty"`
	Verdict Verdict   `json:"verdict,omitempty"`
}

// Publisher pushes events to subscribers (on every API replica).
type Publisher interface {
	Publish(ctx context.Context, e Event) error
}

// Incus is what the checks read from Incus. None of it grows with the number of members:
// one member list, two version reads, and one read per storage pool and located network.
type Incus interface {
	Members(ctx context.Context) ([]membership.Member, error)
	// Version asks member name for its versions; "" asks the member Apelora talks to,
	// which stands for the cluster.
	Version(ctx context.Context, member string) (membership.Version, error)
	StoragePools(ctx context.Context) ([]string, error)
	StoragePoolStatus(ctx context.Context, pool, member string) (string, error)
	// LocatedNetworks lists the managed networks that exist per member (not OVN ones).
	LocatedNetworks(ctx context.Context) ([]string, error)
	NetworkStatus(ctx context.Context, network, member string) (string, error)
	// MemberHardware is Incus's own view of the member's hardware (read only for a
	// machine with a hardware profile).
	MemberHardware(ctx context.Context, member string) (hardware.Inventory, error)
}

// HardwareTests reads MAAS's hardware-test status of a machine.
type HardwareTests interface {
	// TestingStatus returns MAAS's machine-level testing status (-1 never tested, 0
	// pending, 1 running, 2 passed, 3 failed, 4 timed out, 5 aborted, 6 degraded) and its
	// label. An error that is apperr.Unavailable means MAAS could not be reached.
	TestingStatus(ctx context.Context, systemID string) (int, string, error)
}

// Profiles reads a hardware profile by name.
type Profiles interface {
	Profile(ctx context.Context, name string) (*hardware.Profile, error)
}

// MAASInventory reads what MAAS inventoried of a machine at commissioning.
type MAASInventory interface {
	// HardwareInventory returns the machine's architecture, CPUs, memory, physical disks
	// and physical NICs as MAAS reports them. An error that is apperr.Unavailable means
	// MAAS could not be reached.
	HardwareInventory(ctx context.Context, systemID string) (hardware.Inventory, error)
}

// Guard reads the placement guard's state in a cluster (placement.Service).
type Guard interface {
	Status(ctx context.Context, cluster int64) (placement.Status, error)
}

// Checker runs the admission checks.
type Checker struct {
	// Ports finds a cluster's Incus ports (the connection pool); Clusters lists the
	// registered clusters: a machine is checked against its record's cluster
	// (clusters.OfRecord). Either nil: Incus is not configured.
	Ports    clusters.Ports[Incus]
	Clusters clusters.Lister
	MAAS     HardwareTests // nil when MAAS is not configured
	Publish  Publisher     // nil publishes nothing
	// Profiles reads hardware profiles; MAASInventory is nil when MAAS is not configured.
	Profiles      Profiles
	MAASInventory MAASInventory
	// Guard reads the placement guard; nil skips its check.
	Guard Guard
	Now   func() time.Time
	// MinKernel is the oldest kernel admitted, as major and minor (default 6.12).
	MinKernel [2]int

	// in and cluster are the cluster of one run (RunIn) and its ports.
	in      Incus
	cluster clusters.Cluster
}

// Cluster names the cluster the member called machine is checked in, and returns its
// ports: its record's cluster (rec nil, or a record naming none: the environment's).
func (c *Checker) Cluster(ctx context.Context, machine string, rec *machines.Record) (clusters.Cluster, Incus, error) {
	if c.Ports == nil || c.Clusters == nil {
		return clusters.Cluster{}, nil, apperr.NotConfigured(apperr.Incus)
	}
	var record *int64
	if rec != nil {
		record = rec.Cluster
	}
	cl, err := clusters.OfRecord(c.Clusters.All(), machine, record, "")
	if err != nil {
		return clusters.Cluster{}, nil, err
	}
	in, err := c.Ports.For(ctx, cl.ID)
	if err != nil {
		return clusters.Cluster{}, nil, err
	}
	return cl, in, nil
}

// Run checks the member called machine (rec is its machine record, nil for none) in its
// record's cluster and returns the report, publishing each result as it is computed. It
// changes nothing.
func (c *Checker) Run(ctx context.Context, machine string, rec *machines.Record, trigger Trigger) (*Report, error) {
	cl, in, err := c.Cluster(ctx, machine, rec)
	if err != nil {
		return nil, err
	}
	return c.RunIn(ctx, cl, in, machine, rec, trigger)
}

// RunInCluster is Run in cluster cl (named by the caller: a member evacuated or restored
// in the cluster its call named), read through that cluster's ports.
func (c *Checker) RunInCluster(ctx context.Context, cl clusters.Cluster, machine string, rec *machines.Record, trigger Trigger) (*Report, error) {
	if c.Ports == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	in, err := c.Ports.For(ctx, cl.ID)
	if err != nil {
		return nil, err
	}
	return c.RunIn(ctx, cl, in, machine, rec, trigger)
}

// RunIn is Run in cluster cl, read through in (a cluster's ports, or a round's cache of
// them: drift): its members, versions, pools, networks and placement guard.
func (c *Checker) RunIn(ctx context.Context, cl clusters.Cluster, in Incus, machine string, rec *machines.Record, trigger Trigger) (*Report, error) {
	run := *c
	run.in, run.cluster = in, cl
	return run.run(ctx, machine, rec, trigger)
}

func (c *Checker) run(ctx context.Context, machine string, rec *machines.Record, trigger Trigger) (*Report, error) {
	members, err := c.in.Members(ctx)
	if err != nil {
		return nil, apperr.Wrap(err, apperr.Unavailable, "cannot run the admission checks: Incus cluster %s did not answer the member list; check that the cluster is up and reachable from Apelora", c.cluster.Name)
	}
	var member *membership.Member
	for i := range members {
		if members[i].Name == machine {
			member = &members[i]
		}
	}
	if member == nil {
		return nil, apperr.New(apperr.FailedPrecondition, "%s is not an Incus member of cluster %s yet: approve its enrolment and run enrol-member.sh on it first", apperr.Quote(machine), c.cluster.Name)
	}
	r := &Report{Machine: machine, RunID: newRunID(), Trigger: trigger, At: c.now()}
	add := func(ch Check) {
		r.Checks = append(r.Checks, ch)
		c.publish(ctx, Event{Machine: machine, RunID: r.RunID, Trigger: trigger, At: c.now(), Checks: []Check{ch}})
	}

	add(online(member))
	theirs, errTheirs := c.in.Version(ctx, machine)
	ours, errOurs := c.in.Version(ctx, "")
	add(incusVersion(theirs, errTheirs, ours, errOurs))
	add(c.kernel(theirs, errTheirs))
	add(c.storagePools(ctx, machine))
	add(c.networks(ctx, machine))
	add(architecture(member, members))
	add(c.hardwareTests(ctx, rec))
	profile := c.assignedProfile(ctx, rec)
	add(c.profileFromMAAS(ctx, rec, profile))
	add(c.profileFromIncus(ctx, machine, profile))
	add(c.placementGuard(ctx))
	add(Check{Name: CheckOVNChassis, Title: "OVN chassis", Result: NotChecked,
		Message: "the Incus API does not show whether the OVN chassis runs on the member: check it on the host if the cluster uses OVN"})
	add(Check{Name: CheckClock, Title: "Clock", Result: NotChecked,
		Message: "the Incus API does not show the member's clock: check that it is synchronised (NTP) on the host"})

	r.Verdict = Admissible
	if len(r.Failed()) > 0 {
		r.Verdict = Blocked
	}
	c.publish(ctx, Event{Machine: machine, RunID: r.RunID, Trigger: trigger, At: c.now(), Verdict: r.Verdict})
	return r, nil
}

// placementGuard reports the cluster's placement guard. It is about the cluster, not the
// member, so it never blocks an admission; it warns while members can be placed on before
// they are admitted.
func (c *Checker) placementGuard(ctx context.Context) Check {
	ch := Check{Name: CheckPlacementGuard, Title: "Placement guard"}
	if c.Guard == nil {
		ch.Result, ch.Message = Skipped, "the placement guard's state is not read here (Incus is not configured)"
		return ch
	}
	s, err := c.Guard.Status(ctx, c.cluster.ID)
	if err != nil {
		ch.Result, ch.Inconclusive = Warn, true
		ch.Message = "cannot read the placement guard: " + apperr.PublicMessage(err)
		return ch
	}
	ch.Result, ch.Message = Warn, s.Message()
	if s.State == placement.On && !s.Unplaceable() {
		ch.Result = Pass
	}
	return ch
}

func (c *Checker) publish(ctx context.Context, e Event) {
	// A dry run's NOTIFY is a call of the plan, pushed to nobody (plan.Writes).
	if c.Publish != nil {
		// Publishing is best effort: a watcher missing a step must not fail the checks.
		_ = c.Publish.Publish(ctx, e)
	}
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func online(m *membership.Member) Check {
	ch := Check{Name: CheckOnline, Title: "Member online"}
	if m.Online() {
		ch.Result, ch.Message = Pass, "Incus reports the member online: "+m.Message
		return ch
	}
	if m.Evacuated() {
		// Incus keeps listing an evacuated member Evacuated even when it does not answer;
		// the checks that ask the member say whether it does.
		ch.Result, ch.Message = Pass, "Incus reports the member evacuated (in maintenance): "+m.Message+"; the checks that ask the member tell whether it answers"
		return ch
	}
	ch.Result, ch.Message = Fail, fmt.Sprintf("Incus reports the member %s (%s): bring it back online before admitting it", m.Status, m.Message)
	return ch
}

func major(v string) string {
	maj, _, _ := strings.Cut(v, ".")
	return maj
}

func incusVersion(theirs membership.Version, errTheirs error, ours membership.Version, errOurs error) Check {
	ch := Check{Name: CheckIncusVersion, Title: "Incus version"}
	switch {
	case errTheirs != nil:
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not ask the member for its version: "+apperr.Text(errTheirs), true
	case errOurs != nil:
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not ask the cluster for its version: "+apperr.Text(errOurs), true
	case major(theirs.Incus) != major(ours.Incus):
		ch.Result, ch.Message = Fail, fmt.Sprintf("the member runs Incus %s, a different major version from the cluster's %s: install %s on it", theirs.Incus, ours.Incus, ours.Incus)
	case theirs.Incus != ours.Incus:
		ch.Result, ch.Message = Fail, fmt.Sprintf("the member runs Incus %s, the cluster %s: install exactly %s on it", theirs.Incus, ours.Incus, ours.Incus)
	case theirs.APIExtensions != ours.APIExtensions:
		ch.Result, ch.Message = Fail, fmt.Sprintf("the member's Incus %s has %d API extensions, the cluster's %d: install the same build", theirs.Incus, theirs.APIExtensions, ours.APIExtensions)
	default:
		ch.Result, ch.Message = Pass, fmt.Sprintf("Incus %s (%d API extensions), as the cluster", theirs.Incus, theirs.APIExtensions)
	}
	return ch
}

var kernelPattern = regexp.MustCompile(`^(\d+)\.(\d+)`)

// ParseKernel returns the major and minor version of a kernel release string such as
// "6.12.8-amd64".
func ParseKernel(release string) (int, int, bool) {
	m := kernelPattern.FindStringSubmatch(release)
	if m == nil {
		return 0, 0, false
	}
	maj, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return maj, minor, true
}

func (c *Checker) kernel(v membership.Version, err error) Check {
	least := c.MinKernel
	if least == [2]int{} {
		least = [2]int{6, 12}
	}
	ch := Check{Name: CheckKernel, Title: "Kernel"}
	if err != nil {
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not ask the member for its kernel: "+apperr.Text(err), true
		return ch
	}
	maj, minor, ok := ParseKernel(v.Kernel)
	switch {
	case !ok:
		ch.Result, ch.Message = Fail, fmt.Sprintf("cannot read the kernel version %q", v.Kernel)
	case maj < least[0] || maj == least[0] && minor < least[1]:
		ch.Result, ch.Message = Fail, fmt.Sprintf("kernel %s is older than %d.%d: install a newer kernel", v.Kernel, least[0], least[1])
	default:
		ch.Result, ch.Message = Pass, fmt.Sprintf("kernel %s (at least %d.%d)", v.Kernel, least[0], least[1])
	}
	return ch
}

func (c *Checker) storagePools(ctx context.Context, member string) Check {
	ch := Check{Name: CheckStoragePools, Title: "Storage pools created on the member"}
	pools, err := c.in.StoragePools(ctx)
	if err != nil {
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not list the storage pools: "+apperr.Text(err), true
		return ch
	}
	return statusCheck(ch, "storage pool", pools, func(p string) (string, error) { return c.in.StoragePoolStatus(ctx, p, member) })
}

func (c *Checker) networks(ctx context.Context, member string) Check {
	ch := Check{Name: CheckNetworks, Title: "Networks created on the member"}
	nets, err := c.in.LocatedNetworks(ctx)
	if err != nil {
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not list the networks: "+apperr.Text(err), true
		return ch
	}
	return statusCheck(ch, "network", nets, func(n string) (string, error) { return c.in.NetworkStatus(ctx, n, member) })
}

func statusCheck(ch Check, what string, names []string, status func(string) (string, error)) Check {
	if len(names) == 0 {
		ch.Result, ch.Message = Pass, "the cluster has no "+what+"s that must exist on each member"
		return ch
	}
	var bad []string
	unread := 0
	for _, n := range names {
		s, err := status(n)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s (could not read: %s)", n, apperr.Text(err)))
			unread++
		case s != "Created":
			bad = append(bad, fmt.Sprintf("%s (%s)", n, s))
		}
	}
	if len(bad) > 0 {
		ch.Result, ch.Inconclusive = Fail, unread == len(bad)
		ch.Message = fmt.Sprintf("not created on the member: %s; fix the %s on the host (for example its source or parent) and create it there again", strings.Join(bad, ", "), what)
		return ch
	}
	ch.Result, ch.Message = Pass, fmt.Sprintf("created on the member: %s", strings.Join(names, ", "))
	return ch
}

func architecture(m *membership.Member, all []membership.Member) Check {
	ch := Check{Name: CheckArchitecture, Title: "Architecture"}
	for _, o := range all {
		if o.Name != m.Name && o.Architecture == m.Architecture {
			ch.Result, ch.Message = Pass, fmt.Sprintf("%s, as other members (for example %s)", m.Architecture, o.Name)
			return ch
		}
	}
	var others []string
	for _, o := range all {
		if o.Name != m.Name && !slices.Contains(others, o.Architecture) {
			others = append(others, o.Architecture)
		}
	}
	if len(others) == 0 {
		// The cluster's only member: nothing to compare with, nowhere to move to.
		ch.Result, ch.Message = Pass, fmt.Sprintf("%s, the cluster's only member", m.Architecture)
		return ch
	}
	ch.Result = Warn
	ch.Message = fmt.Sprintf("the first %s member: instances placed here cannot move to the other members (%s)", m.Architecture, strings.Join(others, ", "))
	return ch
}

func (c *Checker) hardwareTests(ctx context.Context, rec *machines.Record) Check {
	ch := Check{Name: CheckHardwareTests, Title: "MAAS hardware tests"}
	switch {
	case rec == nil || rec.Provisioner != machines.MAAS:
		ch.Result, ch.Message = Skipped, "not a MAAS machine: no hardware tests to read"
		return ch
	case c.MAAS == nil:
		ch.Result, ch.Message = Skipped, "MAAS is not configured, so its hardware tests cannot be read"
		return ch
	}
	status, label, err := c.MAAS.TestingStatus(ctx, rec.MAASSystemID)
	if err != nil {
		ch.Inconclusive = true
		if apperr.Is(err, apperr.Unavailable) {
			ch.Result, ch.Message = Skipped, "MAAS could not be reached, so its hardware tests were not read: "+apperr.Text(err)
			return ch
		}
		ch.Result, ch.Message = Fail, "could not read the hardware tests from MAAS: "+apperr.Text(err)
		return ch
	}
	return hardwareResult(ch, status, label)
}

func hardwareResult(ch Check, status int, label string) Check {
	switch status {
	case 2:
		ch.Result, ch.Message = Pass, "MAAS hardware tests passed"
	case 0, 1, 3, 4, 5:
		ch.Result, ch.Message = Fail, fmt.Sprintf("MAAS hardware tests are %s: admit only after they pass", strings.ToLower(label))
	case 6:
		ch.Result, ch.Message = Warn, "MAAS hardware tests passed degraded: look at the results in MAAS"
	case -1:
		ch.Result, ch.Message = Warn, "MAAS has no hardware test results for this machine (never tested)"
	default:
		ch.Result, ch.Message = Warn, fmt.Sprintf("MAAS reports an unfamiliar testing status %d (%s)", status, label)
	}
	return ch
}

// assigned is the machine's hardware profile as read for one run: p, or why there is
// nothing to compare (result and message, shared by both profile checks).
type assigned struct {
	p            *hardware.Profile
	result       Result
	message      string
	inconclusive bool // the profile could not be read
}

// assignedProfile reads the machine's hardware profile. A machine without one has
// nothing to compare; a profile that cannot be read fails both checks.
func (c *Checker) assignedProfile(ctx context.Context, rec *machines.Record) assigned {
	switch {
	case rec == nil || rec.HardwareProfile == "":
		return assigned{result: Skipped, message: "no hardware profile is assigned to the machine, so there is nothing to compare (assignHardwareProfile gives it one)"}
	case c.Profiles == nil:
		return assigned{result: Fail, message: fmt.Sprintf("hardware profile %q cannot be read here: this server has no profile store", rec.HardwareProfile)}
	}
	p, err := c.Profiles.Profile(ctx, rec.HardwareProfile)
	switch {
	case err != nil:
		return assigned{result: Fail, message: fmt.Sprintf("could not read hardware profile %q: %s", rec.HardwareProfile, apperr.Text(err)), inconclusive: true}
	case p == nil:
		return assigned{result: Fail, message: fmt.Sprintf("hardware profile %q no longer exists: assign another one or clear the machine's profile", rec.HardwareProfile)}
	}
	return assigned{p: p}
}

// profileFromMAAS compares the profile with what MAAS inventoried at commissioning. It is
// its own check so that MAAS being unreachable skips only this half, as for the hardware
// tests.
func (c *Checker) profileFromMAAS(ctx context.Context, rec *machines.Record, a assigned) Check {
	ch := Check{Name: CheckProfileMAAS, Title: "Hardware profile: MAAS inventory"}
	switch {
	case a.p == nil:
		ch.Result, ch.Message, ch.Inconclusive = a.result, a.message, a.inconclusive
		return ch
	case rec.Provisioner != machines.MAAS:
		ch.Result, ch.Message = Skipped, "not a MAAS machine: no MAAS inventory to compare (Incus's view is compared)"
		return ch
	case c.MAASInventory == nil:
		ch.Result, ch.Message = Skipped, "MAAS is not configured, so its inventory cannot be read (Incus's view is compared)"
		return ch
	}
	inv, err := c.MAASInventory.HardwareInventory(ctx, rec.MAASSystemID)
	switch {
	case err != nil && apperr.Is(err, apperr.Unavailable):
		ch.Result, ch.Message, ch.Inconclusive = Skipped, "MAAS could not be reached, so its inventory was not compared: "+apperr.Text(err), true
	case err != nil:
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not read the machine's inventory from MAAS: "+apperr.Text(err), true
	case inv.Empty():
		ch.Result, ch.Message = Fail, fmt.Sprintf("MAAS has no hardware inventory of machine %s yet: commission it, then run the checks again", rec.MAASSystemID)
	default:
		ch = profileResult(ch, a.p, inv, "MAAS")
	}
	return ch
}

// profileFromIncus compares the profile with what Incus sees on the member now.
func (c *Checker) profileFromIncus(ctx context.Context, member string, a assigned) Check {
	ch := Check{Name: CheckProfileIncus, Title: "Hardware profile: Incus's view of the member"}
	if a.p == nil {
		ch.Result, ch.Message, ch.Inconclusive = a.result, a.message, a.inconclusive
		return ch
	}
	inv, err := c.in.MemberHardware(ctx, member)
	if err != nil {
		ch.Result, ch.Message, ch.Inconclusive = Fail, "could not read the member's hardware from Incus: "+apperr.Text(err), true
		return ch
	}
	return profileResult(ch, a.p, inv, "Incus")
}

func profileResult(ch Check, p *hardware.Profile, inv hardware.Inventory, source string) Check {
	cmp := hardware.Compare(*p, inv)
	switch cmp.Outcome() {
	case hardware.Met:
		ch.Result, ch.Message = Pass, cmp.Describe(source)
	case hardware.Unknown:
		ch.Result, ch.Message = Warn, cmp.Describe(source)+": it cannot tell, check it on the host"
	default:
		ch.Result, ch.Message = Fail, cmp.Describe(source)+": fix the machine, or its profile (setHardwareProfile, assignHardwareProfile), before admitting it"
	}
	return ch
}
