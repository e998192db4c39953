package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

// fakeIncus is a cluster described by data; it counts calls.
type fakeIncus struct {
	members    []membership.Member
	versions   map[string]membership.Version // "" is the cluster's
	pools      map[string]string             // pool -> status on the member checked
	networks   map[string]string
	versionErr map[string]error
	hw         hardware.Inventory // what Incus sees of node-3
	hwErr      error
	calls      int
}

func (f *fakeIncus) MemberHardware(context.Context, string) (hardware.Inventory, error) {
	f.calls++
	return f.hw, f.hwErr
}

func (f *fakeIncus) Members(context.Context) ([]membership.Member, error) {
	f.calls++
	return f.members, nil
}

func (f *fakeIncus) Version(_ context.Context, m string) (membership.Version, error) {
	f.calls++
	if err := f.versionErr[m]; err != nil {
		return membership.Version{}, err
	}
	return f.versions[m], nil
}

func (f *fakeIncus) StoragePools(context.Context) ([]string, error) {
	f.calls++
	return keys(f.pools), nil
}

func (f *fakeIncus) StoragePoolStatus(_ context.Context, p, _ string) (string, error) {
	f.calls++
	return f.pools[p], nil
}

func (f *fakeIncus) LocatedNetworks(context.Context) ([]string, error) {
	f.calls++
	return keys(f.networks), nil
}

func (f *fakeIncus) NetworkStatus(_ context.Context, n, _ string) (string, error) {
	f.calls++
	return f.networks[n], nil
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func healthy() *fakeIncus {
	v := membership.Version{Incus: "6.0.4", APIExtensions: 450, Kernel: "6.18.44-fc"}
	return &fakeIncus{
		members: []membership.Member{
			{Name: "m1", Status: "Online", Message: "Fully operational", Architecture: "x86_64"},
			{Name: "node-3", Status: "Online", Message: "Fully operational", Architecture: "x86_64", Config: map[string]string{"scheduler.instance": "manual"}},
		},
		versions: map[string]membership.Version{"": v, "node-3": v},
		pools:    map[string]string{"local": "Created"},
		networks: map[string]string{},
		hw: hardware.Inventory{Architecture: "x86_64", CPUCores: 64, MemoryMiB: 262144,
			Disks: []hardware.Disk{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336}, {Name: "nvme1n1", SizeBytes: 3_840_755_982_336}},
			NICs:  []hardware.NIC{{Name: "eno1", SpeedMbps: 25000}, {Name: "eno2", SpeedMbps: 25000}}},
	}
}

type recordingPublisher struct{ events []Event }

func (p *recordingPublisher) Publish(_ context.Context, e Event) error {
	p.events = append(p.events, e)
	return nil
}

func run(t *testing.T, f *fakeIncus, rec *machines.Record, hw HardwareTests) (*Report, *recordingPublisher) {
	t.Helper()
	pub := &recordingPublisher{}
	c := &Checker{Ports: portsOf[Incus](f), Clusters: testClusters, MAAS: hw, Publish: pub}
	r, err := c.Run(context.Background(), "node-3", rec, TriggerReport)
	if err != nil {
		t.Fatal(err)
	}
	return r, pub
}

func result(r *Report, name string) Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

func TestHealthyMemberIsAdmissibleAndEveryResultIsPublished(t *testing.T) {
	r, pub := run(t, healthy(), nil, nil)
	if r.Verdict != Admissible {
		t.Fatalf("verdict %s: %+v", r.Verdict, r.Failed())
	}
	want := CheckNames // the list metrics label check failures with is the report's
	if len(r.Checks) != len(want) {
		t.Fatalf("%d checks", len(r.Checks))
	}
	for i, name := range want {
		if r.Checks[i].Name != name || r.Checks[i].Message == "" || r.Checks[i].Title == "" {
			t.Errorf("check %d = %+v, want %s with a title and message", i, r.Checks[i], name)
		}
	}
	if result(r, CheckOVNChassis).Result != NotChecked || result(r, CheckClock).Result != NotChecked {
		t.Error("OVN chassis and clock must be NOT_CHECKED")
	}
	if len(pub.events) != len(want)+1 {
		t.Fatalf("%d events published, want one per check and the verdict", len(pub.events))
	}
	last := pub.events[len(pub.events)-1]
	if len(last.Checks) != 0 || last.Verdict != Admissible || last.RunID != r.RunID {
		t.Fatalf("last event %+v", last)
	}
}

