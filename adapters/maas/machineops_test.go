package maas_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestCommissionFlowRevealsHardware(t *testing.T) {
	e := newEnv(t, withMachines(neverCommissioned(spec("new001", sim.StatusNew, "ipmi"))))
	m, err := e.client.Machine(ctx, "new001")
	if err != nil {
		t.Fatal(err)
	}
	if m.TestingStatus != maas.ScriptStatusUnknown || m.TestingStatusName != "Unknown" ||
		m.CommissioningStatus != maas.ScriptStatusUnknown {
		t.Fatalf("never-commissioned machine: testing %d %q, commissioning %d", m.TestingStatus, m.TestingStatusName, m.CommissioningStatus)
	}

	m, err = e.client.Commission(ctx, "new001", maas.CommissionOptions{SkipNetworking: true, TestingScripts: []string{"smartctl-validate", "memtester"}})
	if err != nil {
		t.Fatal(err)
	}
	// As in a real lab: while Commissioning, no CPUs, memory or hardware UUID.
	if m.Status != maas.StatusCommissioning || m.CPUCount != 0 || m.MemoryMiB != 0 || m.HardwareUUID != "" || m.StorageMB != 0 {
		t.Fatalf("commissioning machine shows hardware: %+v", m)
	}
	if m.HardwareInfo.SystemVendor != "Unknown" || m.PowerState != maas.PowerOn {
		t.Fatalf("hardware_info %+v, power %s", m.HardwareInfo, m.PowerState)
	}
	r := e.lastRequest("commission")
	if got := r.Form["testing_scripts"]; len(got) != 1 || got[0] != "smartctl-validate,memtester" {
		t.Fatalf("testing_scripts sent as %q, want one comma-separated value", got)
	}
	if r.Form.Get("skip_networking") != "true" || r.Form.Has("enable_ssh") || r.Form.Has("skip_storage") {
		t.Fatalf("commission form %v", r.Form)
	}

	e.clock.Advance(testDurations.Commissioning)
	m, _ = e.client.Machine(ctx, "new001")
	if m.Status != maas.StatusTesting || m.CPUCount != 16 || m.MemoryMiB != 65536 || m.HardwareUUID == "" ||
		m.TestingStatus != maas.ScriptStatusRunning || m.CommissioningStatus != maas.ScriptStatusPassed {
		t.Fatalf("after commissioning: %+v", m)
	}
	e.clock.Advance(testDurations.Testing)
	m, _ = e.client.Machine(ctx, "new001")
	if m.Status != maas.StatusReady || m.TestingStatus != maas.ScriptStatusPassed || m.PowerState != maas.PowerOff {
		t.Fatalf("after tests: status %v testing %v power %v", m.Status, m.TestingStatus, m.PowerState)
	}
	if m.StorageMB != 960197.124 {
		t.Fatalf("storage %v, want decimal MB 960197.124", m.StorageMB)
	}
	if !slices.Equal(e.powerOffs, []string{"new001"}) {
		t.Fatalf("power-off hook calls %v", e.powerOffs)
	}
}

