package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/apelora/fabric/domain/admission"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// enrolled is a lab cluster with the product pointed at it.
type enrolled struct {
	lab   *incuslab.Cluster
	e     *producttest.Env
	admin string // manage-infrastructure token
	gql   func(q string, vars map[string]any) *producttest.Response
	inc   *incus.Client
}

func startEnrolled(t *testing.T, members int) *enrolled {
	lab := incuslab.Start(t, members)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	return &enrolled{lab: lab, e: e, admin: admin, inc: lab.Client(t, lab.Members[0]),
		gql: func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }}
}

func (x *enrolled) must(t *testing.T, q string, vars map[string]any) map[string]any {
	t.Helper()
	r := x.gql(q, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("%s: %+v", q, r.Errors)
	}
	return r.Data
}

const machineQuery = `query($n: String!) { machine(name: $n) { name phase warnings { code } pendingJoinToken { expiresAt }
	member { name status held scheduler roles groups failureDomain description architecture } } }`

func (x *enrolled) machine(t *testing.T, name string) map[string]any {
	t.Helper()
	m, _ := x.must(t, machineQuery, map[string]any{"n": name})["machine"].(map[string]any)
	return m
}

// version asks the member itself for its versions.
func (x *enrolled) version(t *testing.T, name string) map[string]any {
	t.Helper()
	m := x.must(t, `query($n: String!) { machine(name: $n) { member { version { incus apiExtensions kernel os } } } }`, map[string]any{"n": name})["machine"].(map[string]any)
	return m["member"].(map[string]any)["version"].(map[string]any)
}

