package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

const (
	uuidA  = "4c4c4544-0042-3510-8052-b7c04f4e0001"
	uuidM2 = "4c4c4544-0042-3510-8052-b7c04f4e0002"
)

// maasFleet is a lab cluster of two members (m1, m2) and a MAAS that knows m2, a Ready
// machine node-a, a New one, and a Deployed one with manual power.
func maasFleet() sim.Fixture {
	return sim.Fixture{
		Config: map[string]any{"enable_disk_erasing_on_release": false, "default_distro_series": "noble"},
		Machines: []sim.MachineSpec{
			{SystemID: "aaaa01", Hostname: "node-a", Status: 4, PowerType: "ipmi", HardwareUUID: uuidA, CPUCount: 32, Memory: 131072,
				StorageBytes: 960197124096, LastTests: map[string]string{"smartctl-validate": "passed"}},
			{SystemID: "mmmm02", Hostname: "m2", Status: 6, PowerType: "ipmi", HardwareUUID: uuidM2, Owner: "apelora",
				OSystem: "ubuntu", DistroSeries: "noble", LastTests: map[string]string{"smartctl-validate": "passed"}},
			{SystemID: "nnnn03", Hostname: "node-new", Status: 0, PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e0003"},
			{SystemID: "dddd04", Hostname: "node-busy", Status: 6, PowerType: "manual", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e0004", Owner: "apelora"},
		},
	}
}

type maasEnv struct {
	*enrolled
	maas *producttest.MAASSim
}

func startMAASFleet(t *testing.T) *maasEnv {
	lab := incuslab.Start(t, 2)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	x := &enrolled{lab: lab, e: e, admin: admin, inc: lab.Client(t, lab.Members[0]),
		gql: func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }}
	return &maasEnv{enrolled: x, maas: m}
}

func (x *maasEnv) register(t *testing.T, name, provisioner, systemID string) *producttest.Response {
	t.Helper()
	in := map[string]any{"name": name, "provisioner": provisioner}
	if systemID != "" {
		in["maasSystemId"] = systemID
	}
	return x.gql(`mutation($in: RegisterMachineInput!) { registerMachine(input: $in) { machine { name phase record { hardwareUuid } } } }`, map[string]any{"in": in})
}

const fleetQuery = `{ fleet { sources { incus { configured available message } maas { configured available message } }
	machines { name phase warnings { code message } record { provisioner { kind } hardwareUuid } member { status }
	maas { systemId hostname status statusCode powerState powerType hardwareUuid testingStatus cpuCount } } } }`

func rows(d map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, m := range d["fleet"].(map[string]any)["machines"].([]any) {
		row := m.(map[string]any)
		out[row["name"].(string)] = row
	}
	return out
}

func TestFleetJoinsMAASRecordsAndMembers(t *testing.T) {
	parallel(t, lasts(11))
	x := startMAASFleet(t)

	r := x.register(t, "node-a", "MAAS", "aaaa01")
	if len(r.Errors) > 0 || r.Data["registerMachine"].(map[string]any)["machine"].(map[string]any)["record"].(map[string]any)["hardwareUuid"] != uuidA {
		t.Fatalf("register from MAAS: %+v %v", r.Errors, r.Data)
	}
	if r := x.register(t, "node-new", "MAAS", "nnnn03"); len(r.Errors) > 0 || r.Data["registerMachine"].(map[string]any)["machine"].(map[string]any)["record"].(map[string]any)["hardwareUuid"] != nil {
		t.Fatalf("register a New machine (no hardware UUID yet): %+v %v", r.Errors, r.Data)
	}
	if r := x.register(t, "node-x", "MAAS", "zzzz99"); r.Code() != "NOT_FOUND" {
		t.Fatalf("register an unknown system id: %+v", r.Errors)
	}
	if r := x.register(t, "node-b", "MAAS", "aaaa01"); r.Code() != "ALREADY_EXISTS" {
		t.Fatalf("register one system id twice: %+v", r.Errors)
	}
	if r := x.register(t, "node-manual", "MANUAL", ""); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}

	// One fleet query: one MAAS machine list and one Incus member list.
	x.maas.ResetRequests()
	before := strings.Count(x.e.Logs.String(), `"path":"/1.0/cluster/members"`)
	d := x.must(t, fleetQuery, nil)
	var lists, reads int
	for _, req := range x.maas.Requests() {
		switch {
		case req.Method == "GET" && strings.HasSuffix(req.Path, "/machines/"):
			lists++
		default:
			reads++
		}
	}
	if lists != 1 || reads != 0 {
		t.Fatalf("fleet query made %d MAAS list calls and %d other MAAS calls, want 1 and 0", lists, reads)
	}
	if n := strings.Count(x.e.Logs.String(), `"path":"/1.0/cluster/members"`) - before; n != 1 {
		t.Fatalf("fleet query made %d Incus member list calls, want 1", n)
	}
	src := d["fleet"].(map[string]any)["sources"].(map[string]any)
	if fmt.Sprint(src["maas"]) != "map[available:true configured:true message:ok]" || fmt.Sprint(src["incus"]) != "map[available:true configured:true message:ok]" {
		t.Fatalf("sources %v", src)
	}
	got := rows(d)
	want := map[string]string{"m1": "UNREGISTERED", "m2": "UNREGISTERED", "node-a": "REGISTERED", "node-manual": "REGISTERED", "node-new": "REGISTERED", "node-busy": "DISCOVERED"}
	for name, phase := range want {
		if got[name] == nil || got[name]["phase"] != phase {
			t.Errorf("%s: %v, want phase %s", name, got[name], phase)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows %v", got)
	}
	if m := got["m2"]; m["member"] == nil || m["maas"].(map[string]any)["status"] != "Deployed" {
		t.Errorf("m2 should carry both its member and its MAAS machine: %v", m)
	}
	if m := got["node-a"]["maas"].(map[string]any); m["systemId"] != "aaaa01" || m["testingStatus"] != "Passed" || m["powerType"] != "ipmi" {
		t.Errorf("node-a maas %v", m)
	}
	if got["node-new"]["maas"].(map[string]any)["hardwareUuid"] != nil || got["node-new"]["maas"].(map[string]any)["cpuCount"] != float64(0) {
		t.Errorf("a New machine shows hardware MAAS has not learnt yet: %v", got["node-new"]["maas"])
	}
	if got["node-manual"]["maas"] != nil {
		t.Errorf("a MANUAL record joined a MAAS machine: %v", got["node-manual"])
	}

	// The same rows for scripts, with the same authentication.
	rest := func(token string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, x.e.Base+"/api/v1/provisioners/maas/machines", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	if st, body := rest(x.admin); st != 200 || len(body["machines"].([]any)) != len(want) || body["sources"].(map[string]any)["maas"].(map[string]any)["available"] != true {
		t.Fatalf("REST: %d %v", st, body)
	}
	if st, body := rest(""); st != 401 || body["error"].(map[string]any)["code"] != "UNAUTHENTICATED" {
		t.Fatalf("REST without a token: %d %v", st, body)
	}
	if st, _ := rest(x.e.UncheckedIdentity("eraser", identity.HardwareDelete)); st != 403 {
		t.Fatalf("REST without view permission: %d", st)
	}

	// MAAS down: the query still answers and says which source failed.
	x.maas.SetFault(sim.FaultUnavailable)
	d = x.must(t, fleetQuery, nil)
	src = d["fleet"].(map[string]any)["sources"].(map[string]any)
	if m := src["maas"].(map[string]any); m["available"] != false || m["configured"] != true || !strings.Contains(m["message"].(string), "MAAS") {
		t.Fatalf("MAAS down: sources %v", src)
	}
	got = rows(d)
	if got["node-a"]["phase"] != "REGISTERED" || !strings.Contains(fmt.Sprint(got["node-a"]["warnings"]), "MAAS_UNAVAILABLE") || got["node-a"]["maas"] != nil {
		t.Fatalf("node-a with MAAS down: %v", got["node-a"])
	}
	if st, body := rest(x.admin); st != 200 || body["sources"].(map[string]any)["maas"].(map[string]any)["available"] != false {
		t.Fatalf("REST with MAAS down: %d %v", st, body)
	}
	x.maas.SetFault(sim.FaultNone)

	// The key is nowhere: database, logs, answers.
	x.maas.ResetRequests()
	_, body := rest(x.admin)
	raw, _ := json.Marshal(body)
	checkNoMAASKey(t, x, string(raw))
}

func checkNoMAASKey(t *testing.T, x *maasEnv, extra ...string) {
	t.Helper()
	parts := strings.Split(x.maas.Key, ":")
	haystacks := map[string]string{"database dump": x.e.DB.Dump(t), "server log": x.e.Logs.String()}
	for i, s := range extra {
		haystacks[fmt.Sprintf("answer %d", i)] = s
	}
	for where, s := range haystacks {
		for _, p := range append(parts, x.maas.Key) {
			if strings.Contains(s, p) {
				t.Errorf("the MAAS key (or a part of it) is in the %s", where)
			}
		}
	}
}

func TestMAASStepsFollowTheRules(t *testing.T) {
	parallel(t)
	x := startMAASFleet(t)
	ctx := context.Background()
	if r := x.register(t, "node-a", "MAAS", "aaaa01"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if r := x.register(t, "m2", "MAAS", "mmmm02"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	for name, id := range map[string]string{"node-new": "nnnn03", "node-busy": "dddd04"} {
		if r := x.register(t, name, "MAAS", id); len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
	}
	step := func(q string, vars map[string]any) *producttest.Response { return x.gql(q, vars) }

	// Commission: refused for a Deployed machine, MAAS's rule said up front.
	commission := `mutation($in: CommissionMachineInput!) { commissionMachine(input: $in) { maas { status } machine { name } } }`
	if r := step(commission, map[string]any{"in": map[string]any{"systemId": "dddd04"}}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "is Deployed") {
		t.Fatalf("commission a Deployed machine: %+v", r.Errors)
	}
	tooMany := make([]string, 17)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("test-%d", i)
	}
	if r := step(commission, map[string]any{"in": map[string]any{"systemId": "nnnn03", "tests": tooMany}}); r.Code() != "INVALID_INPUT" || r.Errors[0].Extensions["field"] != "tests" {
		t.Fatalf("17 tests: %+v", r.Errors)
	}
	if r := step(commission, map[string]any{"in": map[string]any{"systemId": "nnnn03", "tests": []string{"smartctl-validate", "memtester"}}}); len(r.Errors) > 0 ||
		r.Data["commissionMachine"].(map[string]any)["maas"].(map[string]any)["status"] != "Commissioning" {
		t.Fatalf("commission New: %+v %v", r.Errors, r.Data)
	}
	// The tests are a set (@set): sent in one order whatever order they were given in.
	if req := lastOp(x, "commission"); req == "" || !strings.Contains(req, "testing_scripts=memtester%2Csmartctl-validate") {
		t.Fatalf("commission sent %q", req)
	}

	// Hardware tests: the hostname typed again, only on Ready/Broken/Failed testing.
	test := `mutation($in: RunHardwareTestsInput!) { runHardwareTests(input: $in) { maas { status } machine { name } } }`
	if r := step(test, map[string]any{"in": map[string]any{"systemId": "aaaa01", "hostname": "node-b"}}); r.Code() != "INVALID_INPUT" || r.Errors[0].Extensions["field"] != "hostname" || strings.Contains(r.Errors[0].Message, "node-a") {
		t.Fatalf("wrong hostname (the right one must not be revealed): %+v", r.Errors)
	}
	if r := step(test, map[string]any{"in": map[string]any{"systemId": "dddd04", "hostname": "node-busy"}}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "release it first") {
		t.Fatalf("test a Deployed machine: %+v", r.Errors)
	}
	if r := step(test, map[string]any{"in": map[string]any{"systemId": "aaaa01", "hostname": "node-a", "tests": tooMany}}); r.Code() != "INVALID_INPUT" {
		t.Fatalf("17 tests: %+v", r.Errors)
	}
	r := step(test, map[string]any{"in": map[string]any{"systemId": "aaaa01", "hostname": "node-a", "tests": []string{"smartctl-validate", "memtester"}}})
	if len(r.Errors) > 0 || r.Data["runHardwareTests"].(map[string]any)["maas"].(map[string]any)["status"] != "Testing" ||
		r.Data["runHardwareTests"].(map[string]any)["machine"].(map[string]any)["name"] != "node-a" {
		t.Fatalf("test a Ready machine: %+v %v", r.Errors, r.Data)
	}
	if req := lastOp(x, "test"); !strings.Contains(req, "testing_scripts=memtester%2Csmartctl-validate") {
		t.Fatalf("test sent %q", req)
	}
	ev := x.e.Scalar(`SELECT machine || ' ' || parameters::text FROM audit_events WHERE action = 'runHardwareTests' AND outcome = 'SUCCEEDED'`).(string)
	if !strings.HasPrefix(ev, "node-a ") || !strings.Contains(ev, "memtester") {
		t.Fatalf("the test run's audit event: %s", ev)
	}
	x.maas.Clock.Advance(time.Minute) // tests finish: back to Ready

	// Release: erase needs hardware.delete; never secure or quick erase.
	release := `mutation($in: ReleaseMachineInput!) { releaseMachine(input: $in) { maas { status } erase { requested effective message } } }`
	if r := step(release, map[string]any{"in": map[string]any{"systemId": "mmmm02"}}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "remove the member first") {
		t.Fatalf("release a member: %+v", r.Errors)
	}
	if r := step(release, map[string]any{"in": map[string]any{"systemId": "dddd04", "erase": true}}); r.Code() != "FORBIDDEN" || !strings.Contains(r.Errors[0].Message, "hardware.delete") {
		t.Fatalf("erase without hardware.delete: %+v", r.Errors)
	}
	if got := x.e.Scalar(`SELECT outcome FROM audit_events WHERE action = 'releaseMachine' ORDER BY id DESC LIMIT 1`); got != "REFUSED" {
		t.Fatalf("refused erase audited as %v", got)
	}
	if s, _ := x.maas.Machine("dddd04"); s.LastRelease.Requested {
		t.Fatal("a refused release reached MAAS")
	}
	// Preview: MAAS's own setting erases anyway; say so before.
	x.maas.SetConfig("enable_disk_erasing_on_release", true)
	p := x.must(t, `{ releasePreview { requested maasErasesOnRelease effective message } }`, nil)["releasePreview"].(map[string]any)
	if p["effective"] != true || p["maasErasesOnRelease"] != true || !strings.Contains(p["message"].(string), "MAAS will erase the disks anyway") {
		t.Fatalf("preview with erasing on release: %v", p)
	}
	x.maas.SetConfig("enable_disk_erasing_on_release", false)
	eraser := x.e.Identity("eraser", identity.ManageInfrastructure, identity.HardwareDelete)
	r = x.e.GQL(eraser, release, map[string]any{"in": map[string]any{"systemId": "dddd04", "erase": true, "comment": "decommission"}})
	if len(r.Errors) > 0 || fmt.Sprint(r.Data["releaseMachine"].(map[string]any)["erase"]) != "map[effective:true message:the disks will be erased (asked for) requested:true]" {
		t.Fatalf("release with erase: %+v %v", r.Errors, r.Data)
	}
	if s, _ := x.maas.Machine("dddd04"); !s.LastRelease.Erase || s.LastRelease.SecureErase || s.LastRelease.QuickErase {
		t.Fatalf("MAAS was asked %+v", s.LastRelease)
	}
	if req := lastOp(x, "release"); !strings.Contains(req, "secure_erase=false") || !strings.Contains(req, "quick_erase=false") {
		t.Fatalf("release sent %q: secure and quick erase must be sent as false", req)
	}
	_ = ctx
	onlyMachineSteps(t, x)
}

// nodeHardwareRead is a read of a machine's block devices or interfaces.
var nodeHardwareRead = regexp.MustCompile(`^/MAAS/api/2\.0/nodes/[a-z0-9]+/(blockdevices|interfaces)/$`)

// onlyMachineSteps checks Apelora asked MAAS for nothing but reading machines (and their
// hardware) and the steps an administrator approved: no images, zones, pools, tags, notes
// or settings.
func onlyMachineSteps(t *testing.T, x *maasEnv) {
	t.Helper()
	allowed := map[string]bool{"": true, "commission": true, "test": true, "allocate": true, "deploy": true, "release": true, "get_config": true}
	for _, r := range x.maas.Requests() {
		onMachines := strings.Contains(r.Path, "/machines/") || (r.Method == "GET" && nodeHardwareRead.MatchString(r.Path))
		readsConfig := strings.HasSuffix(r.Path, "/maas/") && r.Op == "get_config"
		if !allowed[r.Op] || (r.Method != "GET" && r.Method != "POST") || !(onMachines || readsConfig) || (r.Op == "" && r.Method != "GET") {
			t.Errorf("Apelora asked MAAS for %s %s op=%q", r.Method, r.Path, r.Op)
		}
	}
}

// lastOp returns the form of the last request with that MAAS op, encoded.
func lastOp(x *maasEnv, op string) string {
	reqs := x.maas.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Op == op {
			return reqs[i].Form.Encode()
		}
	}
	return ""
}

var tokenLine = regexp.MustCompile(`(?m)^<<'APELORA_JOIN_TOKEN'\n|^([A-Za-z0-9+/=]{100,})$`)

func TestInstallDeploysWithTheEnrolmentInUserDataOnly(t *testing.T) {
	parallel(t)
	x := startMAASFleet(t)
	if r := x.register(t, "node-a", "MAAS", "aaaa01"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	install := `mutation($in: InstallOperatingSystemInput!) { installOperatingSystem(input: $in) { machine { phase pendingJoinToken { expiresAt } } maas { status owner distroSeries } } }`

	// A series MAAS has not synced: MAAS refuses, the token is revoked, the allocation
	// returned; nothing is left half-done.
	r := x.gql(install, map[string]any{"in": map[string]any{"name": "node-a", "series": "warty"}})
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "distro_series") {
		t.Fatalf("unsynced series: %+v", r.Errors)
	}
	if m := x.machine(t, "node-a"); m["phase"] != "REGISTERED" || m["pendingJoinToken"] != nil {
		t.Fatalf("after a failed install: %v", m)
	}
	x.maas.Clock.Advance(time.Minute) // the release of the allocation completes
	if s, _ := x.maas.Machine("aaaa01"); s.StatusName != "Ready" || s.Owner != "" || !s.LastRelease.Requested || s.LastRelease.Erase {
		t.Fatalf("MAAS machine after a failed install: %+v", s)
	}
	if r := x.gql(install, map[string]any{"in": map[string]any{"name": "node-a", "series": "no series"}}); r.Code() != "INVALID_INPUT" {
		t.Fatalf("malformed series: %+v", r.Errors)
	}
	if r := x.register(t, "node-m", "MANUAL", ""); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if r := x.gql(install, map[string]any{"in": map[string]any{"name": "node-m", "series": "noble"}}); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("install a MANUAL machine: %+v", r.Errors)
	}

	r = x.gql(install, map[string]any{"in": map[string]any{"name": "node-a", "series": "noble"}})
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	out := r.Data["installOperatingSystem"].(map[string]any)
	if out["machine"].(map[string]any)["phase"] != "AWAITING_JOIN" || out["maas"].(map[string]any)["status"] != "Deploying" || out["maas"].(map[string]any)["owner"] != "apelora" {
		t.Fatalf("after install: %v", out)
	}
	ud := string(x.maas.UserData("aaaa01"))
	if !strings.HasPrefix(ud, "#!/bin/sh\n") || !strings.Contains(ud, "--name node-a") || !strings.Contains(ud, "<<'APELORA_ENROL_SCRIPT'") {
		t.Fatalf("user data:\n%.400s", ud)
	}
	check := exec.Command("sh", "-n")
	check.Stdin = strings.NewReader(ud)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("user data is not valid sh: %v %s", err, out)
	}
	token := ""
	for _, m := range tokenLine.FindAllStringSubmatch(ud, -1) {
		if m[1] != "" {
			token = m[1]
		}
	}
	if token == "" {
		t.Fatal("no join token in the user data")
	}
	secret := tokenSecret(t, token)
	for _, req := range x.maas.Requests() {
		for k, v := range req.Form {
			if k != "user_data" && strings.Contains(strings.Join(v, ","), secret) {
				t.Fatalf("the token went to MAAS outside the user data (%s)", k)
			}
		}
	}
	// Never stored, logged or audited: only the series is.
	dump := x.e.DB.Dump(t)
	for what, s := range map[string]string{"database": dump, "server log": x.e.Logs.String()} {
		if strings.Contains(s, secret) || strings.Contains(s, "APELORA_ENROL_SCRIPT") {
			t.Errorf("the join token or the user data is in the %s", what)
		}
	}
	ev := x.e.Scalar(`SELECT details::text FROM audit_events WHERE action = 'installOperatingSystem' AND outcome = 'SUCCEEDED'`).(string)
	if !strings.Contains(ev, `"series": "noble"`) || !strings.Contains(ev, "aaaa01") {
		t.Fatalf("install audit details: %s", ev)
	}

	// The token in the user data is a real, working join token for node-a: the enrolment
	// script run with it joins a fresh incusd.
	host := x.lab.StartUnjoined(t, "node-a")
	cmd := exec.Command("sh", x.enrolScript(t), "--name", "node-a", "--address", host.Address, "--member-config", "storage-pool/local/source=")
	cmd.Env = append(os.Environ(), x.lab.Env(host)...)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enrol with the user data's token: %v\n%s", err, out)
	}
	x.lab.AddMember(host)
	if m := x.machine(t, "node-a"); m["phase"] != "HELD" {
		t.Fatalf("after the MAAS path's enrolment: %v", m)
	}
	checkNoMAASKey(t, x)
	onlyMachineSteps(t, x)
}