func TestCommissionWithoutTestsAndFailure(t *testing.T) {
	bad := spec("bad001", sim.StatusReady, "ipmi")
	bad.FailCommissioning = true
	e := newEnv(t, withMachines(spec("ok0001", sim.StatusReady, "ipmi"), bad))
	if _, err := e.client.Commission(ctx, "ok0001", maas.CommissionOptions{TestingScripts: []string{"none"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Commission(ctx, "bad001", maas.CommissionOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(testDurations.Commissioning)
	e.wantStatus("ok0001", sim.StatusReady)
	e.wantStatus("bad001", sim.StatusFailedCommissioning)
}

func TestCommissionStillCommissioningFixtureShowsNoHardware(t *testing.T) {
	e := newEnv(t, withMachines(spec("comm01", sim.StatusCommissioning, "ipmi")))
	m, err := e.client.Machine(ctx, "comm01")
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUCount != 0 || m.MemoryMiB != 0 || m.HardwareUUID != "" {
		t.Fatalf("%+v", m)
	}
}

func TestTestOutcomes(t *testing.T) {
	failing := spec("fail01", sim.StatusReady, "ipmi")
	failing.TestOutcomes = map[string]string{"memtester": "failed"}
	degraded := spec("degr01", sim.StatusReady, "ipmi")
	degraded.TestOutcomes = map[string]string{"smartctl-validate": "degraded"}
	e := newEnv(t, withMachines(failing, degraded,
		spec("brok01", sim.StatusBroken, "ipmi"),
		owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora"),
		spec("fcom01", sim.StatusFailedCommissioning, "ipmi"),
	))
	opts := maas.TestOptions{TestingScripts: []string{"smartctl-validate", "memtester"}}
	for _, id := range []string{"fail01", "degr01", "brok01", "depl01", "fcom01"} {
		if _, err := e.client.Test(ctx, id, opts); err != nil {
			t.Fatalf("test %s: %v", id, err)
		}
	}
	m, _ := e.client.Machine(ctx, "fail01")
	if m.TestingStatus != maas.ScriptStatusRunning {
		t.Fatalf("testing status while running: %v", m.TestingStatus)
	}
	e.clock.Advance(testDurations.Testing)

	e.wantStatus("fail01", sim.StatusFailedTesting)
	m, _ = e.client.Machine(ctx, "fail01")
	if m.TestingStatus != maas.ScriptStatusFailed || m.TestingStatusName != "Failed" || !strings.Contains(m.StatusMessage, "memtester") {
		t.Fatalf("failed run: %d %q %q", m.TestingStatus, m.TestingStatusName, m.StatusMessage)
	}
	// Degraded is not a failure: back to the previous state, status Degraded.
	e.wantStatus("degr01", sim.StatusReady)
	m, _ = e.client.Machine(ctx, "degr01")
	if m.TestingStatus != maas.ScriptStatusDegraded || m.TestingStatusName != "Degraded" {
		t.Fatalf("degraded run: %d %q", m.TestingStatus, m.TestingStatusName)
	}
	e.wantStatus("brok01", sim.StatusReady)    // Broken → Ready on pass
	e.wantStatus("depl01", sim.StatusDeployed) // previous state
	e.wantStatus("fcom01", sim.StatusFailedCommissioning)
	m, _ = e.client.Machine(ctx, "depl01")
	if m.PowerState != maas.PowerOn {
		t.Fatalf("deployed machine is %s after tests", m.PowerState)
	}
}

func TestTestScriptValidation(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora"), spec("rdy001", sim.StatusReady, "ipmi")))
	_, err := e.client.Test(ctx, "depl01", maas.TestOptions{TestingScripts: []string{"fio"}})
	wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest,
		"testing_scripts: Destructive tests may only be run on undeployed machines.")
	_, err = e.client.Test(ctx, "rdy001", maas.TestOptions{TestingScripts: []string{"nosuchtest"}})
	wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest,
		"testing_scripts: Select a valid choice. nosuchtest is not one of the available choices.")
	_, err = e.client.Test(ctx, "rdy001", maas.TestOptions{TestingScripts: []string{"none"}})
	wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest, "No testing scripts found!")
	// Tags select scripts too.
	if _, err := e.client.Test(ctx, "rdy001", maas.TestOptions{TestingScripts: []string{"cpu", "memory"}}); err != nil {
		t.Fatal(err)
	}
	// Client-side refusals never reach MAAS.
	before := len(e.sim.Requests())
	for _, bad := range [][]string{{}, {"a,b"}, {""}, {"has space"}} {
		if _, err := e.client.Test(ctx, "rdy001", maas.TestOptions{TestingScripts: bad}); err == nil {
			t.Fatalf("testing scripts %q accepted", bad)
		}
	}
	if len(e.sim.Requests()) != before {
		t.Fatal("invalid script lists were sent")
	}
}

func TestAllocateDeployRelease(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	m, err := e.client.Allocate(ctx, "k7qpwx", maas.AllocateOptions{Comment: "apelora enrolment"})
	if err != nil || m.Status != maas.StatusAllocated || m.Owner != "apelora" {
		t.Fatalf("allocate: %v %+v", err, m)
	}
	userData := []byte("#cloud-config\nruncmd:\n - echo join-token-goes-here | enrol\n")
	m, err = e.client.Deploy(ctx, "k7qpwx", maas.DeployOptions{DistroSeries: "ubuntu/24.04", UserData: userData, Comment: "enrol"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != maas.StatusDeploying || m.OSystem != "ubuntu" || m.DistroSeries != "noble" || m.PowerState != maas.PowerOn {
		t.Fatalf("deploy answer %+v", m)
	}
	if got := e.sim.UserData("k7qpwx"); string(got) != string(userData) {
		t.Fatalf("simulator stored user data %q", got)
	}
	r := e.lastRequest("deploy")
	if ud := r.Form.Get("user_data"); strings.Contains(ud, "join-token") || !strings.Contains(ud, "withheld") {
		t.Fatalf("recorded user_data %q", ud)
	}
	e.clock.Advance(testDurations.Deploying)
	e.wantStatus("k7qpwx", sim.StatusDeployed)
	_, err = e.client.Deploy(ctx, "k7qpwx", maas.DeployOptions{})
	wantMessage(t, err, http.StatusConflict, maas.ErrConflict, "Can't deploy a machine that is in the 'Deployed' state")

	m, err = e.client.Release(ctx, "k7qpwx", maas.ReleaseOptions{Comment: "done"})
	if err != nil || m.Status != maas.StatusReleasing {
		t.Fatalf("release: %v %v", err, m.Status)
	}
	r = e.lastRequest("release")
	if r.Form.Has("erase") || r.Form.Has("secure_erase") || r.Form.Has("quick_erase") {
		t.Fatalf("release without erase sent %v", r.Form)
	}
	e.clock.Advance(testDurations.Releasing)
	m, _ = e.client.Machine(ctx, "k7qpwx")
	if m.Status != maas.StatusReady || m.Owner != "" || m.OSystem != "" || m.PowerState != maas.PowerOff {
		t.Fatalf("after release %+v", m)
	}
	if e.sim.UserData("k7qpwx") != nil {
		t.Fatal("user data kept after release")
	}
	if s := e.snapshot("k7qpwx"); s.LastRelease.Erase || s.LastRelease.ConfigForced {
		t.Fatalf("release record %+v", s.LastRelease)
	}
}

func TestDeployRefusals(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("other1", sim.StatusAllocated, "ipmi"), "someone"), spec("rdy001", sim.StatusReady, "ipmi")))
	_, err := e.client.Deploy(ctx, "other1", maas.DeployOptions{})
	wantMessage(t, err, http.StatusConflict, maas.ErrConflict, "Can't allocate a machine belonging to another user.")
	_, err = e.client.Deploy(ctx, "rdy001", maas.DeployOptions{DistroSeries: "xenial"})
	ae := apiError(t, err, http.StatusBadRequest)
	if len(ae.Fields["distro_series"]) != 1 || !strings.HasPrefix(ae.Message, "distro_series: 'xenial' is not a valid distro_series.") {
		t.Fatalf("unsynced series: %v", err)
	}
	e.wantStatus("rdy001", sim.StatusReady) // refused deploys change nothing
}

