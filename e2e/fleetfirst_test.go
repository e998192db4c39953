package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// A slow or hung MAAS does not hold the fleet: the `fleet` query and the fleet stream show
// what Incus and Apelora's records know while MAAS has not answered, say since when it has
// not (one notice for the source, and on each row registered from MAAS), and the stream
// fills MAAS's side in when it answers, with no trigger and no refresh interval (an hour
// here) to bring it. The MAAS here is the simulator behind a real loopback listener that
// holds every request (Stall) until the test lets it answer; the request timeout is two
// minutes, so only the fleet's own patience can let the query answer while MAAS is held.
func TestFleetShowsIncusAndRecordsBeforeMAASAnswers(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	sm := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(sm.Config),
		producttest.WithRequestTimeout(2*time.Minute), producttest.WithFleetRefresh(time.Hour))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`, nil)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "rack-7", provisioner: MANUAL}) { machine { name } } }`, nil)
	member := lab.Members[0].Name

	release := sm.Server.Stall()
	defer release()
	held := len(sm.Server.Requests())
	const q = `{ fleet { sources { incus { available } maas { configured available message since } }
		machines { name phase member { name } maas { systemId } warnings { code message } } } }`
	d := e.MustGQL(admin, q, nil)["fleet"].(map[string]any)
	src := d["sources"].(map[string]any)
	mas := src["maas"].(map[string]any)
	if src["incus"].(map[string]any)["available"] != true {
		t.Fatalf("incus %v, want it answering", src["incus"])
	}
	msg, _ := mas["message"].(string)
	if mas["available"] != false || mas["configured"] != true || mas["since"] == nil ||
		!strings.HasPrefix(msg, "MAAS not answering (since ") || !strings.Contains(msg, "machine state from MAAS is missing") {
		t.Fatalf("sources.maas = %v while MAAS is held, want MAAS not answering since a time", mas)
	}
	if n := len(sm.Server.Requests()); n != held {
		t.Fatalf("MAAS answered %d requests while held: the query did not answer before MAAS", n-held)
	}
	rows := map[string]map[string]any{}
	for _, m := range d["machines"].([]any) {
		r := m.(map[string]any)
		rows[r["name"].(string)] = r
	}
	if r := rows[member]; r == nil || r["member"] == nil || r["phase"] != "UNREGISTERED" {
		t.Errorf("the lab's member %s: %v, want its Incus member shown", member, r)
	}
	if r := rows["rack-7"]; r == nil || r["phase"] != "REGISTERED" {
		t.Errorf("rack-7's record: %v, want it REGISTERED", r)
	}
	a := rows["node-a"]
	if a == nil || a["maas"] != nil || !strings.Contains(warningMessages(a), msg) {
		t.Errorf("node-a while MAAS is held: %v, want no MAAS machine and a MAAS_UNAVAILABLE warning saying %q", a, msg)
	}
	if _, ok := rows["node-new"]; ok {
		t.Errorf("a machine only MAAS knows is shown while MAAS has not answered: %v", rows["node-new"])
	}

	// The stream: its snapshot comes without MAAS, then MAAS's side arrives once it answers.
	s := watchFleet(t, e.Base, e.Identity("dashboard", identity.ViewInfrastructure), nil)
	first := s.snapshot()
	if first.Sources.Maas.Available || first.Sources.Maas.Since == nil || !slices.Contains(rowNames(first), member) {
		t.Fatalf("snapshot while MAAS is held: maas %+v rows %v, want MAAS not answering and the member", first.Sources.Maas, rowNames(first))
	}
	release()
	u := s.next("MAAS's side once MAAS answers", 60*time.Second)
	if u.Revision != first.Revision+1 || u.Sources == nil || !u.Sources.Maas.Available || u.Sources.Maas.Since != nil {
		t.Fatalf("after MAAS answered: %+v, want the next revision with MAAS answering", u)
	}
	var filled bool
	for _, m := range u.Changed {
		if m.Name == "node-a" {
			filled = m.Maas != nil && m.Maas.SystemId == "aaaa01" && len(m.Warnings) == 0
		}
	}
	if !filled || !slices.Contains(rowNames(u), "node-new") {
		t.Fatalf("after MAAS answered: changed %v added %v, want node-a with its MAAS machine and node-new added", u.Changed, rowNames(u))
	}

	// Unreachable: the notice keeps its wording, with the cause.
	sm.Endpoint.Close()
	d = e.MustGQL(admin, q, nil)["fleet"].(map[string]any)
	mas = d["sources"].(map[string]any)["maas"].(map[string]any)
	if msg, _ := mas["message"].(string); mas["available"] != false || mas["since"] == nil || !strings.HasPrefix(msg, "MAAS not answering (since ") {
		t.Fatalf("sources.maas with MAAS gone = %v", mas)
	}
}