// enrolScript fetches enrol-member.sh from the server, as a new host would.
func (x *enrolled) enrolScript(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(x.e.Base + "/enrol/enrol-member.sh")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("#!")) {
		t.Fatalf("GET /enrol/enrol-member.sh = %d %.100s", resp.StatusCode, body)
	}
	p := filepath.Join(t.TempDir(), "enrol-member.sh")
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// location returns where Incus placed an instance.
func location(t *testing.T, c *incus.Client, name string) string {
	t.Helper()
	in, err := c.Instance(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return in.Location
}

func TestEnrolmentAdmissionAndRemovalAgainstARealCluster(t *testing.T) {
	parallel(t)
	x := startEnrolled(t, 3)
	ctx := t.Context()

	x.must(t, `mutation { registerMachine(input: {name: "node-4", provisioner: MANUAL}) { machine { name } } }`, nil)
	if p := x.machine(t, "node-4")["phase"]; p != "REGISTERED" {
		t.Fatalf("after register: %v", p)
	}
	// The bootstrap members have no record: UNREGISTERED.
	if p := x.machine(t, "m1")["phase"]; p != "UNREGISTERED" {
		t.Fatalf("m1: %v", p)
	}

	// Approve: the token comes back once, uncacheable.
	approve := `mutation { approveEnrolment(input: {name: "node-4"}) { joinToken expiresAt command scriptUrl memberConfig { entity name key value } machine { phase } } }`
	r := x.gql(approve, nil)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("approveEnrolment Cache-Control = %q, want no-store", cc)
	}
	a := r.Data["approveEnrolment"].(map[string]any)
	token := a["joinToken"].(string)
	secret := tokenSecret(t, token)
	if a["machine"].(map[string]any)["phase"] != "AWAITING_JOIN" || !strings.Contains(a["command"].(string), "--name node-4") ||
		!strings.HasSuffix(a["scriptUrl"].(string), "/enrol/enrol-member.sh") {
		t.Fatalf("approval: %v", a)
	}
	if fmt.Sprint(a["memberConfig"]) != "[map[entity:storage-pool key:source name:local value:]]" {
		t.Fatalf("member config %v", a["memberConfig"])
	}
	if m := x.machine(t, "node-4"); m["phase"] != "AWAITING_JOIN" || m["pendingJoinToken"] == nil {
		t.Fatalf("awaiting: %v", m)
	}
	// Approving twice would silently cancel the token in flight: refused.
	if r := x.gql(approve, nil); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "already pending") {
		t.Fatalf("approve twice: %+v", r.Errors)
	}

	// The new host runs enrol-member.sh with the token on standard input.
	host := x.lab.StartUnjoined(t, "node-4")
	script := x.enrolScript(t)
	cmd := exec.CommandContext(ctx, "sh", script, "--name", "node-4", "--address", host.Address, "--member-config", "storage-pool/local/source=")
	cmd.Env = append(os.Environ(), x.lab.Env(host)...)
	cmd.Stdin = strings.NewReader(token + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("enrol-member.sh: %v\n%s", err, out)
	}
	x.lab.AddMember(host)
	if strings.Contains(string(out), secret) {
		t.Fatal("enrol-member.sh printed the token's secret")
	}

	m := x.machine(t, "node-4")
	member, _ := m["member"].(map[string]any)
	if m["phase"] != "HELD" || member == nil || member["held"] != true || member["scheduler"] != "manual" || member["status"] != "ONLINE" {
		t.Fatalf("after joining: %v", m)
	}
	if v := x.version(t, "node-4"); v["incus"] == "" || v["kernel"] == "" || v["apiExtensions"].(float64) < 100 {
		t.Fatalf("member version %v", v)
	}

	// Held: untargeted placement avoids it, a targeted instance lands on it.
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("c%d", i)
		if _, err := x.inc.CreateEmptyInstance(ctx, name, "", "local"); err != nil {
			t.Fatal(err)
		}
		if loc := location(t, x.inc, name); loc == "node-4" {
			t.Fatalf("untargeted %s landed on the held member", name)
		}
	}
	if _, err := x.inc.CreateEmptyInstance(ctx, "t1", "node-4", "local"); err != nil {
		t.Fatal(err)
	}
	if loc := location(t, x.inc, "t1"); loc != "node-4" {
		t.Fatalf("targeted instance landed on %s", loc)
	}

	// The admission checks, watched live through the generated client while a report runs.
	events, wsErrs := watchAdmission(ctx, t, x.e.Base, x.admin, "node-4")
	report := x.must(t, `{ admissionReport(name: "node-4") { runId verdict checks { name result message } } }`, nil)["admissionReport"].(map[string]any)
	if report["verdict"] != "ADMISSIBLE" {
		t.Fatalf("report: %v", report)
	}
	var pushed []string
	for verdict := false; !verdict; {
		select {
		case ev := <-events:
			if ev.Errors != nil {
				t.Fatal(ev.Errors)
			}
			e := ev.Data.AdmissionChecks
			if e.RunId != report["runId"] {
				t.Fatalf("event of run %s, report was %s", e.RunId, report["runId"])
			}
			for _, c := range e.Checks {
				pushed = append(pushed, c.Name+"="+string(c.Result))
			}
			if e.Verdict != nil {
				verdict = *e.Verdict == client.AdmissionVerdictAdmissible
				if !verdict {
					t.Fatalf("verdict %s", *e.Verdict)
				}
			}
		case err := <-wsErrs:
			t.Fatal(err)
		case <-time.After(15 * time.Second):
			t.Fatalf("pushed so far: %v", pushed)
		}
	}
	if len(pushed) != len(admission.CheckNames) {
		t.Fatalf("pushed %v, want every check (%d)", pushed, len(admission.CheckNames))
	}

	// Admit: the hold goes, everything else stays.
	before, _, err := x.inc.Member(ctx, "node-4")
	if err != nil {
		t.Fatal(err)
	}
	x.must(t, `mutation { admitMember(input: {name: "node-4"}) { report { verdict } machine { phase } } }`, nil)
	after, _, err := x.inc.Member(ctx, "node-4")
	if err != nil {
		t.Fatal(err)
	}
	if _, held := after.Config["scheduler.instance"]; held {
		t.Fatalf("still held after admission: %v", after.Config)
	}
	if !reflect.DeepEqual(before.Roles, after.Roles) || !reflect.DeepEqual(before.Groups, after.Groups) ||
		before.FailureDomain != after.FailureDomain || before.Description != after.Description {
		t.Fatalf("admission changed more than the hold:\nbefore %+v\nafter  %+v", before, after)
	}
	if p := x.machine(t, "node-4")["phase"]; p != "ADMITTED" {
		t.Fatalf("after admit: %v", p)
	}
	if r := x.gql(`mutation { admitMember(input: {name: "node-4"}) { report { verdict } } }`, nil); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("admit twice: %+v", r.Errors)
	}

	// Placement reaches it: with its one instance gone it has the fewest.
	if err := x.inc.DeleteInstance(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.inc.CreateEmptyInstance(ctx, "c5", "", "local"); err != nil {
		t.Fatal(err)
	}
	if loc := location(t, x.inc, "c5"); loc != "node-4" {
		t.Fatalf("after admission the emptiest member node-4 did not get c5 (went to %s)", loc)
	}

	// Remove: Incus refuses while the member holds an instance, with its reason.
	r = x.gql(`mutation { removeMember(input: {name: "node-4"}) { machine { phase } } }`, nil)
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "c5") {
		t.Fatalf("remove with an instance: %+v", r.Errors)
	}
	if err := x.inc.DeleteInstance(ctx, "c5"); err != nil {
		t.Fatal(err)
	}
	d := x.must(t, `mutation { removeMember(input: {name: "node-4"}) { machine { phase member { name } } } }`, nil)
	if got := fmt.Sprint(d["removeMember"]); got != "map[machine:map[member:<nil> phase:REGISTERED]]" {
		t.Fatalf("after removal: %s", got)
	}

	// The token is nowhere: not in the database, not in the server log.
	dump := x.e.DB.Dump(t)
	for what, s := range map[string]string{"token": token, "secret": secret} {
		if strings.Contains(dump, s) {
			t.Errorf("the join %s is in the database dump", what)
		}
		if strings.Contains(x.e.Logs.String(), s) {
			t.Errorf("the join %s is in the server log", what)
		}
	}
	if !strings.Contains(dump, "approveEnrolment") || !strings.Contains(dump, "joinTokenExpiresAt") {
		t.Fatal("the dump lacks the approval's audit event: the leak check would prove nothing")
	}
}