func TestAdmissionReadsMAASHardwareTests(t *testing.T) {
	parallel(t, lasts(11))
	x := startMAASFleet(t)
	if r := x.register(t, "m2", "MAAS", "mmmm02"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	check := func() map[string]any {
		r := x.must(t, `{ admissionReport(name: "m2") { verdict checks { name result message } } }`, nil)["admissionReport"].(map[string]any)
		for _, c := range r["checks"].([]any) {
			if c.(map[string]any)["name"] == "hardware-tests" {
				return c.(map[string]any)
			}
		}
		t.Fatalf("no hardware-tests check: %v", r)
		return nil
	}
	if c := check(); c["result"] != "PASS" {
		t.Fatalf("passed tests: %v", c)
	}
	// A failed run in MAAS blocks admission.
	if err := x.maas.Edit("mmmm02", func(e *sim.MachineEdit) { e.SetTestOutcome("smartctl-validate", "failed") }); err != nil {
		t.Fatal(err)
	}
	// Deployed machines may be tested by MAAS itself (not through Apelora): run it directly.
	if _, err := x.maasClient(t).Test(context.Background(), "mmmm02", maas.TestOptions{}); err != nil {
		t.Fatal(err)
	}
	x.maas.Clock.Advance(time.Minute)
	if c := check(); c["result"] != "FAIL" {
		t.Fatalf("failed tests: %v", c)
	}
	x.maas.SetFault(sim.FaultUnavailable)
	if c := check(); c["result"] != "SKIPPED" || !strings.Contains(c["message"].(string), "could not be reached") {
		t.Fatalf("MAAS unreachable: %v", c)
	}
}

func TestMAASTLSRules(t *testing.T) {
	parallel(t, lasts(10))
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, maasFleet())
	for name, tc := range map[string]struct {
		ca   func() string
		says string
	}{
		"untrusted certificate": {func() string { return "" }, "certificate"},
		"another CA": {func() string {
			other, err := sim.GenerateCertificates(sim.TLSSelfSignedLeaf, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			p := t.TempDir() + "/other.pem"
			os.WriteFile(p, other.LeafPEM, 0o644)
			return p
		}, "certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := m.Config
			cfg.CAFile = tc.ca()
			e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(cfg))
			admin := e.Identity("admin", identity.ViewInfrastructure)
			d := e.MustGQL(admin, `{ fleet { sources { maas { available message } } } }`, nil)
			src := d["fleet"].(map[string]any)["sources"].(map[string]any)["maas"].(map[string]any)
			if src["available"] != false || !strings.Contains(src["message"].(string), tc.says) {
				t.Fatalf("sources.maas = %v", src)
			}
		})
	}
	// A served certificate marked as a CA is refused even when trusted.
	caSim := producttest.StartMAAS(t, maasFleet())
	caSim.Endpoint.Close()
	ep, err := caSim.ListenTLS("127.0.0.1:0", sim.TLSCAMarked)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	p := t.TempDir() + "/ca-marked.pem"
	os.WriteFile(p, ep.Certs.LeafPEM, 0o644)
	cfg := caSim.Config
	cfg.BaseURL, cfg.CAFile = ep.BaseURL, p
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(cfg))
	d := e.MustGQL(e.Identity("admin", identity.ViewInfrastructure), `{ fleet { sources { maas { available message } } } }`, nil)
	if src := d["fleet"].(map[string]any)["sources"].(map[string]any)["maas"].(map[string]any); src["available"] != false || !strings.Contains(src["message"].(string), "marked as a CA") {
		t.Fatalf("CA-marked certificate: %v", src)
	}
	_ = io.Discard
}