func TestOfflineMemberFails(t *testing.T) {
	f := healthy()
	f.members[1].Status, f.members[1].Message = "Offline", "No heartbeat for 25s"
	f.versionErr = map[string]error{"node-3": apperr.New(apperr.Unavailable, "member unreachable")}
	r, _ := run(t, f, nil, nil)
	if r.Verdict != Blocked || result(r, CheckOnline).Result != Fail || !strings.Contains(result(r, CheckOnline).Message, "No heartbeat") {
		t.Fatalf("%+v", r.Checks)
	}
	if result(r, CheckIncusVersion).Result != Fail || result(r, CheckKernel).Result != Fail {
		t.Fatal("versions that could not be read must fail, not pass")
	}
}

func TestVersions(t *testing.T) {
	cases := []struct {
		member, cluster membership.Version
		want            Result
		says            string
	}{
		{membership.Version{Incus: "6.0.4", APIExtensions: 450}, membership.Version{Incus: "6.0.4", APIExtensions: 450}, Pass, "as the cluster"},
		{membership.Version{Incus: "6.0.3", APIExtensions: 449}, membership.Version{Incus: "6.0.4", APIExtensions: 450}, Fail, "install exactly 6.0.4"},
		{membership.Version{Incus: "5.0.2", APIExtensions: 400}, membership.Version{Incus: "6.0.4", APIExtensions: 450}, Fail, "different major version"},
		{membership.Version{Incus: "6.0.4", APIExtensions: 449}, membership.Version{Incus: "6.0.4", APIExtensions: 450}, Fail, "API extensions"},
	}
	for _, c := range cases {
		got := incusVersion(c.member, nil, c.cluster, nil)
		if got.Result != c.want || !strings.Contains(got.Message, c.says) {
			t.Errorf("member %v cluster %v: %s %q", c.member, c.cluster, got.Result, got.Message)
		}
	}
	if got := incusVersion(membership.Version{}, nil, membership.Version{}, errors.New("boom")); got.Result != Fail {
		t.Error("an unreadable cluster version must fail")
	}
}

func TestKernels(t *testing.T) {
	c := &Checker{}
	for release, want := range map[string]Result{
		"6.12.0": Pass, "6.12.8-amd64": Pass, "6.18.44-fc-v857": Pass, "7.0.1": Pass,
		"6.11.9": Fail, "6.1.0-28-amd64": Fail, "5.15.0-91-generic": Fail, "garbage": Fail, "": Fail,
	} {
		if got := c.kernel(membership.Version{Kernel: release}, nil); got.Result != want {
			t.Errorf("kernel %q: %s (%s)", release, got.Result, got.Message)
		}
	}
	c.MinKernel = [2]int{6, 1}
	if got := c.kernel(membership.Version{Kernel: "6.1.0-28-amd64"}, nil); got.Result != Pass {
		t.Errorf("configured minimum not used: %s", got.Message)
	}
}

func TestArchitectures(t *testing.T) {
	f := healthy()
	f.members[1].Architecture = "aarch64"
	r, _ := run(t, f, nil, nil)
	if c := result(r, CheckArchitecture); c.Result != Warn || !strings.Contains(c.Message, "first aarch64 member") {
		t.Fatalf("first of a new architecture: %+v", c)
	}
	if r.Verdict != Admissible {
		t.Fatal("a warning must not block admission")
	}
	f.members = append(f.members, membership.Member{Name: "m2", Architecture: "aarch64", Status: "Online"})
	r, _ = run(t, f, nil, nil)
	if c := result(r, CheckArchitecture); c.Result != Pass {
		t.Fatalf("second aarch64 member: %+v", c)
	}
	// The cluster's only member (run.sh's m1): nothing to compare with, and no empty
	// list of others in its message ("… the other members ()").
	f = healthy()
	f.members = f.members[1:2]
	r, _ = run(t, f, nil, nil)
	if c := result(r, CheckArchitecture); c.Result != Pass || strings.Contains(c.Message, "()") || !strings.Contains(c.Message, "only member") {
		t.Fatalf("the only member: %+v", c)
	}
}

