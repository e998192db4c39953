package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// changeLog records the changing requests (anything but GET) a client's transport sends.
type changeLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *changeLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			l.mu.Lock()
			l.calls = append(l.calls, r.Method+" "+r.URL.RequestURI())
			l.mu.Unlock()
		}
		return next.RoundTrip(r)
	})
}

func (l *changeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// planned is a product whose Incus (and MAAS) calls are recorded at the transport.
type planned struct {
	*maasEnv
	incusCalls *changeLog
}

func startPlanned(t *testing.T, withMAAS bool) *planned {
	lab := incuslab.Start(t, 2)
	calls := &changeLog{}
	ic := lab.Config
	ic.WrapTransport = calls.wrap
	opts := []producttest.Option{producttest.WithIncus(ic)}
	var m *producttest.MAASSim
	if withMAAS {
		m = producttest.StartMAAS(t, maasFleet())
		opts = append(opts, producttest.WithMAAS(m.Config))
	}
	e := producttest.Start(t, opts...)
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	x := &enrolled{lab: lab, e: e, admin: admin, inc: lab.Client(t, lab.Members[0]),
		gql: func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }}
	return &planned{maasEnv: &maasEnv{enrolled: x, maas: m}, incusCalls: calls}
}

const planFields = `plan { refused planHash calls { system request target changes { field before after } } refusals { code message field } warnings { code message } }`

// state is what a dry run must leave as it was: the change tables, fence mappings and
// the audit trail apart from its own event.
func (x *planned) state(t *testing.T) string {
	return x.e.Snapshot() + fmt.Sprintf("fence_mappings: %v\naudit: %v\n", x.e.Count("fence_mappings"), x.e.Count("audit_events"))
}

// dryRun runs mutation(input: in + dryRun) and returns its plan, after checking it
// changed nothing, wrote no audit event (an allowed caller's dry run is none) and sent
// nothing changing to Incus or MAAS.
func (x *planned) dryRun(t *testing.T, token, mutation, inputType string, in map[string]any, extra string) (payload, plan map[string]any) {
	t.Helper()
	before := x.e.Snapshot()
	fences, events := x.e.Count("fence_mappings"), x.e.Count("audit_events")
	x.incusCalls.take()
	if x.maas != nil {
		x.maas.ResetRequests()
	}
	in = mapsWith(in, "dryRun", true)
	q := fmt.Sprintf(`mutation($in: %s!) { %s(input: $in) { %s %s } }`, inputType, mutation, planFields, extra)
	r := x.e.GQL(token, q, map[string]any{"in": in})
	if len(r.Errors) > 0 {
		t.Fatalf("%s dry run: %+v", mutation, r.Errors)
	}
	payload = r.Data[mutation].(map[string]any)
	plan, _ = payload["plan"].(map[string]any)
	if plan == nil {
		t.Fatalf("%s dry run without a plan: %v", mutation, payload)
	}
	if after := x.e.Snapshot(); after != before || x.e.Count("fence_mappings") != fences {
		t.Fatalf("%s dry run changed the database:\nbefore %s\nafter %s", mutation, before, after)
	}
	// A plan refused for permission is audited REFUSED; any other dry run writes nothing.
	if strings.Contains(fmt.Sprint(plan["refusals"]), "FORBIDDEN") {
		if n := x.e.Count("audit_events"); n != events+1 {
			t.Fatalf("%s dry run refused for permission wrote %d audit events, want 1", mutation, n-events)
		}
		if o := x.e.Scalar(`SELECT outcome || ' ' || action FROM audit_events ORDER BY id DESC LIMIT 1`); o != "REFUSED "+mutation {
			t.Fatalf("%s dry run refused for permission was audited %v", mutation, o)
		}
	} else if n := x.e.Count("audit_events"); n != events {
		t.Fatalf("%s dry run wrote %d audit events, want none", mutation, n-events)
	} else {
		// The same plan asked again is the same plan: a confirmation's planHash depends on it
		// (nothing per request, such as a request id or a time, may be in a plan).
		if again := x.e.GQL(token, q, map[string]any{"in": in}); len(again.Errors) > 0 ||
			again.Data[mutation].(map[string]any)["plan"].(map[string]any)["planHash"] != plan["planHash"] {
			t.Fatalf("%s: the same dry run asked twice hashed %v, then %+v", mutation, plan["planHash"], again.Data)
		}
	}
	if c := x.incusCalls.take(); len(c) > 0 {
		t.Fatalf("%s dry run sent Incus %v", mutation, c)
	}
	if x.maas != nil {
		for _, req := range x.maas.Requests() {
			if req.Method != http.MethodGet {
				t.Fatalf("%s dry run sent MAAS %s %s?op=%s", mutation, req.Method, req.Path, req.Op)
			}
		}
	}
	return payload, plan
}