// watchAdmission subscribes to a machine's admission checks, and returns once the
// subscription is in place: admissionChecks has no replay, so it asks for reports until
// one run reaches the watcher whole, up to its verdict (on a loaded machine the server
// may take a while to start a subscription; a sleep "until it is in place" was not
// enough). The runs the caller starts next reach it whole.
func watchAdmission(ctx context.Context, t *testing.T, base, token, machine string) (chan client.AdmissionChecksWsResponse, chan error) {
	t.Helper()
	ws, err := client.NewWebSocket(base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	events, _, err := client.AdmissionChecks(ctx, ws, machine)
	if err != nil {
		t.Fatal(err)
	}
	gc := client.New(base+"/graphql", token, nil)
	deadline := time.After(2 * time.Minute)
	for {
		rep, err := client.AdmissionReport(ctx, gc, machine)
		if err != nil {
			t.Fatalf("admission report on %s: %v", machine, err)
		}
		run := rep.AdmissionReport.RunId
		// The run's verdict is its last event: once it is here, nothing of this run or of
		// an earlier one is still on its way. Events of earlier runs are passed over.
		for again := time.After(2 * time.Second); ; {
			select {
			case ev := <-events:
				if ev.Errors != nil {
					t.Fatalf("admissionChecks(%s): %v", machine, ev.Errors)
				}
				if ev.Data.AdmissionChecks.RunId == run && ev.Data.AdmissionChecks.Verdict != nil {
					return events, errs
				}
				continue
			case err := <-errs:
				t.Fatalf("admissionChecks(%s): %v", machine, err)
			case <-deadline:
				t.Fatalf("admissionChecks(%s) pushed no whole run in 2 minutes of reports", machine)
			case <-again:
			}
			break
		}
	}
}

// tokenSecret decodes a join token to its secret, to search for it too.
func tokenSecret(t *testing.T, token string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("join token is not base64: %v", err)
	}
	var tj struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil || len(tj.Secret) < 32 {
		t.Fatalf("join token JSON: %v", err)
	}
	return tj.Secret
}