func TestPoolsAndNetworksMustBeCreatedOnTheMember(t *testing.T) {
	f := healthy()
	f.pools["fast"] = "Pending"
	f.networks["uplink"] = "Created"
	f.networks["storage-net"] = "Unknown"
	r, _ := run(t, f, nil, nil)
	if c := result(r, CheckStoragePools); c.Result != Fail || !strings.Contains(c.Message, "fast (Pending)") || strings.Contains(c.Message, "local") {
		t.Fatalf("pools: %+v", c)
	}
	if c := result(r, CheckNetworks); c.Result != Fail || !strings.Contains(c.Message, "storage-net (Unknown)") {
		t.Fatalf("networks: %+v", c)
	}
	if r.Verdict != Blocked {
		t.Fatal("not blocked")
	}
}

type fakeMAAS struct {
	status int
	label  string
	err    error
}

func (f fakeMAAS) TestingStatus(context.Context, string) (int, string, error) {
	return f.status, f.label, f.err
}

func TestHardwareTests(t *testing.T) {
	maasRec := &machines.Record{Name: "node-3", Provisioner: machines.MAAS, MAASSystemID: "abc123"}
	cases := []struct {
		hw   HardwareTests
		rec  *machines.Record
		want Result
	}{
		{fakeMAAS{status: 2, label: "Passed"}, maasRec, Pass},
		{fakeMAAS{status: 3, label: "Failed"}, maasRec, Fail},
		{fakeMAAS{status: 4, label: "Timed out"}, maasRec, Fail},
		{fakeMAAS{status: 5, label: "Aborted"}, maasRec, Fail},
		{fakeMAAS{status: 1, label: "Running"}, maasRec, Fail},
		{fakeMAAS{status: 0, label: "Pending"}, maasRec, Fail},
		{fakeMAAS{status: 6, label: "Degraded"}, maasRec, Warn},
		{fakeMAAS{status: -1, label: "Unknown"}, maasRec, Warn},
		{fakeMAAS{err: apperr.New(apperr.Unavailable, "MAAS unreachable")}, maasRec, Skipped},
		{fakeMAAS{err: apperr.New(apperr.NotFound, "no such machine")}, maasRec, Fail},
		{nil, maasRec, Skipped},
		{fakeMAAS{status: 3}, &machines.Record{Name: "node-3", Provisioner: machines.Manual}, Skipped},
	}
	for i, c := range cases {
		r, _ := run(t, healthy(), c.rec, c.hw)
		if got := result(r, CheckHardwareTests); got.Result != c.want || got.Message == "" {
			t.Errorf("case %d (%+v): %s %q", i, c.hw, got.Result, got.Message)
		}
		if (c.want == Fail) != (r.Verdict == Blocked) {
			t.Errorf("case %d: verdict %s", i, r.Verdict)
		}
	}
}

func TestChecksAskIncusAConstantNumberOfTimes(t *testing.T) {
	calls := func(members int) int {
		f := healthy()
		for i := 0; i < members; i++ {
			f.members = append(f.members, membership.Member{Name: fmt.Sprintf("x%d", i), Status: "Online", Architecture: "x86_64"})
		}
		run(t, f, nil, nil)
		return f.calls
	}
	if a, b := calls(1), calls(200); a != b {
		t.Fatalf("Incus calls grow with members: %d for 3 members, %d for 202", a, b)
	}
}

func TestNotAMemberIsAClearError(t *testing.T) {
	c := &Checker{Ports: portsOf[Incus](healthy()), Clusters: testClusters}
	_, err := c.Run(context.Background(), "node-9", nil, TriggerReport)
	if !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), "not an Incus member of cluster default yet") {
		t.Fatalf("%v", err)
	}
}

type fakeProfiles map[string]*hardware.Profile

func (f fakeProfiles) Profile(_ context.Context, name string) (*hardware.Profile, error) {
	if name == "broken" {
		return nil, apperr.New(apperr.Unavailable, "the database is unreachable")
	}
	return f[name], nil
}

type fakeInventory struct {
	inv hardware.Inventory
	err error
}

func (f fakeInventory) HardwareInventory(context.Context, string) (hardware.Inventory, error) {
	return f.inv, f.err
}