func warningMessages(row map[string]any) string {
	var out []string
	ws, _ := row["warnings"].([]any)
	for _, w := range ws {
		out = append(out, w.(map[string]any)["message"].(string))
	}
	return strings.Join(out, "\n")
}

// TestConsoleFleetBeforeMAAS opens the fleet page in Chromium while MAAS holds every
// request: the Incus member and the records show at once with the "MAAS not answering"
// notice, and MAAS's 300 machines fill in when MAAS answers, without a reload. Then it
// times filter keystrokes at 300 machines while changes stream in (the power state of 50
// machines flips every 250 ms and the fleet is read every second, so most messages change
// rows): a figure for the README. Last, a bulk register of 10 machines shows each
// machine's plan and confirms each with its plan's hash (web/console/e2e/fleetfirst.e2e.mjs).
func TestConsoleFleetBeforeMAAS(t *testing.T) {
	parallel(t, lasts(22), browser)
	node, dir := consoleTools(t)
	fx := sim.Fixture{}
	for i := range 300 {
		fx.Machines = append(fx.Machines, sim.MachineSpec{
			SystemID: fmt.Sprintf("f%05d", i), Hostname: fmt.Sprintf("node-%03d", i), Status: []int{0, 4, 6, 8, 22}[i%5],
			PowerType: "ipmi", HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-%012d", i), CPUCount: 16, Memory: 65536,
		})
	}
	lab := incuslab.Start(t, 1)
	sm := producttest.StartMAAS(t, fx)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(sm.Config),
		producttest.WithRequestTimeout(2*time.Minute), producttest.WithFleetRefresh(time.Second))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-007", provisioner: MAAS, maasSystemId: "f00007"}) { machine { name } } }`, nil)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "rack-7", provisioner: MANUAL}) { machine { name } } }`, nil)
	release := sm.Server.Stall()
	defer release()

	c := newControl()
	c.handle("POST /release-maas", func() error { release(); return nil })
	var stopFlips context.CancelFunc = func() {}
	defer func() { stopFlips() }()
	c.handle("POST /stream", func() error {
		ctx, cancel := context.WithCancel(t.Context())
		stopFlips = cancel
		go func() {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				state := []string{"on", "off"}[n/6%2] // each machine flips every 1.5 s
				for i := n % 6 * 50; i < n%6*50+50; i++ {
					_ = sm.Server.Edit(fmt.Sprintf("f%05d", i), func(m *sim.MachineEdit) { m.SetPowerState(state) })
				}
			}
		}()
		return nil
	})
	runScript(t, node, dir, "fleetfirst.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "fleet-before-maas"), "CONTROL": c.serve(t),
		"MEMBER": lab.Members[0].Name,
	})
	// The bulk register the script confirmed: each machine's event keeps the hash of the
	// plan the dialog showed for it (the two registered above were shown none).
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'registerMachine' AND outcome = 'SUCCEEDED'
		AND details->>'planHash' IS NOT NULL AND parameters->'input'->>'name' LIKE 'node-29_'`).(int64); n != 10 {
		t.Errorf("%d bulk registrations confirmed with the plan shown, want 10", n)
	}
}

// A change confirmed with the plan it was shown, while MAAS does not answer, fails
// UNAVAILABLE (nothing changed), not PLAN_CHANGED: a plan that could not be made is not
// another plan. The same confirmation succeeds once MAAS answers, which is what the bulk
// dialog's retry of its failed machines sends.
func TestAConfirmationWhileMAASIsDownFailsUnavailable(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	sm := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(sm.Config), producttest.WithRequestTimeout(3*time.Second))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`, nil)
	const commission = `mutation($h: String, $dry: Boolean) { commissionMachine(input: {systemId: "aaaa01", dryRun: $dry, planHash: $h}) { plan { planHash refused } } }`
	p := e.MustGQL(admin, commission, map[string]any{"dry": true})["commissionMachine"].(map[string]any)["plan"].(map[string]any)
	hash, _ := p["planHash"].(string)
	if hash == "" || p["refused"] != false {
		t.Fatalf("plan %v, want one going ahead with a hash", p)
	}
	sm.Server.SetFault(sim.FaultUnavailable)
	r := e.GQL(admin, commission, map[string]any{"h": hash, "dry": false})
	if len(r.Errors) == 0 || r.Errors[0].Extensions["code"] != "UNAVAILABLE" {
		t.Fatalf("confirmed while MAAS answers 503: %+v, want UNAVAILABLE", r)
	}
	sm.Server.SetFault(sim.FaultNone)
	if r := e.GQL(admin, commission, map[string]any{"h": hash, "dry": false}); len(r.Errors) > 0 {
		t.Fatalf("the same confirmation once MAAS answers: %v", r.Errors)
	}
}
