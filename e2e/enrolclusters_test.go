package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

const (
	approveInClusterQuery = `mutation($in: ApproveEnrolmentInput!) { approveEnrolment(input: $in) {
		joinToken memberConfig { entity name key value }
		plan { planHash refused refusals { code message } facts { name value } calls { system request target } } } }`
	admitInClusterQuery = `mutation($in: AdmitMemberInput!) { admitMember(input: $in) {
		report { verdict checks { name result message } }
		plan { planHash refused facts { name value } calls { system request target } } } }`
	reportInClusterQuery = `query($n: String!) { admissionReport(name: $n) { verdict checks { name result message } } }`
)

// Two real Incus clusters on loopback, each with an m1: the one of APELORA_INCUS_*
// ("default") and rack2, registered through the API. A machine is approved into rack2 (the
// plan says so, in a fact and the join token call's target), joins a real incusd of rack2's
// lab with the token rack2 issued, and is checked and admitted there (its pools, networks
// and version are rack2's; its admission names rack2); default's m1 is untouched. Bad input:
// an unknown cluster, a member name that is in rack2 only, a member moved out of its
// cluster, each refused and audited once.
func TestEnrolmentAndAdmissionInASecondCluster(t *testing.T) {
	parallel(t, lasts(20))
	ctx := t.Context()
	lab := incuslab.Start(t, 1)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 2, Identity: lab.Identity()})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if r := e.RegisterCluster(admin, "rack2", rack2); len(r.Errors) > 0 {
		t.Fatalf("register rack2: %+v", r.Errors)
	}
	rack2ID := e.Scalar(`SELECT id FROM clusters WHERE name = 'rack2'`)
	defaultM1 := lab.Client(t, lab.Members[0])
	before, _, err := defaultM1.Member(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}

	// once calls query with in (not a dry run) and checks it is refused with code, on field
	// (if given), saying says, audited exactly once.
	once := func(what, query string, in map[string]any, code, field, says string) {
		t.Helper()
		r := e.GQL(admin, query, map[string]any{"in": in})
		if r.Code() != code || !strings.Contains(r.Errors[0].Message, says) {
			t.Fatalf("%s: %+v, want %s saying %q", what, r.Errors, code, says)
		}
		if f, _ := r.Errors[0].Extensions["field"].(string); field != "" && f != field {
			t.Fatalf("%s: field %q, want %q", what, f, field)
		}
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1`, r.Header.Get("X-Request-Id")); n != int64(1) {
			t.Fatalf("%s: %v audit events, want 1", what, n)
		}
	}
	register := func(name string) {
		t.Helper()
		e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": name, "provisioner": "MANUAL"}})
	}

	// The plan of approving node-5 into rack2: the cluster is a fact, and the token's call
	// names it; nothing is issued, the record unchanged.
	register("node-5")
	in := map[string]any{"name": "node-5", "cluster": "rack2", "dryRun": true}
	p := e.MustGQL(admin, approveInClusterQuery, map[string]any{"in": in})["approveEnrolment"].(map[string]any)
	plan := p["plan"].(map[string]any)
	facts, calls := fmt.Sprint(plan["facts"]), fmt.Sprint(plan["calls"])
	if plan["refused"] != false || p["joinToken"] != nil || !strings.Contains(facts, "name:cluster of node-5 value:rack2 (the record named no cluster, which counts for default)") ||
		!strings.Contains(calls, "target:node-5 in cluster rack2") || !strings.Contains(calls, "UPDATE machine_records") {
		t.Fatalf("the plan of approving node-5 into rack2: %v", p)
	}
	if c := e.Scalar(`SELECT coalesce(cluster_id, 0) FROM machine_records WHERE name = 'node-5'`); c != int64(0) {
		t.Fatalf("a plan set the record's cluster to %v", c)
	}
	// Confirmed with the plan's hash: the token is rack2's, the record names rack2.
	in["dryRun"], in["planHash"] = false, plan["planHash"]
	a := e.MustGQL(admin, approveInClusterQuery, map[string]any{"in": in})["approveEnrolment"].(map[string]any)
	token, _ := a["joinToken"].(string)
	if token == "" {
		t.Fatalf("no join token: %v", a)
	}
	if c := e.Scalar(`SELECT cluster_id FROM machine_records WHERE name = 'node-5'`); c != rack2ID {
		t.Fatalf("node-5's record names cluster %v, want rack2 (%v)", c, rack2ID)
	}
	if d := e.Scalar(`SELECT details->>'cluster' || ' ' || (details->>'movedFrom') FROM audit_events WHERE action = 'approveEnrolment' AND outcome = 'SUCCEEDED'`); d != "rack2 default" {
		t.Fatalf("the approval's audit event: %v", d)
	}
	rack2Pending, err := rack2.Client(t, rack2.Members[0]).PendingJoinTokens(ctx)
	if err != nil || len(rack2Pending) != 1 || rack2Pending[0].ServerName != "node-5" {
		t.Fatalf("rack2's pending tokens: %+v %v", rack2Pending, err)
	}
	if pending, err := defaultM1.PendingJoinTokens(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("default's pending tokens: %+v %v", pending, err)
	}

	// A real incusd of rack2's lab joins with the token, through enrol-member.sh.
	host := rack2.StartUnjoined(t, "node-5")
	script := (&enrolled{e: e}).enrolScript(t)
	args := []string{script, "--name", "node-5", "--address", host.Address}
	for _, c := range a["memberConfig"].([]any) {
		c := c.(map[string]any)
		args = append(args, "--member-config", fmt.Sprintf("%s/%s/%s=%s", c["entity"], c["name"], c["key"], c["value"]))
	}
	cmd := exec.CommandContext(ctx, "sh", args...)
	cmd.Env = append(os.Environ(), rack2.Env(host)...)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enrol-member.sh: %v\n%s", err, out)
	}
	rack2.AddMember(host)
	rack2Client := rack2.Client(t, rack2.Members[0])
	if m, _, err := rack2Client.Member(ctx, "node-5"); err != nil || m.Config["scheduler.instance"] != "manual" {
		t.Fatalf("node-5 in rack2 after joining: %+v %v", m, err)
	}

	// The checks compare node-5 with rack2 (default has no node-5: a check there would be
	// refused as no member).
	report := e.MustGQL(admin, reportInClusterQuery, map[string]any{"n": "node-5"})["admissionReport"].(map[string]any)
	if report["verdict"] != "ADMISSIBLE" || !strings.Contains(fmt.Sprint(report["checks"]), "storage-pool") {
		t.Fatalf("node-5's report: %v", report)
	}
	// admitMember: planned (the cluster a fact, the member update rack2's), then admitted.
	ain := map[string]any{"name": "node-5", "dryRun": true}
	ap := e.MustGQL(admin, admitInClusterQuery, map[string]any{"in": ain})["admitMember"].(map[string]any)["plan"].(map[string]any)
	if ap["refused"] != false || !strings.Contains(fmt.Sprint(ap["facts"]), "name:cluster of node-5 value:rack2;") {
		t.Fatalf("the plan of admitting node-5: %v", ap)
	}
	ain["dryRun"], ain["planHash"] = false, ap["planHash"]
	ad := e.MustGQL(admin, admitInClusterQuery, map[string]any{"in": ain})["admitMember"].(map[string]any)
	if ad["report"].(map[string]any)["verdict"] != "ADMISSIBLE" {
		t.Fatalf("admitted: %v", ad)
	}
	m, _, err := rack2Client.Member(ctx, "node-5")
	if err != nil || m.Config[lifecycle.AdmissionKey] == "" || m.Config["scheduler.instance"] != "" {
		t.Fatalf("node-5 in rack2 after admission: %+v %v", m.Config, err)
	}
	if c := e.Scalar(`SELECT cluster_id FROM admissions WHERE machine = 'node-5' AND ended_at IS NULL`); c != rack2ID {
		t.Fatalf("node-5's admission names cluster %v, want rack2 (%v)", c, rack2ID)
	}
	// default's m1 is untouched, and rack2's m1 too (no record, no step about it).
	after, _, err := defaultM1.Member(ctx, "m1")
	if err != nil || fmt.Sprint(after.Config) != fmt.Sprint(before.Config) || after.Description != before.Description || fmt.Sprint(after.Roles) != fmt.Sprint(before.Roles) {
		t.Fatalf("default's m1 changed: %+v → %+v (%v)", before, after, err)
	}
	if m1, _, err := rack2Client.Member(ctx, "m1"); err != nil || m1.Config[lifecycle.AdmissionKey] != "" {
		t.Fatalf("rack2's m1: %+v %v", m1.Config, err)
	}

	// Bad input, each refused and audited once.
	register("node-6")
	once("an unknown cluster", approveInClusterQuery, map[string]any{"name": "node-6", "cluster": "rack9"},
		"NOT_FOUND", "cluster", "no cluster named \"rack9\": registered are default, rack2")
	if n := e.Scalar(`SELECT count(*) FROM machine_records WHERE name = 'node-6' AND cluster_id IS NOT NULL`); n != int64(0) {
		t.Fatal("an unknown cluster was written to node-6's record")
	}
	once("a member moved out of its cluster", approveInClusterQuery, map[string]any{"name": "node-5", "cluster": "default"},
		"FAILED_PRECONDITION", "cluster", "member of cluster rack2")
	// m2 is a member of rack2 only; its record names no cluster, so it counts for default.
	register("m2")
	once("a name that is a member of the other cluster only: its admission report", admitInClusterQuery, map[string]any{"name": "m2"},
		"NOT_FOUND", "", "not an Incus member of cluster default")
	if r := e.GQL(admin, reportInClusterQuery, map[string]any{"n": "m2"}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "cluster default") {
		t.Fatalf("m2's admission report: %+v", r.Errors)
	}
	once("approving into the cluster where the name is a member", approveInClusterQuery, map[string]any{"name": "m2", "cluster": "rack2"},
		"FAILED_PRECONDITION", "", "already an Incus member of cluster rack2")
	if pending, err := rack2Client.PendingJoinTokens(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("rack2's pending tokens after the refusals: %+v %v", pending, err)
	}
}

// installOperatingSystem naming rack2: the plan says which cluster, the join token in the
// cloud-init user data is rack2's (a fresh incusd of rack2's lab joins with it), and the
// record names rack2 afterwards.
func TestInstallIntoASecondCluster(t *testing.T) {
	parallel(t, lasts(15))
	x := startMAASFleet(t)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: x.lab.Identity()})
	if r := x.e.RegisterCluster(x.admin, "rack2", rack2); len(r.Errors) > 0 {
		t.Fatalf("register rack2: %+v", r.Errors)
	}
	if r := x.register(t, "node-a", "MAAS", "aaaa01"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	const install = `mutation($in: InstallOperatingSystemInput!) { installOperatingSystem(input: $in) {
		maas { status } plan { planHash refused refusals { message } facts { name value } calls { system request target } } } }`
	in := map[string]any{"name": "node-a", "series": "noble", "cluster": "rack2", "dryRun": true}
	plan := x.must(t, install, map[string]any{"in": in})["installOperatingSystem"].(map[string]any)["plan"].(map[string]any)
	if plan["refused"] != false || !strings.Contains(fmt.Sprint(plan["facts"]), "name:cluster of node-a value:rack2 (the record named no cluster, which counts for default)") ||
		!strings.Contains(fmt.Sprint(plan["calls"]), "target:node-a in cluster rack2") {
		t.Fatalf("the plan of installing node-a into rack2: %v", plan)
	}
	in["dryRun"], in["planHash"] = false, plan["planHash"]
	x.must(t, install, map[string]any{"in": in})
	if c, want := x.e.Scalar(`SELECT cluster_id FROM machine_records WHERE name = 'node-a'`), x.e.Scalar(`SELECT id FROM clusters WHERE name = 'rack2'`); c != want {
		t.Fatalf("node-a's record names cluster %v, want rack2 (%v)", c, want)
	}
	if pending, err := x.inc.PendingJoinTokens(t.Context()); err != nil || len(pending) != 0 {
		t.Fatalf("default's pending tokens: %+v %v", pending, err)
	}
	ud := string(x.maas.UserData("aaaa01"))
	token := ""
	for _, m := range tokenLine.FindAllStringSubmatch(ud, -1) {
		if m[1] != "" {
			token = m[1]
		}
	}
	if token == "" {
		t.Fatal("no join token in the user data")
	}
	// The user data's token joins a fresh incusd of rack2's lab.
	host := rack2.StartUnjoined(t, "node-a")
	cmd := exec.Command("sh", x.enrolScript(t), "--name", "node-a", "--address", host.Address, "--member-config", "storage-pool/local/source=")
	cmd.Env = append(os.Environ(), rack2.Env(host)...)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enrol with the user data's token: %v\n%s", err, out)
	}
	rack2.AddMember(host)
	if m, _, err := rack2.Client(t, rack2.Members[0]).Member(t.Context(), "node-a"); err != nil || m.Config["scheduler.instance"] != "manual" {
		t.Fatalf("node-a in rack2: %+v %v", m, err)
	}
}
