package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// boot is what running a machine's user data gave.
type boot struct {
	systemID string
	output   string
	err      error
}

// ipStandIn answers the one iproute2 question the user data asks. Every lab "machine" is
// an incusd on the host's loopback, so the host's routing table would name 127.0.0.1 as
// the source towards a member; a real machine's table names the machine's own address,
// which is what this answers with (and nothing else).
const ipStandIn = `#!/bin/sh
if [ $# -eq 4 ] && [ "$1 $2 $3" = "-o route get" ]; then
	printf '%%s dev lo src %s uid 0 \\    cache <local> \n' "$4"
	exit 0
fi
echo "ip (lab stand-in): unexpected arguments: $*" >&2
exit 2
`

// cloudInit runs user data as cloud-init runs a shell-script part on the machine's
// first boot: as root, executed by its #! line, with no terminal on standard input, in
// a directory of its own. The machine is the lab daemon host: its incus CLI reaches that
// daemon (INCUS_DIR), and its routing table answers with its own address.
func cloudInit(ctx context.Context, dir string, userData []byte, lab *incuslab.Cluster, host *incuslab.Member) (string, error) {
	bin, tmp := filepath.Join(dir, "bin"), filepath.Join(dir, "tmp")
	for _, d := range []string{bin, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "ip"), fmt.Appendf(nil, ipStandIn, host.Host()), 0o755); err != nil {
		return "", err
	}
	part := filepath.Join(dir, "part-001")
	if err := os.WriteFile(part, userData, 0o700); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, part)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + dir, "TMPDIR=" + tmp, "LANG=C.UTF-8",
	}, lab.Env(host)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func checkNamed(t *testing.T, checks []client.AdmissionReportFieldsChecksAdmissionCheck, name string) client.AdmissionCheckFields {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c.AdmissionCheckFields
		}
	}
	t.Fatalf("no %s check in %+v", name, checks)
	return client.AdmissionCheckFields{}
}

func intp(v int) *int { return &v }

