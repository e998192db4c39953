package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// Drift is tested with short settings: a round every 2 s (and at once after Incus events),
// offline drift after 6 s seen offline, and a 3 s request timeout so a frozen member
// costs little per round.
var driftOptions = []producttest.Option{producttest.WithDrift(2*time.Second, 6*time.Second), producttest.WithRequestTimeout(3 * time.Second)}

// replicas is a lab cluster with two API replicas on one database, both running the
// drift watcher (one leads).
type replicas struct {
	*enrolled
	b     *producttest.Env // the second replica
	bGQL  func(q string, vars map[string]any) *producttest.Response
	token string
}

func startReplicas(t *testing.T, members int, opts ...producttest.Option) *replicas {
	lab := incuslab.Start(t, members)
	db := pgtest.New(t)
	opts = append([]producttest.Option{producttest.WithIncus(lab.Config)}, opts...)
	a := producttest.StartOn(t, db, db.Store, opts...)
	other, err := postgres.Open(context.Background(), db.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	b := producttest.StartOn(t, db, other, opts...)
	admin := a.Identity("admin", identity.ManageInfrastructure)
	x := &enrolled{lab: lab, e: a, admin: admin, inc: lab.Client(t, lab.Members[0]),
		gql: func(q string, vars map[string]any) *producttest.Response { return a.GQL(admin, q, vars) }}
	return &replicas{enrolled: x, b: b, token: admin,
		bGQL: func(q string, vars map[string]any) *producttest.Response { return b.GQL(admin, q, vars) }}
}

// enrol takes name from registered to a held member, as an administrator and the new
// host do: register, approve, enrol-member.sh with the token on standard input.
func (x *enrolled) enrol(t *testing.T, name string) *incuslab.Member {
	t.Helper()
	x.must(t, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": name})
	token := x.must(t, `mutation($n: String!) { approveEnrolment(input: {name: $n}) { joinToken } }`, map[string]any{"n": name})["approveEnrolment"].(map[string]any)["joinToken"].(string)
	host := x.lab.StartUnjoined(t, name)
	cmd := exec.CommandContext(t.Context(), "sh", x.enrolScript(t), "--name", name, "--address", host.Address, "--member-config", "storage-pool/local/source=")
	cmd.Env = append(os.Environ(), x.lab.Env(host)...)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enrol-member.sh: %v\n%s", err, out)
	}
	x.lab.AddMember(host)
	return host
}

func (x *enrolled) incus(t *testing.T, args ...string) {
	t.Helper()
	if out, err := x.lab.CLI(x.lab.Members[0], args...); err != nil {
		t.Fatalf("incus %v: %v\n%s", args, err, out)
	}
}

// driftStream follows driftChanges on a server through the generated client.
type driftStream struct {
	t      *testing.T
	events chan client.DriftEventFields
}

func watchDrift(t *testing.T, base, token string, machine, after *string) *driftStream {
	t.Helper()
	ws, err := client.NewWebSocket(base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	raw, _, err := client.DriftChanges(t.Context(), ws, machine, after)
	if err != nil {
		t.Fatal(err)
	}
	s := &driftStream{t: t, events: make(chan client.DriftEventFields, 256)}
	go func() {
		for r := range raw {
			if r.Errors != nil {
				t.Errorf("driftChanges: %v", r.Errors)
				return
			}
			s.events <- r.Data.DriftChanges.DriftEventFields
		}
	}()
	return s
}

// fromNow is the id of the newest drift event ("0" when none), for watchDrift's after: the
// watcher then has every event recorded from now on, however late its subscription
// starts on a loaded machine (no sleep "until it is subscribed").
func fromNow(t *testing.T, e *producttest.Env) *string {
	t.Helper()
	id := fmt.Sprint(e.Scalar(`SELECT coalesce(max(id), 0) FROM drift_events`))
	return &id
}

// next waits for the next event, failing after a minute.
func (s *driftStream) next(what string) client.DriftEventFields {
	s.t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-time.After(90 * time.Second):
		s.t.Fatalf("no drift event pushed: waited for %s", what)
		return client.DriftEventFields{}
	}
}

// expect waits for the event and checks it.
func (s *driftStream) expect(machine, check string, change client.DriftChange, evidence string) client.DriftEventFields {
	s.t.Helper()
	e := s.next(machine + " " + check + " " + string(change))
	if e.Machine != machine || e.Check != check || e.Change != change || !strings.Contains(e.Evidence, evidence) {
		s.t.Fatalf("pushed %+v, want %s %s %s with %q", e, machine, check, change, evidence)
	}
	return e
}

const driftQuery = `query($n: String) { drift(machine: $n) { machine check title since raisedAt evidence lastChecked } }`

const driftMachineQuery = `query($n: String!) { machine(name: $n) { phase driftCheckedAt warnings { code message drift { check since evidence lastChecked } } } }`

// listed returns the drift checks listed for machine by a replica, and the machine's DRIFT warnings.
func listed(t *testing.T, gql func(string, map[string]any) *producttest.Response, machine string) (checks, warnings []string, phase string) {
	t.Helper()
	var vars map[string]any
	if machine != "" {
		vars = map[string]any{"n": machine}
	}
	r := gql(driftQuery, vars)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	for _, d := range r.Data["drift"].([]any) {
		d := d.(map[string]any)
		if d["since"] == "" || d["raisedAt"] == "" || d["lastChecked"] == "" || d["evidence"] == "" || d["title"] == "" {
			t.Fatalf("drift without its facts: %v", d)
		}
		checks = append(checks, d["check"].(string))
	}
	if machine == "" {
		return checks, nil, ""
	}
	m := gql(driftMachineQuery, map[string]any{"n": machine})
	if len(m.Errors) > 0 {
		t.Fatal(m.Errors)
	}
	mm := m.Data["machine"].(map[string]any)
	if mm["driftCheckedAt"] == nil {
		t.Fatalf("%s is admitted, yet never re-checked: %v", machine, mm)
	}
	for _, w := range mm["warnings"].([]any) {
		w := w.(map[string]any)
		if w["code"] != "DRIFT" {
			continue
		}
		d, _ := w["drift"].(map[string]any)
		if d == nil || !strings.Contains(w["message"].(string), d["evidence"].(string)) {
			t.Fatalf("DRIFT warning without its drift: %v", w)
		}
		warnings = append(warnings, d["check"].(string))
	}
	return checks, warnings, mm["phase"].(string)
}

// incusMethods returns the HTTP methods of the Incus calls a replica logged from offset on.
func incusMethods(t *testing.T, logs string) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Method string `json:"method"`
			Path   string `json:"path"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "incus request" {
			out[line.Method]++
		}
	}
	return out
}

func TestDriftRaisedAndClearedOnARealCluster(t *testing.T) {
	parallel(t, lasts(49))
	x := startReplicas(t, 3, driftOptions...)
	node := x.enrol(t, "node-4")
	// A role of the administrator's, so that dropping it later is drift.
	x.incus(t, "cluster", "role", "add", "node-4", "event-hub")
	if r := x.gql(`mutation { admitMember(input: {name: "node-4"}) { machine { phase } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	// From here on nothing is changed through Apelora: every Incus call either replica makes
	// is a read, and the audit trail gains nothing (drift is not an administrator's change).
	logsA, logsB := len(x.e.Logs.String()), len(x.b.Logs.String())
	audits := x.e.Count("audit_events")

	// Subscribed on the second replica, whichever replica leads the watch.
	node4 := "node-4"
	s := watchDrift(t, x.b.Base, x.token, &node4, fromNow(t, x.e))

	start := time.Now()
	x.incus(t, "cluster", "set", "node-4", "scheduler.instance=manual")
	raised := s.expect("node-4", "scheduler", client.DriftChangeRaised, "scheduler.instance=manual")
	t.Logf("scheduler.instance set to the push on the other replica: %s (rounds every 2 s; Incus's event starts one at once)", time.Since(start))
	for name, gql := range map[string]func(string, map[string]any) *producttest.Response{"A": x.gql, "B": x.bGQL} {
		checks, warnings, phase := listed(t, gql, "node-4")
		if strings.Join(checks, ",") != "scheduler" || strings.Join(warnings, ",") != "scheduler" || phase != "HELD" {
			t.Fatalf("replica %s: drift %v, warnings %v, phase %s", name, checks, warnings, phase)
		}
	}
	x.incus(t, "cluster", "unset", "node-4", "scheduler.instance")
	cleared := s.expect("node-4", "scheduler", client.DriftChangeCleared, "unset")
	if !cleared.Since.Equal(raised.Since) {
		t.Fatalf("cleared since %s, raised since %s", cleared.Since, raised.Since)
	}
	if checks, warnings, phase := listed(t, x.bGQL, "node-4"); len(checks)+len(warnings) != 0 || phase != "ADMITTED" {
		t.Fatalf("after undo: %v %v %s", checks, warnings, phase)
	}

	// Roles: the one recorded at admission dropped, then given back.
	x.incus(t, "cluster", "role", "remove", "node-4", "event-hub")
	s.expect("node-4", "roles", client.DriftChangeRaised, "roles dropped since admission: event-hub")
	x.incus(t, "cluster", "role", "add", "node-4", "event-hub")
	s.expect("node-4", "roles", client.DriftChangeCleared, "event-hub")

	// A storage pool the member failed to create (its source does not exist there), then
	// the pool deleted.
	// (As for admission, a pool counts from its first definition: node-4's comes first, so
	// every look from then on finds it Pending there.)
	x.incus(t, "storage", "create", "probe", "dir", "source=/nonexistent/apelora-drift", "--target", "node-4")
	for _, m := range []string{"m1", "m2", "m3"} {
		x.incus(t, "storage", "create", "probe", "dir", "--target", m)
	}
	if _, err := x.lab.CLI(x.lab.Members[0], "storage", "create", "probe", "dir"); err == nil {
		t.Fatal("the pool was created on every member; the test needs node-4's to fail")
	}
	s.expect("node-4", "storage-pools", client.DriftChangeRaised, "probe (Pending)")
	if checks, _, _ := listed(t, x.bGQL, ""); strings.Join(checks, ",") != "storage-pools" {
		t.Fatalf("every machine's drift: %v", checks)
	}
	x.incus(t, "storage", "delete", "probe")
	s.expect("node-4", "storage-pools", client.DriftChangeCleared, "local")

	// Offline: only past the threshold, and only as offline (what cannot be asked of a
	// frozen member is not drift).
	if err := x.lab.Freeze(node); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	s.expect("node-4", "online", client.DriftChangeRaised, "Offline")
	t.Logf("frozen to offline drift: %s (Incus's offline threshold 20 s, drift's 6 s)", time.Since(start))
	if err := x.lab.Thaw(node); err != nil {
		t.Fatal(err)
	}
	s.expect("node-4", "online", client.DriftChangeCleared, "online")

	// The whole history replays, in order, from the first event.
	zero := "0"
	h := watchDrift(t, x.e.Base, x.token, nil, &zero)
	var history []string
	for range 8 {
		e := h.next("the history")
		history = append(history, e.Check+" "+string(e.Change))
	}
	want := "scheduler RAISED,scheduler CLEARED,roles RAISED,roles CLEARED,storage-pools RAISED,storage-pools CLEARED,online RAISED,online CLEARED"
	if strings.Join(history, ",") != want {
		t.Fatalf("history %v\nwant %s", history, want)
	}
	select {
	case e := <-s.events:
		t.Fatalf("an event nothing caused: %+v", e)
	default:
	}

	w := x.bGQL(`{ driftWatcher { replica machines intervalSeconds offlineAfterSeconds lastRoundAt problem } }`, nil)
	if len(w.Errors) > 0 || w.Data["driftWatcher"] == nil || w.Data["driftWatcher"].(map[string]any)["intervalSeconds"] != 2.0 {
		t.Fatalf("watcher %v %v", w.Data, w.Errors)
	}
	// Read only, both replicas; nothing audited.
	for name, logs := range map[string]string{"A": x.e.Logs.String()[logsA:], "B": x.b.Logs.String()[logsB:]} {
		m := incusMethods(t, logs)
		if len(m) != 1 || m["GET"] == 0 {
			t.Errorf("replica %s called Incus with %v since the admission: drift must only read", name, m)
		}
	}
	if n := x.e.Count("audit_events"); n != audits {
		t.Errorf("the audit trail grew from %d to %d events: drift is not an administrator's change", audits, n)
	}
}

func TestDriftOfALaterMAASHardwareTest(t *testing.T) {
	parallel(t, lasts(13))
	lab := incuslab.Start(t, 2)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, append([]producttest.Option{producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config)}, driftOptions...)...)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	gql := func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }
	if r := gql(`mutation { registerMachine(input: {name: "m2", provisioner: MAAS, maasSystemId: "mmmm02"}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	// m2 joined plainly (the lab's member): admitted as it is, its MAAS tests passed.
	if r := gql(`mutation { admitMember(input: {name: "m2"}) { report { verdict } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	m2 := "m2"
	s := watchDrift(t, e.Base, admin, &m2, fromNow(t, e))
	m.ResetRequests()

	// MAAS tests the deployed machine again (not through Apelora), and a test fails.
	if err := m.Edit("mmmm02", func(ed *sim.MachineEdit) { ed.SetTestOutcome("smartctl-validate", "failed") }); err != nil {
		t.Fatal(err)
	}
	mc, err := maas.New(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Test(context.Background(), "mmmm02", maas.TestOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Clock.Advance(time.Minute)
	// A drift round may land while MAAS still tests (between Test and the clock's step):
	// the drift is raised then with "running", and its evidence reads "failed" a round later.
	s.expect("m2", "hardware-tests", client.DriftChangeRaised, "MAAS hardware tests are ")
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := gql(driftQuery, map[string]any{"n": "m2"})
		if len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
		if strings.Contains(fmt.Sprint(r.Data["drift"]), "MAAS hardware tests are failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m2's drift never said the tests failed: %v", r.Data["drift"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	if checks, warnings, _ := listed(t, gql, "m2"); strings.Join(checks, ",") != "hardware-tests" || strings.Join(warnings, ",") != "hardware-tests" {
		t.Fatalf("m2: drift %v, warnings %v", checks, warnings)
	}

	// MAAS unreachable says nothing: the drift stays, nothing is cleared or raised.
	m.SetFault(sim.FaultUnavailable)
	time.Sleep(5 * time.Second) // two rounds
	m.SetFault(sim.FaultNone)
	select {
	case ev := <-s.events:
		t.Fatalf("MAAS unreachable changed drift: %+v", ev)
	default:
	}

	if err := m.Edit("mmmm02", func(ed *sim.MachineEdit) { ed.SetTestOutcome("smartctl-validate", "passed") }); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Test(context.Background(), "mmmm02", maas.TestOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Clock.Advance(time.Minute)
	s.expect("m2", "hardware-tests", client.DriftChangeCleared, "passed")

	// A hardware profile it does not meet (assigned, or declared again with more after the
	// admission): drift on both halves; cleared with the profile.
	for _, q := range []string{
		`mutation { setHardwareProfile(input: {profile: "huge", architecture: "x86_64", minCpuCores: 16384}) { profile { name } } }`,
		`mutation { assignHardwareProfile(input: {machine: "m2", profile: "huge"}) { machine { name } } }`,
	} {
		if r := gql(q, nil); len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
	}
	s.expect("m2", "hardware-profile-maas", client.DriftChangeRaised, "")
	s.expect("m2", "hardware-profile-incus", client.DriftChangeRaised, "wants at least 16384 CPU cores")
	if r := gql(`mutation { clearHardwareProfile(input: {machine: "m2"}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	s.expect("m2", "hardware-profile-maas", client.DriftChangeCleared, "no hardware profile")
	s.expect("m2", "hardware-profile-incus", client.DriftChangeCleared, "no hardware profile")

	// Apelora only read MAAS: the only other requests are the two test runs made here.
	for _, req := range m.Requests() {
		if req.Method != "GET" && req.Op != "test" {
			t.Errorf("Apelora sent %s %s op=%s to MAAS while watching for drift", req.Method, req.Path, req.Op)
		}
	}
	if n := m.CountRequests("POST", "test"); n != 2 {
		t.Errorf("%d test runs, want the 2 made by the test", n)
	}
	// Drift's evidence quotes MAAS's answers, never its key (database and logs).
	checkNoMAASKey(t, &maasEnv{enrolled: &enrolled{e: e}, maas: m})
}

// With an interval of an hour, only Incus's lifecycle events can bring drift in quickly.
func TestDriftFollowsIncusEvents(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 2)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithDrift(time.Hour, time.Hour))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for _, q := range []string{
		`mutation { registerMachine(input: {name: "m2", provisioner: MANUAL}) { machine { name } } }`,
		`mutation { admitMember(input: {name: "m2"}) { report { verdict } } }`,
	} {
		if r := e.GQL(admin, q, nil); len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
	}
	m2 := "m2"
	s := watchDrift(t, e.Base, admin, &m2, fromNow(t, e))
	cli := func(args ...string) {
		if out, err := lab.CLI(lab.Members[0], args...); err != nil {
			t.Fatalf("incus %v: %v\n%s", args, err, out)
		}
	}
	cli("cluster", "set", "m2", "scheduler.instance=group")
	s.expect("m2", "scheduler", client.DriftChangeRaised, "scheduler.instance=group")
	cli("cluster", "unset", "m2", "scheduler.instance")
	s.expect("m2", "scheduler", client.DriftChangeCleared, "unset")
	if !strings.Contains(e.Logs.String(), "following Incus lifecycle events") {
		t.Error("the watcher does not say it follows Incus's events")
	}
}

func TestDriftReadsAndHostileArguments(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	if r := e.GQL("", `{ drift { machine } }`, nil); r.Code() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous: %+v", r.Errors)
	}
	// Nothing watched yet: no drift, no watcher (not a zero one).
	r := e.GQL(viewer, `{ drift { machine } driftWatcher { replica } }`, nil)
	if len(r.Errors) > 0 || len(r.Data["drift"].([]any)) != 0 || r.Data["driftWatcher"] != nil {
		t.Fatalf("fresh: %v %v", r.Data, r.Errors)
	}
	for _, bad := range []string{"x\x00y", strings.Repeat("n", 100000), "Node-4", "\xff"} {
		r := e.GQL(viewer, `query($n: String) { drift(machine: $n) { machine } }`, map[string]any{"n": bad})
		if r.Code() != "INVALID_INPUT" || len(r.Errors[0].Message) > 400 {
			t.Errorf("drift(machine: %.20q): %+v", bad, r.Errors)
		}
	}
	ws, err := client.NewWebSocket(e.Base+"/graphql", viewer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, after := range []string{"-1", "abc", "1e9", strings.Repeat("9", 40)} {
		raw, _, err := client.DriftChanges(t.Context(), ws, nil, &after)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case resp := <-raw:
			if resp.Errors == nil || !strings.Contains(resp.Errors.Error(), "drift event id") {
				t.Errorf("after %q: %+v", after, resp)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %q: no answer", after)
		}
	}
}