func TestAdmissionFailuresAndWarnings(t *testing.T) {
	parallel(t, lasts(54))
	x := startEnrolled(t, 3)
	for _, n := range []string{"m2", "m3"} {
		x.must(t, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": n})
	}
	// Joined without the hold (the lab joins members plainly): UNHELD with a warning.
	m := x.machine(t, "m2")
	if m["phase"] != "UNHELD" || fmt.Sprint(m["warnings"]) != "[map[code:JOINED_WITHOUT_HOLD]]" {
		t.Fatalf("m2: %v", m)
	}

	// A storage pool defined everywhere but m3: the check fails and admission is refused.
	for _, mem := range x.lab.Members[:2] {
		if out, err := x.lab.CLI(mem, "storage", "create", "extra", "dir", "--target", mem.Name); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	r := x.must(t, `{ admissionReport(name: "m3") { verdict checks { name result message } } }`, nil)["admissionReport"].(map[string]any)
	if r["verdict"] != "BLOCKED" || !strings.Contains(fmt.Sprint(r["checks"]), "extra (Unknown)") {
		t.Fatalf("report with a missing pool: %v", r)
	}
	resp := x.gql(`mutation { admitMember(input: {name: "m3"}) { report { verdict } } }`, nil)
	if resp.Code() != "FAILED_PRECONDITION" || !strings.Contains(resp.Errors[0].Message, "Storage pools") {
		t.Fatalf("admit with a missing pool: %+v", resp.Errors)
	}
	details := x.e.Scalar(`SELECT details::text FROM audit_events WHERE action = 'admitMember' ORDER BY id DESC LIMIT 1`).(string)
	if !strings.Contains(details, `"verdict": "BLOCKED"`) || !strings.Contains(details, "storage-pools") {
		t.Fatalf("the refused admission's audit event lacks the checks: %s", details)
	}

	// Unknown names.
	if r := x.gql(`mutation { admitMember(input: {name: "node-9"}) { report { verdict } } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("admit unknown: %+v", r.Errors)
	}
	if r := x.gql(`{ admissionReport(name: "node-9") { verdict } }`, nil); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("report on a non-member: %+v", r.Errors)
	}

	// An offline member fails the online check. m3 is a voter of three; two keep quorum.
	m3 := x.lab.Member("m3")
	if err := x.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	defer x.lab.Thaw(m3)
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := x.machine(t, "m3")
		if member, _ := m["member"].(map[string]any); member != nil && member["status"] == "OFFLINE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Incus never reported m3 offline")
		}
		time.Sleep(time.Second)
	}
	r = x.must(t, `{ admissionReport(name: "m3") { verdict checks { name result message } } }`, nil)["admissionReport"].(map[string]any)
	checks := fmt.Sprint(r["checks"])
	if r["verdict"] != "BLOCKED" || !strings.Contains(checks, "map[message:Incus reports the member Offline") {
		t.Fatalf("report on an offline member: %v", r)
	}
}

func TestConcurrentChangesToOneMachineAreRefusedAsBusy(t *testing.T) {
	parallel(t)
	x := startEnrolled(t, 1)
	x.must(t, `mutation { registerMachine(input: {name: "node-1", provisioner: MANUAL}) { machine { name } } }`, nil)
	// Another administrator's change holds the machine's lease (as a slow approval would).
	release := x.e.HoldMachine("node-1")
	r := x.gql(`mutation { approveEnrolment(input: {name: "node-1"}) { joinToken } }`, nil)
	if r.Code() != "BUSY" || !strings.Contains(r.Errors[0].Message, "another change to it is in progress") {
		t.Fatalf("while another change holds the machine: %+v", r.Errors)
	}
	release()
	// Another machine is not held up, and once released the machine is free again.
	x.must(t, `mutation { registerMachine(input: {name: "node-2", provisioner: MANUAL}) { machine { name } } }`, nil)
	x.must(t, `mutation { approveEnrolment(input: {name: "node-1"}) { expiresAt } }`, nil)
}

func TestRevokeAndReapprove(t *testing.T) {
	parallel(t)
	x := startEnrolled(t, 1)
	x.must(t, `mutation { registerMachine(input: {name: "node-2", provisioner: MANUAL}) { machine { name } } }`, nil)
	first := x.must(t, `mutation { approveEnrolment(input: {name: "node-2"}) { joinToken } }`, nil)["approveEnrolment"].(map[string]any)["joinToken"].(string)
	// Unregistering is refused while a token is pending.
	if r := x.gql(`mutation { unregisterMachine(input: {name: "node-2"}) { name } }`, nil); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "revoke it first") {
		t.Fatalf("unregister with a pending token: %+v", r.Errors)
	}
	d := x.must(t, `mutation { revokeJoinToken(input: {name: "node-2"}) { machine { phase pendingJoinToken { expiresAt } } } }`, nil)
	if got := fmt.Sprint(d["revokeJoinToken"]); got != "map[machine:map[pendingJoinToken:<nil> phase:REGISTERED]]" {
		t.Fatalf("after revoke: %s", got)
	}
	if r := x.gql(`mutation { revokeJoinToken(input: {name: "node-2"}) { machine { phase } } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("revoke twice: %+v", r.Errors)
	}
	second := x.must(t, `mutation { approveEnrolment(input: {name: "node-2"}) { joinToken } }`, nil)["approveEnrolment"].(map[string]any)["joinToken"].(string)
	if second == first {
		t.Fatal("the same token was issued again")
	}
	// The revoked token no longer joins: Incus refuses it, the new one works.
	host := x.lab.StartUnjoined(t, "node-2")
	script := x.enrolScript(t)
	join := func(token string) ([]byte, error) {
		cmd := exec.Command("sh", script, "--name", "node-2", "--address", host.Address, "--member-config", "storage-pool/local/source=")
		cmd.Env = append(os.Environ(), x.lab.Env(host)...)
		cmd.Stdin = strings.NewReader(token + "\n")
		return cmd.CombinedOutput()
	}
	if out, err := join(first); err == nil {
		t.Fatalf("a revoked token joined:\n%s", out)
	}
	if out, err := join(second); err != nil {
		t.Fatalf("the new token: %v\n%s", err, out)
	}
	x.lab.AddMember(host)
	if p := x.machine(t, "node-2")["phase"]; p != "HELD" {
		t.Fatalf("after joining with the new token: %v", p)
	}
}

// Admission results reach subscribers on every API replica: two servers share the
// database; the report runs on one, the subscriber listens on the other.
func TestAdmissionChecksReachSubscribersOnAnotherReplica(t *testing.T) {
	parallel(t)
	x := startEnrolled(t, 1)
	other := producttest.StartOn(t, x.e.DB, x.e.DB.Store, producttest.WithIncus(x.lab.Config))
	token := x.e.Identity("watcher", identity.ViewInfrastructure)
	x.must(t, `mutation { registerMachine(input: {name: "m1", provisioner: MANUAL}) { machine { name } } }`, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	events, errs := watchAdmission(ctx, t, other.Base, token, "m1")
	runID := x.must(t, `{ admissionReport(name: "m1") { runId } }`, nil)["admissionReport"].(map[string]any)["runId"]
	for {
		select {
		case ev := <-events:
			if ev.Errors != nil {
				t.Fatal(ev.Errors)
			}
			if ev.Data.AdmissionChecks.RunId != runID {
				t.Fatalf("run %s, want %s", ev.Data.AdmissionChecks.RunId, runID)
			}
			if ev.Data.AdmissionChecks.Verdict != nil {
				return
			}
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("the other replica's subscriber got no verdict")
		}
	}
}