func TestHardwareProfileIsComparedWithMAASAndIncus(t *testing.T) {
	gen2, err := hardware.Declaration{Name: "gen2", Architecture: "amd64", MinCPUCores: 32, MinMemoryMiB: 131072,
		MinDisks: 2, MinDiskSizeGB: 960, MinNICs: 2, MinNICSpeedMbps: 25000}.Profile()
	if err != nil {
		t.Fatal(err)
	}
	profiles := fakeProfiles{"gen2": &gen2}
	maasInv := func() hardware.Inventory {
		return hardware.Inventory{Architecture: "amd64/generic", CPUCores: 32, MemoryMiB: 131072,
			Disks: []hardware.Disk{{Name: "sda", SizeBytes: 960_197_124_096}, {Name: "sdb", SizeBytes: 960_197_124_096}},
			NICs:  []hardware.NIC{{Name: "eno1", SpeedMbps: 25000}, {Name: "eno2", SpeedMbps: 25000}}}
	}
	maasRec := func(profile string) *machines.Record {
		return &machines.Record{Name: "node-3", Provisioner: machines.MAAS, MAASSystemID: "abc123", HardwareProfile: profile}
	}
	check := func(f *fakeIncus, rec *machines.Record, inv MAASInventory) (*Report, Check, Check) {
		t.Helper()
		c := &Checker{Ports: portsOf[Incus](f), Clusters: testClusters, MAAS: fakeMAAS{status: 2, label: "Passed"}, Profiles: profiles, MAASInventory: inv}
		r, err := c.Run(context.Background(), "node-3", rec, TriggerReport)
		if err != nil {
			t.Fatal(err)
		}
		return r, result(r, CheckProfileMAAS), result(r, CheckProfileIncus)
	}

	// No profile: nothing to compare, and nothing asked of Incus for it.
	f := healthy()
	r, m, i := check(f, maasRec(""), fakeInventory{inv: maasInv()})
	if m.Result != Skipped || i.Result != Skipped || !strings.Contains(m.Message, "no hardware profile") || r.Verdict != Admissible {
		t.Fatalf("no profile: %+v %+v", m, i)
	}
	withoutProfile := f.calls

	f = healthy()
	r, m, i = check(f, maasRec("gen2"), fakeInventory{inv: maasInv()})
	if m.Result != Pass || i.Result != Pass || r.Verdict != Admissible || !strings.Contains(m.Message, "MAAS reports what profile \"gen2\" wants") ||
		!strings.Contains(i.Message, "Incus reports what profile \"gen2\" wants") {
		t.Fatalf("a machine that meets its profile: %+v %+v", m, i)
	}
	if f.calls != withoutProfile+1 {
		t.Fatalf("a profile costs %d more Incus calls, want 1 (the member's resources)", f.calls-withoutProfile)
	}

	// MAAS inventoried fewer cores than the profile wants: FAIL with both values.
	small := maasInv()
	small.CPUCores = 16
	r, m, i = check(healthy(), maasRec("gen2"), fakeInventory{inv: small})
	if m.Result != Fail || i.Result != Pass || r.Verdict != Blocked || !strings.Contains(m.Message, "wants at least 32 CPU cores, MAAS reports 16 CPU cores") {
		t.Fatalf("MAAS shortfall: %+v %+v", m, i)
	}
	// Incus sees a disk fewer (one died since commissioning): FAIL on the Incus half.
	f = healthy()
	f.hw.Disks = f.hw.Disks[:1]
	r, m, i = check(f, maasRec("gen2"), fakeInventory{inv: maasInv()})
	if m.Result != Pass || i.Result != Fail || r.Verdict != Blocked || !strings.Contains(i.Message, "Incus reports 1 disk of at least 960 GB (nvme0n1 3840 GB)") {
		t.Fatalf("Incus shortfall: %+v %+v", m, i)
	}
	// A NIC whose speed Incus cannot tell: a warning, not a block.
	f = healthy()
	f.hw.NICs[1].SpeedMbps = 0
	r, _, i = check(f, maasRec("gen2"), fakeInventory{inv: maasInv()})
	if i.Result != Warn || r.Verdict != Admissible || !strings.Contains(i.Message, "unknown speed") {
		t.Fatalf("unknown speed: %+v", i)
	}
	// MAAS unreachable: its half is skipped, Incus's still compared.
	r, m, i = check(healthy(), maasRec("gen2"), fakeInventory{err: apperr.New(apperr.Unavailable, "MAAS could not be reached")})
	if m.Result != Skipped || !strings.Contains(m.Message, "could not be reached") || i.Result != Pass || r.Verdict != Admissible {
		t.Fatalf("MAAS unreachable: %+v %+v", m, i)
	}
	_, m, _ = check(healthy(), maasRec("gen2"), fakeInventory{err: apperr.New(apperr.NotFound, "MAAS knows no such machine")})
	if m.Result != Fail {
		t.Fatalf("MAAS error: %+v", m)
	}
	_, m, _ = check(healthy(), maasRec("gen2"), fakeInventory{})
	if m.Result != Fail || !strings.Contains(m.Message, "commission it") {
		t.Fatalf("no inventory yet: %+v", m)
	}
	_, m, i = check(healthy(), maasRec("gen2"), nil)
	if m.Result != Skipped || !strings.Contains(m.Message, "not configured") || i.Result != Pass {
		t.Fatalf("no MAAS: %+v %+v", m, i)
	}
	// A MANUAL machine has no MAAS inventory; Incus's view still counts.
	f = healthy()
	f.hw.Architecture = "aarch64"
	_, m, i = check(f, &machines.Record{Name: "node-3", Provisioner: machines.Manual, HardwareProfile: "gen2"}, fakeInventory{inv: maasInv()})
	if m.Result != Skipped || i.Result != Fail || !strings.Contains(i.Message, "wants x86_64, Incus reports aarch64") {
		t.Fatalf("MANUAL machine: %+v %+v", m, i)
	}
	// Failures to read are failures, never a pass.
	f = healthy()
	f.hwErr = apperr.New(apperr.Unavailable, "member unreachable")
	_, _, i = check(f, maasRec("gen2"), fakeInventory{inv: maasInv()})
	if i.Result != Fail || !strings.Contains(i.Message, "member unreachable") {
		t.Fatalf("Incus error: %+v", i)
	}
	for _, name := range []string{"broken", "gone"} {
		_, m, i = check(healthy(), maasRec(name), fakeInventory{inv: maasInv()})
		if m.Result != Fail || i.Result != Fail {
			t.Fatalf("profile %s: %+v %+v", name, m, i)
		}
	}
}