// maasClient reaches the simulator directly, as MAAS's own users would.
func (x *maasEnv) maasClient(t *testing.T) *maas.Client {
	t.Helper()
	c, err := maas.New(x.maas.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRegisterThenCommissionANewMachine: the seeds' order. A MAAS step on a machine Apelora
// has no record of is refused (nothing reaches MAAS); a New machine, which MAAS reports no
// hardware UUID for yet, registers; commissioning it is in its history under its name;
// once MAAS reports the UUID, the fleet's reads copy it to the record once, in one audit
// event of the server's own.
func TestRegisterThenCommissionANewMachine(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	gql := func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }

	m.ResetRequests()
	for _, q := range []string{
		`mutation { commissionMachine(input: {systemId: "nnnn03", tests: []}) { maas { status } } }`,
		`mutation { runHardwareTests(input: {systemId: "nnnn03", hostname: "node-new"}) { maas { status } } }`,
		`mutation { releaseMachine(input: {systemId: "nnnn03"}) { maas { status } } }`,
	} {
		if r := gql(q, nil); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "register it first") {
			t.Fatalf("%s on an unregistered machine: %+v", q, r.Errors)
		}
	}
	for _, req := range m.Requests() {
		if req.Method != "GET" {
			t.Fatalf("a refused step reached MAAS: %s %s op=%s", req.Method, req.Path, req.Op)
		}
	}

	r := gql(`mutation { registerMachine(input: {name: "node-new", provisioner: MAAS, maasSystemId: "nnnn03"}) { machine { name phase record { hardwareUuid } maas { status } } } }`, nil)
	if len(r.Errors) > 0 || fmt.Sprint(r.Data) != "map[registerMachine:map[machine:map[maas:map[status:New] name:node-new phase:REGISTERED record:map[hardwareUuid:<nil>]]]]" {
		t.Fatalf("register a New machine: %+v %v", r.Errors, r.Data)
	}
	// The fence mapping waits for the UUID.
	r = gql(`mutation { setFenceMapping(input: {member: "node-new", maasSystemId: "nnnn03", hardwareUuid: "4c4c4544-0042-3510-8052-b7c04f4e0003"}) { mapping { member } } }`, nil)
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "commission") {
		t.Fatalf("fence mapping before the UUID is known: %+v", r.Errors)
	}

	r = gql(`mutation { commissionMachine(input: {systemId: "nnnn03", tests: []}) { maas { status } machine { name } } }`, nil)
	if len(r.Errors) > 0 || fmt.Sprint(r.Data) != "map[commissionMachine:map[maas:map[status:Commissioning] machine:map[name:node-new]]]" {
		t.Fatalf("commission the registered New machine: %+v %v", r.Errors, r.Data)
	}
	uuid := func() any {
		return e.MustGQL(admin, `{ machine(name: "node-new") { record { hardwareUuid } } }`, nil)["machine"].(map[string]any)["record"].(map[string]any)["hardwareUuid"]
	}
	if got := uuid(); got != nil {
		t.Fatalf("a UUID before MAAS reports one: %v", got)
	}
	m.Clock.Advance(time.Minute) // commissioning ends: MAAS reports the hardware
	for range 3 {
		if got := uuid(); got != "4c4c4544-0042-3510-8052-b7c04f4e0003" {
			t.Fatalf("the record's UUID once MAAS reports it: %v", got)
		}
		e.MustGQL(admin, `{ fleet { machines { name record { hardwareUuid } } } }`, nil)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'copyHardwareUuid'`); n != int64(1) {
		t.Fatalf("%v copyHardwareUuid events, want 1", n)
	}
	ev := e.Scalar(`SELECT machine || ' ' || actor || ' ' || outcome || ' ' || parameters::text FROM audit_events WHERE action = 'copyHardwareUuid'`).(string)
	if !strings.HasPrefix(ev, "node-new apelora (MAAS) SUCCEEDED ") || !strings.Contains(ev, "4c4c4544-0042-3510-8052-b7c04f4e0003") || !strings.Contains(ev, "nnnn03") {
		t.Fatalf("the copy's audit event: %s", ev)
	}

	// The machine's history holds every step, under its name.
	d := e.MustGQL(admin, `{ auditEvents(machine: "node-new") { edges { node { action actor outcome } } } }`, nil)
	var history []string
	for _, edge := range d["auditEvents"].(map[string]any)["edges"].([]any) {
		n := edge.(map[string]any)["node"].(map[string]any)
		history = append(history, fmt.Sprintf("%s %s %s", n["action"], n["actor"], n["outcome"]))
	}
	want := []string{"copyHardwareUuid apelora (MAAS) SUCCEEDED", "commissionMachine admin SUCCEEDED", "commissionMachine admin STARTED", "setFenceMapping admin REFUSED", "registerMachine admin SUCCEEDED"}
	if strings.Join(history, "; ") != strings.Join(want, "; ") {
		t.Fatalf("node-new's history (newest first):\n%s\nwant\n%s", strings.Join(history, "\n"), strings.Join(want, "\n"))
	}

	// Now the mapping can be made.
	r = gql(`mutation { setFenceMapping(input: {member: "node-new", maasSystemId: "nnnn03", hardwareUuid: "4c4c4544-0042-3510-8052-b7c04f4e0003"}) { mapping { member } } }`, nil)
	if len(r.Errors) > 0 {
		t.Fatalf("fence mapping once the UUID is known: %+v", r.Errors)
	}
}