// real runs the same mutation for real and returns the changing calls Incus and MAAS saw,
// in the plan's words ("POST machines/{id}/?op=deploy").
func (x *planned) real(t *testing.T, mutation, inputType string, in map[string]any) (incusCalls []string, maasCalls []maasCall) {
	t.Helper()
	x.incusCalls.take()
	if x.maas != nil {
		x.maas.ResetRequests()
	}
	r := x.gql(fmt.Sprintf(`mutation($in: %s!) { %s(input: $in) { plan { refused } } }`, inputType, mutation), map[string]any{"in": in})
	if len(r.Errors) > 0 {
		t.Fatalf("%s: %+v", mutation, r.Errors)
	}
	if p := r.Data[mutation].(map[string]any)["plan"]; p != nil {
		t.Fatalf("%s without dryRun answered a plan: %v", mutation, p)
	}
	if x.maas != nil {
		for _, req := range x.maas.Requests() {
			if req.Method == http.MethodGet {
				continue
			}
			_, rel, _ := strings.Cut(req.Path, "/api/2.0/")
			maasCalls = append(maasCalls, maasCall{call: req.Method + " " + rel + "?op=" + req.Op, form: req.Form})
		}
	}
	return x.incusCalls.take(), maasCalls
}

type maasCall struct {
	call string
	form url.Values
}