// The MAAS path run whole on one machine: register from MAAS, commission with hardware
// tests, declare and assign a hardware profile, install (MAAS deploys; the machine boots
// and runs its user data, which joins the cluster and holds the member), HELD seen through
// the generated client, admission reading MAAS's test results and comparing the profile
// with MAAS's inventory and Incus's view, admit, release refused while a member, remove,
// release. Nothing in this test takes the join token out of the user data.
func TestMAASPathRunsWholeOnOneMachine(t *testing.T) {
	parallel(t, lasts(21))
	lab := incuslab.Start(t, 1)
	ctx := t.Context()

	// Incus will see the lab host's own hardware on the new member; MAAS a big server.
	res, err := lab.Client(t, lab.Members[0]).Resources(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	arch, ok := hardware.NormalizeArchitecture(res.Architecture)
	if !ok {
		t.Fatalf("this host's architecture %q is not one profiles know", res.Architecture)
	}
	maasArch := map[string]string{"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "i686": "i386", "armv7l": "armhf"}[arch]
	if maasArch == "" {
		maasArch = arch
	}
	const uuid = "4c4c4544-0042-3510-8052-c7c04f4e0a0a"
	m := producttest.StartMAAS(t, sim.Fixture{
		Config: map[string]any{"enable_disk_erasing_on_release": false, "default_distro_series": "noble"},
		Machines: []sim.MachineSpec{{
			SystemID: "pth001", Hostname: "node-a", Status: sim.StatusReady, PowerType: "ipmi", HardwareUUID: uuid,
			Architecture: maasArch + "/generic", CPUCount: 32, Memory: 131072,
			Disks:      []sim.DiskSpec{{Name: "sda", SizeBytes: 960_197_124_096}, {Name: "sdb", SizeBytes: 960_197_124_096}},
			Interfaces: []sim.InterfaceSpec{{Name: "eno1", LinkSpeed: 25000}, {Name: "eno2", LinkSpeed: 25000}},
		}},
	})
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	x := &maasEnv{maas: m, enrolled: &enrolled{lab: lab, e: e, admin: admin, inc: lab.Client(t, lab.Members[0]),
		gql: func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }}}
	gc := client.New(e.Base+"/graphql", admin, nil)

	// The machine MAAS deploys: a fresh incusd, booted by the simulator with its user data.
	host := lab.StartUnjoined(t, "node-a")
	boots := make(chan boot, 1)
	bootDir := t.TempDir()
	m.OnDeploy(func(systemID string, userData []byte) {
		out, err := cloudInit(context.Background(), filepath.Join(bootDir, systemID), userData, lab, host)
		boots <- boot{systemID, out, err}
	})

	// Register from MAAS: the hardware UUID is copied.
	if r := x.register(t, "node-a", "MAAS", "pth001"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	// Commission with a hardware test; it passes.
	r := x.gql(`mutation { commissionMachine(input: {systemId: "pth001", tests: ["smartctl-validate"]}) { maas { status } machine { name } } }`, nil)
	if len(r.Errors) > 0 || r.Data["commissionMachine"].(map[string]any)["machine"].(map[string]any)["name"] != "node-a" {
		t.Fatalf("commission: %+v %v", r.Errors, r.Data)
	}
	m.Clock.Advance(time.Minute) // commissioning done, tests running
	m.Clock.Advance(time.Minute) // tests passed
	mm := x.must(t, `{ machine(name: "node-a") { phase maas { status testingStatus cpuCount } } }`, nil)["machine"].(map[string]any)
	if fmt.Sprint(mm) != "map[maas:map[cpuCount:32 status:Ready testingStatus:Passed] phase:REGISTERED]" {
		t.Fatalf("after commissioning: %v", mm)
	}

	// Two profiles: one this machine meets (within what MAAS and Incus both report), one
	// wanting more cores than it has. The second is assigned.
	fits := client.SetHardwareProfileInput{Profile: "lab-fit", Architecture: arch, MinCpuCores: intp(min(res.CPUs, 32)),
		MinMemoryMiB: intp(int(min(res.MemoryBytes>>20, 131072)) / 2)}
	if len(res.Disks) > 0 {
		fits.MinDisks, fits.MinDiskSizeGB = intp(1), intp(int(min(res.Disks[0].SizeBytes/1e9, 960)))
	}
	if len(res.NetworkCards) > 0 {
		fits.MinNics = intp(1)
	}
	if _, err := client.SetHardwareProfile(ctx, gc, fits); err != nil {
		t.Fatal(err)
	}
	tooBig := fits
	tooBig.Profile, tooBig.MinCpuCores = "compute-large", intp(64)
	if _, err := client.SetHardwareProfile(ctx, gc, tooBig); err != nil {
		t.Fatal(err)
	}
	as, err := client.AssignHardwareProfile(ctx, gc, client.AssignHardwareProfileInput{Machine: "node-a", Profile: "compute-large"})
	if err != nil || as.AssignHardwareProfile.Machine.HardwareProfile == nil || as.AssignHardwareProfile.Machine.HardwareProfile.MinCpuCores != 64 ||
		as.AssignHardwareProfile.PreviousProfile != nil {
		t.Fatalf("assign: %+v %v", as, err)
	}

	// Install: MAAS deploys with the enrolment in the user data; the machine boots.
	r = x.gql(`mutation { installOperatingSystem(input: {name: "node-a", series: "noble"}) { machine { phase } maas { status } } }`, nil)
	if len(r.Errors) > 0 || fmt.Sprint(r.Data["installOperatingSystem"]) != "map[maas:map[status:Deploying] machine:map[phase:AWAITING_JOIN]]" {
		t.Fatalf("install: %+v %v", r.Errors, r.Data)
	}
	secret := tokenSecret(t, tokenIn(t, m.UserData("pth001")))
	select {
	case b := <-boots:
		t.Fatalf("%s booted while MAAS was still deploying it", b.systemID)
	default:
	}
	m.Clock.Advance(time.Minute) // deployed: first boot
	var b boot
	select {
	case b = <-boots:
	case <-time.After(4 * time.Minute):
		t.Fatal("the deployed machine did not boot")
	}
	if b.err != nil || b.systemID != "pth001" || !strings.Contains(b.output, "held out of automatic placement") {
		t.Fatalf("the user data on first boot: %v\n%s", b.err, b.output)
	}
	if strings.Contains(b.output, secret) {
		t.Fatal("the user data printed the join token's secret")
	}
	t.Logf("first boot of %s ran its user data:\n%s", b.systemID, b.output)
	lab.AddMember(host)

	// HELD reaches a client of the API: polled through the generated client.
	var held *client.MachineMachine
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		got, err := client.Machine(ctx, gc, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Machine != nil && got.Machine.Phase == client.PhaseHeld {
			held = got.Machine
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-a never became HELD: %+v", got.Machine)
		}
	}
	if held.Member == nil || !held.Member.Held || held.Member.Status != client.MemberStatusOnline {
		t.Fatalf("held member %+v", held.Member)
	}

	// Admission: MAAS's hardware tests passed; the profile wants more cores than the
	// machine has, and both sources say so, live to a watcher and in the report.
	events, wsErrs := watchAdmission(ctx, t, e.Base, admin, "node-a")
	rep, err := client.AdmissionReport(ctx, gc, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	pushed := map[string]client.CheckResult{}
	for verdict := false; !verdict; {
		select {
		case ev := <-events:
			if ev.Errors != nil {
				t.Fatal(ev.Errors)
			}
			for _, c := range ev.Data.AdmissionChecks.Checks {
				pushed[c.Name] = c.Result
			}
			verdict = ev.Data.AdmissionChecks.Verdict != nil
		case err := <-wsErrs:
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatalf("pushed so far: %v", pushed)
		}
	}
	if pushed["hardware-tests"] != client.CheckResultPass || pushed["hardware-profile-maas"] != client.CheckResultFail ||
		pushed["hardware-profile-incus"] != client.CheckResultFail || len(pushed) != len(rep.AdmissionReport.Checks) {
		t.Fatalf("pushed %v", pushed)
	}
	checks := rep.AdmissionReport.Checks
	if c := checkNamed(t, checks, "hardware-tests"); c.Result != client.CheckResultPass {
		t.Fatalf("hardware tests: %+v", c)
	}
	if c := checkNamed(t, checks, "hardware-profile-maas"); c.Result != client.CheckResultFail ||
		!strings.Contains(c.Message, `profile "compute-large" wants at least 64 CPU cores, MAAS reports 32 CPU cores`) {
		t.Fatalf("profile against MAAS: %+v", c)
	}
	if c := checkNamed(t, checks, "hardware-profile-incus"); c.Result != client.CheckResultFail ||
		!strings.Contains(c.Message, fmt.Sprintf("wants at least 64 CPU cores, Incus reports %d CPU cores", res.CPUs)) {
		t.Fatalf("profile against Incus: %+v", c)
	}
	if rep.AdmissionReport.Verdict != client.AdmissionVerdictBlocked {
		t.Fatalf("verdict %s", rep.AdmissionReport.Verdict)
	}
	admit := `mutation { admitMember(input: {name: "node-a"}) { machine { phase } } }`
	r = x.gql(admit, nil)
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "MAAS reports 32 CPU cores") ||
		fmt.Sprint(r.Errors[0].Extensions["details"].(map[string]any)["failedChecks"]) != "[hardware-profile-maas hardware-profile-incus]" {
		t.Fatalf("admit against a profile the machine does not meet: %+v", r.Errors)
	}
	if x.machine(t, "node-a")["phase"] != "HELD" {
		t.Fatal("a refused admission changed the member")
	}
	// MAAS unreachable: its half is skipped; Incus's view still blocks.
	m.SetFault(sim.FaultUnavailable)
	rep, err = client.AdmissionReport(ctx, gc, "node-a")
	m.SetFault(sim.FaultNone)
	if err != nil {
		t.Fatal(err)
	}
	if c := checkNamed(t, rep.AdmissionReport.Checks, "hardware-profile-maas"); c.Result != client.CheckResultSkipped || !strings.Contains(c.Message, "could not be reached") {
		t.Fatalf("profile against an unreachable MAAS: %+v", c)
	}
	if c := checkNamed(t, rep.AdmissionReport.Checks, "hardware-profile-incus"); c.Result != client.CheckResultFail || rep.AdmissionReport.Verdict != client.AdmissionVerdictBlocked {
		t.Fatalf("profile against Incus with MAAS unreachable: %+v %s", c, rep.AdmissionReport.Verdict)
	}

	// The profile was wrong: fix it, and the machine is admitted.
	fixed := tooBig
	fixed.MinCpuCores = fits.MinCpuCores
	if d, err := client.SetHardwareProfile(ctx, gc, fixed); err != nil || d.SetHardwareProfile.Previous == nil ||
		d.SetHardwareProfile.Previous.MinCpuCores != 64 || fmt.Sprint(d.SetHardwareProfile.Profile.Machines) != "[node-a]" {
		t.Fatalf("fix the profile: %+v %v", d, err)
	}
	if d := x.must(t, admit, nil); fmt.Sprint(d["admitMember"]) != "map[machine:map[phase:ADMITTED]]" {
		t.Fatalf("admit: %v", d)
	}
	ev := e.Scalar(`SELECT details::text FROM audit_events WHERE action = 'admitMember' AND outcome = 'SUCCEEDED'`).(string)
	if !strings.Contains(ev, `"hardware-profile-maas"`) || !strings.Contains(ev, `MAAS reports what profile \"compute-large\" wants`) {
		t.Fatalf("admission audit details: %s", ev)
	}

	// Release is refused while node-a is a member; after removing it, MAAS releases it.
	release := `mutation { releaseMachine(input: {systemId: "pth001"}) { maas { status } } }`
	if r := x.gql(release, nil); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "remove the member first") {
		t.Fatalf("release a member: %+v", r.Errors)
	}
	if s, _ := m.Machine("pth001"); s.StatusName != "Deployed" || s.LastRelease.Requested {
		t.Fatalf("MAAS machine after a refused release: %+v", s)
	}
	if d := x.must(t, `mutation { removeMember(input: {name: "node-a"}) { machine { phase } } }`, nil); fmt.Sprint(d) != "map[removeMember:map[machine:map[phase:REGISTERED]]]" {
		t.Fatalf("remove: %v", d)
	}
	if d := x.must(t, release, nil); fmt.Sprint(d) != "map[releaseMachine:map[maas:map[status:Releasing]]]" {
		t.Fatalf("release: %v", d)
	}
	m.Clock.Advance(time.Minute)
	if s, _ := m.Machine("pth001"); s.StatusName != "Ready" || s.Owner != "" || s.LastRelease.Erase {
		t.Fatalf("MAAS machine after release: %+v", s)
	}

	// The join token went to MAAS in the user data only, and is nowhere else.
	for what, s := range map[string]string{"database": e.DB.Dump(t), "server log": e.Logs.String()} {
		if strings.Contains(s, secret) {
			t.Errorf("the join token's secret is in the %s", what)
		}
	}
	checkNoMAASKey(t, x)
	onlyMachineSteps(t, x)
}

// tokenIn finds the join token in user data, only to check it leaks nowhere else.
func tokenIn(t *testing.T, userData []byte) string {
	t.Helper()
	for _, m := range tokenLine.FindAllStringSubmatch(string(userData), -1) {
		if m[1] != "" {
			return m[1]
		}
	}
	t.Fatal("no join token in the user data")
	return ""
}