func TestReleaseEraseFlagsAsSent(t *testing.T) {
	cases := []struct {
		name        string
		opts        maas.ReleaseOptions
		form        map[string]string
		eraseStatus bool
	}{
		{"erase", maas.ReleaseOptions{Erase: true}, map[string]string{"erase": "true", "secure_erase": "false", "quick_erase": "false"}, true},
		{"quick", maas.ReleaseOptions{Erase: true, QuickErase: true}, map[string]string{"erase": "true", "secure_erase": "false", "quick_erase": "true"}, true},
		{"secure", maas.ReleaseOptions{Erase: true, SecureErase: true}, map[string]string{"erase": "true", "secure_erase": "true", "quick_erase": "false"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withMachines(owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora")))
			m, err := e.client.Release(ctx, "depl01", tc.opts)
			if err != nil || m.Status != maas.StatusDiskErasing {
				t.Fatalf("release: %v, status %v", err, m.Status)
			}
			r := e.lastRequest("release")
			for k, v := range tc.form {
				if got := r.Form[k]; len(got) != 1 || got[0] != v {
					t.Fatalf("%s sent as %q, want %q (form %v)", k, got, v, r.Form)
				}
			}
			e.clock.Advance(testDurations.DiskErasing)
			e.wantStatus("depl01", sim.StatusReady)
			if s := e.snapshot("depl01"); !s.LastRelease.Erase || s.LastRelease.SecureErase != tc.opts.SecureErase || s.LastRelease.QuickErase != tc.opts.QuickErase {
				t.Fatalf("simulator saw %+v", s.LastRelease)
			}
		})
	}
	t.Run("erase modes need erase", func(t *testing.T) {
		e := newEnv(t, withMachines(owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora")))
		if _, err := e.client.Release(ctx, "depl01", maas.ReleaseOptions{SecureErase: true}); err == nil {
			t.Fatal("secure erase without erase accepted")
		}
		if n := e.sim.CountRequests("", "release"); n != 0 {
			t.Fatalf("%d release requests sent", n)
		}
	})
}

func TestReleaseErasesWhenMAASConfigSaysSo(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora")))
	on, err := e.client.GetConfigBool(ctx, "enable_disk_erasing_on_release")
	if err != nil || on {
		t.Fatalf("default config: %v %v", on, err)
	}
	e.sim.SetConfig("enable_disk_erasing_on_release", true)
	if on, err = e.client.GetConfigBool(ctx, "enable_disk_erasing_on_release"); err != nil || !on {
		t.Fatalf("config after set: %v %v", on, err)
	}
	r := e.lastRequest("get_config")
	if r.Method != http.MethodGet || r.Path != "/MAAS/api/2.0/maas/" || r.Form.Get("name") != "enable_disk_erasing_on_release" {
		t.Fatalf("get_config request %+v", r)
	}
	m, err := e.client.Release(ctx, "depl01", maas.ReleaseOptions{})
	if err != nil || m.Status != maas.StatusDiskErasing {
		t.Fatalf("release with erase config: %v %v", err, m.Status)
	}
	if s := e.snapshot("depl01"); !s.LastRelease.ConfigForced || s.LastRelease.Erase {
		t.Fatalf("release record %+v", s.LastRelease)
	}
	_, err = e.client.GetConfig(ctx, "no_such_setting")
	if !errors.Is(err, maas.ErrBadRequest) {
		t.Fatalf("unknown config: %v", err)
	}
}

func TestAbortFlows(t *testing.T) {
	e := newEnv(t, withMachines(
		neverCommissioned(spec("new001", sim.StatusNew, "ipmi")),
		spec("rdy001", sim.StatusReady, "ipmi"),
		owned(spec("alc001", sim.StatusAllocated, "ipmi"), "apelora"),
	))
	if _, err := e.client.Commission(ctx, "new001", maas.CommissionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Test(ctx, "rdy001", maas.TestOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Deploy(ctx, "alc001", maas.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]maas.Status{"new001": maas.StatusNew, "rdy001": maas.StatusReady, "alc001": maas.StatusAllocated} {
		m, err := e.client.Abort(ctx, id, "")
		if err != nil || m.Status != want {
			t.Fatalf("abort %s: %v, status %v want %v", id, err, m.Status, want)
		}
	}
	// The aborted runs never complete later.
	e.clock.Advance(testDurations.Commissioning + testDurations.Testing + testDurations.Deploying)
	e.wantStatus("new001", sim.StatusNew)
	e.wantStatus("rdy001", sim.StatusReady)
	e.wantStatus("alc001", sim.StatusAllocated)
	m, _ := e.client.Machine(ctx, "rdy001")
	if m.TestingStatus != maas.ScriptStatusUnknown {
		t.Fatalf("aborted results count: testing status %v", m.TestingStatus)
	}
}

func TestNotFoundAndValidation(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Machine(ctx, "nosuch")
	wantMessage(t, err, http.StatusNotFound, maas.ErrNotFound, "No Machine matches the given query.")
	if !strings.Contains(err.Error(), "/MAAS/api/2.0/machines/nosuch/") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %q lacks path or status", err)
	}
	_, err = e.client.PowerOff(ctx, "nosuch", maas.StopHard)
	if !errors.Is(err, maas.ErrNotFound) {
		t.Fatalf("power off unknown: %v", err)
	}
	for _, bad := range []string{"", "../users", "a/b", "x?op=y"} {
		if _, err := e.client.Machine(ctx, bad); err == nil || errors.As(err, new(*maas.APIError)) {
			t.Fatalf("system ID %q: %v", bad, err)
		}
	}
}

func TestMachinesListAndFilters(t *testing.T) {
	e := newEnv(t, withMachines(spec("aaaaaa", sim.StatusReady, "ipmi"), owned(spec("bbbbbb", sim.StatusDeployed, "manual"), "apelora"),
		spec("cccccc", sim.StatusBroken, "ipmi")))
	all, err := e.client.Machines(ctx, maas.MachineFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %v %d", err, len(all))
	}
	a := all[0]
	if a.SystemID != "aaaaaa" || a.Hostname != "host-aaaaaa" || a.FQDN != "host-aaaaaa.lab" || a.Domain != "lab" ||
		a.Zone != "az1" || a.Pool != "compute" || a.Architecture != "amd64/generic" || a.PowerType != "ipmi" ||
		!slices.Equal(a.Tags, []string{"incus"}) || !slices.Equal(a.IPAddresses, []string{"10.0.0.7"}) ||
		a.HardwareInfo.SystemVendor != "Dell Inc." || a.HardwareInfo.SystemSerial != "ABC123" || a.StatusName != "Ready" {
		t.Fatalf("decoded machine %+v", a)
	}
	got, err := e.client.Machines(ctx, maas.MachineFilter{SystemIDs: []string{"aaaaaa", "cccccc"}, Statuses: []maas.Status{maas.StatusBroken}})
	if err != nil || len(got) != 1 || got[0].SystemID != "cccccc" {
		t.Fatalf("filtered list: %v %+v", err, got)
	}
	r := e.lastRequest("")
	if !slices.Equal(r.Form["id"], []string{"aaaaaa", "cccccc"}) || !slices.Equal(r.Form["status"], []string{"broken"}) {
		t.Fatalf("filter sent as %v", r.Form)
	}
	if n := e.sim.CountRequests(http.MethodGet, ""); n != 2 {
		t.Fatalf("%d GET machines/ calls for two lists", n)
	}
	none, err := e.client.Machines(ctx, maas.MachineFilter{Zone: "nowhere"})
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("empty list: %v %#v", err, none)
	}
}