func mapsWith(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// callsTo are the plan's calls to system.
func callsTo(plan map[string]any, system string) []map[string]any {
	var out []map[string]any
	for _, c := range plan["calls"].([]any) {
		if c := c.(map[string]any); c["system"] == system {
			out = append(out, c)
		}
	}
	return out
}

// requestsTo are the requests of the plan's calls to system.
func requestsTo(plan map[string]any, system string) []string {
	var out []string
	for _, c := range callsTo(plan, system) {
		out = append(out, c["request"].(string))
	}
	return out
}

// samePlan runs mutation as a dry run, then for real, and checks the plan's Incus and
// MAAS calls are the ones the real mutation sent, with the same MAAS parameters.
func (x *planned) samePlan(t *testing.T, mutation, inputType string, in map[string]any) map[string]any {
	t.Helper()
	_, plan := x.dryRun(t, x.admin, mutation, inputType, in, "")
	if plan["refused"] != false {
		t.Fatalf("%s plan refused: %v", mutation, plan)
	}
	before := x.tables(t)
	gotIncus, gotMAAS := x.real(t, mutation, inputType, in)
	// The tables the plan's DATABASE calls name are the ones the real mutation changed.
	var planned, changed []string
	for _, c := range requestsTo(plan, "DATABASE") {
		verb, table, _ := strings.Cut(c, " ")
		if verb == "NOTIFY" {
			continue // a notification (admission checks) changes no table
		}
		if !slices.Contains(planned, table) {
			planned = append(planned, table)
		}
	}
	after := x.tables(t)
	for table, rows := range after {
		if before[table] != rows {
			changed = append(changed, table)
		}
	}
	slices.Sort(planned)
	slices.Sort(changed)
	if !slices.Equal(planned, changed) {
		t.Fatalf("%s: plan's database calls %q, the real mutation changed %q", mutation, requestsTo(plan, "DATABASE"), changed)
	}
	if want := requestsTo(plan, "INCUS"); !slices.Equal(want, gotIncus) {
		t.Fatalf("%s: plan's Incus calls %q, the real call made %q", mutation, want, gotIncus)
	}
	maasCalls := callsTo(plan, "MAAS")
	if len(maasCalls) != len(gotMAAS) {
		t.Fatalf("%s: plan's MAAS calls %q, the real call made %v", mutation, requestsTo(plan, "MAAS"), gotMAAS)
	}
	for i, st := range maasCalls {
		if st["request"] != gotMAAS[i].call {
			t.Fatalf("%s: plan's MAAS call %d is %v, the real one %s", mutation, i, st["request"], gotMAAS[i].call)
		}
		form := url.Values{}
		for _, c := range st["changes"].([]any) {
			ch := c.(map[string]any)
			form.Add(ch["field"].(string), fmt.Sprint(ch["after"]))
		}
		want := gotMAAS[i].form
		if ud := want.Get("user_data"); ud != "" {
			// The plan shows user data as what is approved: the script and the template by
			// their hashes, never the rendered bytes (their join token differs).
			if !strings.Contains(form.Get("user_data"), "user-data template sha256:") {
				t.Fatalf("%s: user data in the plan: %.80q", mutation, form.Get("user_data"))
			}
			form.Del("user_data")
			want = cloneWithout(want, "user_data")
		}
		if form.Encode() != want.Encode() {
			t.Fatalf("%s: plan's MAAS parameters %q, the real call sent %q", mutation, form.Encode(), want.Encode())
		}
	}
	return plan
}

// tables holds the rows of each table a mutation changes, to tell which ones a call did.
func (x *planned) tables(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range append(slices.Clone(producttest.ChangeTables), "fence_mappings") {
		out[table] = fmt.Sprint(x.e.Scalar(`SELECT coalesce(string_agg((to_jsonb(t) - 'last_used_at')::text, E'\n' ORDER BY 1), '') FROM ` + table + ` t`))
	}
	return out
}

func cloneWithout(v url.Values, k string) url.Values {
	out := url.Values{}
	for a, b := range v {
		if a != k {
			out[a] = b
		}
	}
	return out
}

func TestPlansEqualWhatTheRealCallDoesOnIncus(t *testing.T) {
	parallel(t)
	x := startPlanned(t, false)

	reg := map[string]any{"name": "node-4", "provisioner": "MANUAL"}
	plan := x.samePlan(t, "registerMachine", "RegisterMachineInput", reg)
	if c := requestsTo(plan, "DATABASE"); !slices.Equal(c, []string{"INSERT machine_records"}) {
		t.Fatalf("register plan's database steps %q", c)
	}

	// approveEnrolment: the plan issues no token and shows none.
	payload, plan := x.dryRun(t, x.admin, "approveEnrolment", "ApproveEnrolmentInput", map[string]any{"name": "node-4"}, "joinToken expiresAt")
	if payload["joinToken"] != nil || payload["expiresAt"] != nil || !slices.Equal(requestsTo(plan, "INCUS"), []string{"POST /1.0/cluster/members"}) {
		t.Fatalf("approve plan %v", payload)
	}
	if p, err := x.inc.PendingJoinTokens(t.Context()); err != nil || len(p) != 0 {
		t.Fatalf("a dry run left a pending token: %v %v", p, err)
	}
	x.samePlan(t, "approveEnrolment", "ApproveEnrolmentInput", map[string]any{"name": "node-4"})
	// Approving again would be refused: the refusal is the plan's, not an error.
	_, plan = x.dryRun(t, x.admin, "approveEnrolment", "ApproveEnrolmentInput", map[string]any{"name": "node-4"}, "")
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "FAILED_PRECONDITION") || !strings.Contains(fmt.Sprint(plan["refusals"]), "already pending") {
		t.Fatalf("approve twice, planned: %v", plan)
	}
	// revokeJoinToken deletes the token's operation: the plan names the same one.
	x.samePlan(t, "revokeJoinToken", "RevokeJoinTokenInput", map[string]any{"name": "node-4"})
	x.must(t, `mutation { approveEnrolment(input: {name: "node-4"}) { machine { name } } }`, nil)

	// Invalid input stays an error (and a REFUSED event, not a plan).
	r := x.gql(`mutation { approveEnrolment(input: {name: "Bad Name", dryRun: true}) { plan { refused } } }`, nil)
	if r.Code() != "INVALID_INPUT" {
		t.Fatalf("invalid input in a dry run: %+v", r.Errors)
	}

	// Join node-4 as enrol-member.sh would, then admit and remove it with plans first.
	x.must(t, `mutation { revokeJoinToken(input: {name: "node-4"}) { machine { name } } }`, nil)
	tok := x.must(t, `mutation { approveEnrolment(input: {name: "node-4"}) { joinToken } }`, nil)["approveEnrolment"].(map[string]any)["joinToken"].(string)
	host := x.lab.StartUnjoined(t, "node-4")
	cmd := exec.CommandContext(t.Context(), "sh", x.enrolScript(t), "--name", "node-4", "--address", host.Address, "--member-config", "storage-pool/local/source=")
	cmd.Env = append(os.Environ(), x.lab.Env(host)...)
	cmd.Stdin = strings.NewReader(tok + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enrol-member.sh: %v\n%s", err, out)
	}
	x.lab.AddMember(host)

	// A planned admission leaves the member held (PLANNED is no step of the lifecycle),
	// and its checks are pushed to nobody: the first run a watcher sees is a real one.
	events, _ := watchAdmission(t.Context(), t, x.e.Base, x.admin, "node-4")
	x.dryRun(t, x.admin, "admitMember", "AdmitMemberInput", map[string]any{"name": "node-4"}, "")
	if m := x.machine(t, "node-4"); m["phase"] != "HELD" {
		t.Fatalf("after a planned admission: %v", m)
	}
	report := x.must(t, `{ admissionReport(name: "node-4") { runId } }`, nil)["admissionReport"].(map[string]any)
	select {
	case ev := <-events:
		if ev.Errors != nil || ev.Data.AdmissionChecks.RunId != report["runId"] {
			t.Fatalf("a watcher got run %v (errors %v), want the report's %v: the plan's checks were pushed", ev.Data.AdmissionChecks.RunId, ev.Errors, report["runId"])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the report's checks were not pushed")
	}
	plan = x.samePlan(t, "admitMember", "AdmitMemberInput", map[string]any{"name": "node-4"})
	put := callsTo(plan, "INCUS")
	if len(put) != 1 || !strings.Contains(fmt.Sprint(put[0]["changes"]), "before:manual field:config.scheduler.instance") {
		t.Fatalf("admit plan's member change %v", put)
	}
	_, plan = x.dryRun(t, x.admin, "admitMember", "AdmitMemberInput", map[string]any{"name": "node-4"}, "")
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "already admitted") {
		t.Fatalf("admit twice, planned: %v", plan)
	}
	x.samePlan(t, "removeMember", "RemoveMemberInput", map[string]any{"name": "node-4", "force": true})
	x.samePlan(t, "unregisterMachine", "UnregisterMachineInput", map[string]any{"name": "node-4"})

	// Database-only mutations: hardware profiles and identities.
	x.must(t, `mutation { registerMachine(input: {name: "node-5"}) { machine { name } } }`, nil)
	x.samePlan(t, "setHardwareProfile", "SetHardwareProfileInput", map[string]any{"profile": "small", "architecture": "x86_64", "minCpuCores": 1})
	x.samePlan(t, "assignHardwareProfile", "AssignHardwareProfileInput", map[string]any{"machine": "node-5", "profile": "small"})
	x.samePlan(t, "clearHardwareProfile", "ClearHardwareProfileInput", map[string]any{"machine": "node-5"})
	x.samePlan(t, "removeHardwareProfile", "RemoveHardwareProfileInput", map[string]any{"profile": "small"})
	payload, _ = x.dryRun(t, x.admin, "createIdentity", "CreateIdentityInput", map[string]any{"name": "ops", "permissions": []string{"VIEW_INFRASTRUCTURE"}}, "token identity { name }")
	if payload["token"] != nil {
		t.Fatalf("a planned createIdentity answered a token")
	}
	x.samePlan(t, "createIdentity", "CreateIdentityInput", map[string]any{"name": "ops", "permissions": []string{"VIEW_INFRASTRUCTURE"}})
	x.samePlan(t, "revokeIdentity", "RevokeIdentityInput", map[string]any{"name": "ops"})
	x.samePlan(t, "setFenceMapping", "SetFenceMappingInput", map[string]any{"member": "m2", "maasSystemId": "mmmm02", "hardwareUuid": uuidM2})
	x.samePlan(t, "removeFenceMapping", "RemoveFenceMappingInput", map[string]any{"member": "m2"})

	// A busy machine (another change holds its lease) is BUSY in the plan, not an error.
	release := x.e.HoldMachine("node-5")
	_, plan = x.dryRun(t, x.admin, "unregisterMachine", "UnregisterMachineInput", map[string]any{"name": "node-5"}, "")
	release()
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "BUSY") {
		t.Fatalf("plan while the machine is busy: %v", plan)
	}

	// A caller who may read but not manage gets the plan with the refusal, and nothing of
	// the mutation runs for them: no step, and no machine lock taken (node-5 stays free).
	viewer := x.e.Identity("viewer", identity.ViewInfrastructure)
	for _, name := range []string{"node-6", "node-5"} {
		_, plan = x.dryRun(t, viewer, "registerMachine", "RegisterMachineInput", map[string]any{"name": name}, "")
		if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "FORBIDDEN") || len(plan["calls"].([]any)) != 0 {
			t.Fatalf("viewer's plan %v", plan)
		}
	}
	// PLANNED events move no machine's steps: node-5's phase is its real one.
	if m := x.machine(t, "node-5"); m["phase"] != "REGISTERED" {
		t.Fatalf("node-5 after plans: %v", m)
	}
}