// A result that comes from a failed read is marked inconclusive (drift keeps what it knew),
// while admission still counts it; results about the machine itself are conclusive.
func TestResultsFromFailedReadsAreInconclusive(t *testing.T) {
	r, _ := run(t, healthy(), nil, nil)
	for _, c := range r.Checks {
		if c.Inconclusive {
			t.Errorf("healthy member: %s inconclusive", c.Name)
		}
	}
	f := healthy()
	f.versionErr = map[string]error{"node-3": apperr.New(apperr.Unavailable, "no answer within 10s")}
	f.hwErr = apperr.New(apperr.FailedPrecondition, "Incus refused")
	rec := &machines.Record{Name: "node-3", Provisioner: machines.MAAS, MAASSystemID: "abc123", HardwareProfile: "gen2"}
	c := &Checker{Ports: portsOf[Incus](f), Clusters: testClusters, MAAS: fakeMAAS{err: apperr.New(apperr.Unavailable, "MAAS unreachable")},
		Profiles:      fakeProfiles{"gen2": {Name: "gen2", Architecture: "x86_64", MinCPUCores: 8}},
		MAASInventory: fakeInventory{err: apperr.New(apperr.NotFound, "no such machine")}}
	r, err := c.Run(context.Background(), "node-3", rec, TriggerReport)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Result{CheckIncusVersion: Fail, CheckKernel: Fail, CheckHardwareTests: Skipped,
		CheckProfileMAAS: Fail, CheckProfileIncus: Fail} {
		if got := result(r, name); got.Result != want || !got.Inconclusive {
			t.Errorf("%s: %s inconclusive=%v (%s)", name, got.Result, got.Inconclusive, got.Message)
		}
	}
	if r.Verdict != Blocked {
		t.Fatal("failed reads must still block admission")
	}
	if got := result(r, CheckOnline); got.Inconclusive {
		t.Error("online is read from the member list, which answered")
	}
	// A pool whose status could not be read is inconclusive only when no pool is known bad.
	unread := statusCheck(Check{}, "storage pool", []string{"a", "b"}, func(n string) (string, error) {
		if n == "a" {
			return "", errors.New("timeout")
		}
		return "Created", nil
	})
	bad := statusCheck(Check{}, "storage pool", []string{"a", "b"}, func(n string) (string, error) {
		if n == "a" {
			return "", errors.New("timeout")
		}
		return "Pending", nil
	})
	if unread.Result != Fail || !unread.Inconclusive || bad.Result != Fail || bad.Inconclusive {
		t.Fatalf("unread %+v, bad %+v", unread, bad)
	}
}