func TestPlansEqualWhatTheRealCallDoesOnMAAS(t *testing.T) {
	parallel(t)
	x := startPlanned(t, true)
	if r := x.register(t, "node-a", "MAAS", "aaaa01"); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	x.samePlan(t, "runHardwareTests", "RunHardwareTestsInput", map[string]any{"systemId": "aaaa01", "hostname": "node-a", "tests": []string{"smartctl-validate"}})
	x.maas.Clock.Advance(time.Minute) // tests finish: back to Ready
	plan := x.samePlan(t, "installOperatingSystem", "InstallOperatingSystemInput", map[string]any{"name": "node-a", "series": "noble"})
	if c := requestsTo(plan, "INCUS"); !slices.Equal(c, []string{"POST /1.0/cluster/members"}) {
		t.Fatalf("install plan's Incus calls %q", c)
	}
	if c := requestsTo(plan, "MAAS"); !slices.Equal(c, []string{"POST machines/?op=allocate", "POST machines/aaaa01/?op=deploy"}) {
		t.Fatalf("install plan's MAAS calls %q", c)
	}
	for name, id := range map[string]string{"node-new": "nnnn03", "node-busy": "dddd04"} {
		if r := x.register(t, name, "MAAS", id); len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
	}
	x.samePlan(t, "commissionMachine", "CommissionMachineInput", map[string]any{"systemId": "nnnn03", "tests": []string{}})

	// Release with erase by a caller without hardware.delete: the plan says it would be
	// refused and why, for this machine, and still shows the step.
	manager := x.e.Identity("manager", identity.ManageInfrastructure)
	_, plan = x.dryRun(t, manager, "releaseMachine", "ReleaseMachineInput", map[string]any{"systemId": "dddd04", "erase": true}, "")
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "FORBIDDEN") || !strings.Contains(fmt.Sprint(plan["refusals"]), "hardware.delete") {
		t.Fatalf("release plan without hardware.delete: %v", plan)
	}
	if strings.Contains(fmt.Sprint(plan["warnings"]), "will be erased") || len(requestsTo(plan, "MAAS")) != 1 {
		t.Fatalf("release plan of a caller who may not erase: %v", plan)
	}
	plan = x.samePlan(t, "releaseMachine", "ReleaseMachineInput", map[string]any{"systemId": "dddd04", "erase": true, "comment": "planned"})
	if !strings.Contains(fmt.Sprint(plan["warnings"]), "the disks will be erased (asked for)") {
		t.Fatalf("release plan's word on the disks: %v", plan["warnings"])
	}
	if c := requestsTo(plan, "MAAS"); !slices.Equal(c, []string{"POST machines/dddd04/?op=release"}) {
		t.Fatalf("release plan %q", c)
	}
}
