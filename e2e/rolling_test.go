package e2e

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/testkit/incuslab"
)

// rollingEnv is the fence environment with the simulator's power cycle wired to the lab:
// a power-off (once the simulator's clock says it happened) kills the member's incusd, a
// power-on starts it again on its own directory, unless the test keeps it dead.
type rollingEnv struct {
	*fenceEnv
	mu   sync.Mutex
	dead map[string]bool // members whose power-on brings nothing back
}

func startRollingEnv(t *testing.T) *rollingEnv {
	x := &rollingEnv{fenceEnv: startFenceEnv(t, 3, nil, fastFence("1m")), dead: map[string]bool{}}
	lab := x.lab
	x.maas.SetPowerOnHook(func(id string) {
		m := lab.Member(strings.TrimPrefix(id, "fnc"))
		x.mu.Lock()
		dead := m == nil || x.dead[m.Name]
		x.mu.Unlock()
		if dead {
			return
		}
		// The power-off hook has killed it (confirmation waits for it to stop answering).
		for i := 0; m.Running() && i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if err := lab.RestartMember(m); err != nil {
			t.Errorf("power-on hook: %v", err)
		}
	})
	x.maas.runClock(t)
	return x
}

// workerEnv: the worker is given m1's URL alone (APELORA_INCUS_URL), which it reboots
// too: it reaches the cluster through the members it learns from it.
func (x *rollingEnv) workerEnv() []string {
	return []string{"APELORA_ROLLING_ONLINE_TIMEOUT=60s"}
}

// rolling reads the rolling reboot (latest when id is ""), by the new names and by an old
// client's (step, stepSince, stepSeconds: deprecated), which must answer alike.
func (x *rollingEnv) rolling(id string) map[string]any {
	var vars map[string]any
	const fields = `id members current done stage stageSince stageSeconds step stepSince stepSeconds state reason`
	q := `{ rollingReboot { ` + fields + ` } }`
	if id != "" {
		q = `query($id: ID) { rollingReboot(id: $id) { ` + fields + ` } }`
		vars = map[string]any{"id": id}
	}
	r, _ := x.gql(x.bare, q, vars)["rollingReboot"].(map[string]any)
	if r != nil && (r["step"] != r["stage"] || r["stepSince"] != r["stageSince"] || r["stepSeconds"] != r["stageSeconds"]) {
		x.t.Fatalf("rolling reboot %s: its stage and an old client's step differ: %v", id, r)
	}
	return r
}

// awaitRolling waits until the rolling reboot id satisfies cond, logging each new stage.
func (x *rollingEnv) awaitRolling(id, what string, cond func(map[string]any) bool) map[string]any {
	x.t.Helper()
	deadline := time.Now().Add(2 * fenceWaitLimit)
	last := ""
	for {
		r := x.rolling(id)
		if now := fmt.Sprintf("%v %v %v", r["current"], r["stage"], r["state"]); now != last {
			x.t.Logf("rolling reboot %s: %s", id, now)
			last = now
		}
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("rolling reboot %s: %s did not happen: %v\n%s", id, what, r, x.workerLogs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func stateIs(s string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["state"] == s }
}

// TestRollingRebootOnARealCluster reboots the three members of a real lab in turn through
// the MAAS simulator (its power cycle stops and restarts the member's incusd), with the
// driving worker killed mid-run and a standby carrying on; then a member that does not
// come back stops the rolling reboot with the member left evacuated; then pause, resume and
// cancel, and the refusals.
func TestRollingRebootOnARealCluster(t *testing.T) {
	parallel(t, lasts(217))
	x := startRollingEnv(t)
	lab := x.lab
	m1 := lab.Members[0]
	cli := func(args ...string) string {
		t.Helper()
		out, err := lab.CLI(m1, args...)
		if err != nil {
			t.Fatalf("incus %v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	cli("profile", "device", "add", "default", "root", "disk", "path=/", "pool="+incuslab.Pool)
	where := map[string]string{}
	for i, m := range lab.Members {
		cli("cluster", "set", m.Name, lifecycle.AdmissionKey, "test")
		for j := range 2 {
			n := fmt.Sprintf("c%d%d", i+1, j)
			cli("init", "--empty", n, "-s", incuslab.Pool, "--target", m.Name)
			where[n] = m.Name
		}
	}
	locations := func() map[string]string {
		out := map[string]string{}
		for _, line := range strings.Split(cli("list", "-c", "nL", "-f", "csv"), "\n") {
			if name, loc, ok := strings.Cut(line, ","); ok {
				out[name] = loc
			}
		}
		return out
	}
	for _, m := range lab.Members {
		x.gql(x.api, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": m.Name})
		x.gql(x.api, setMapping, mappingVars(m.Name, x.maas.ids[m.Name], x.maas.uuids[m.Name]))
	}
	const start = `mutation($m: [String!]!, $dry: Boolean) { startRollingReboot(input: {members: $m, dryRun: $dry}) {
		rollingReboot { id state stage current } plan { refused refusals { code message } quorum { leaving votersOnlineAfter } } } }`

	// Refusals: an unknown member, a name twice.
	if r := x.api.GQL(x.admin, start, map[string]any{"m": []string{"m1", "nope"}}); r.Code() != "NOT_FOUND" || !strings.Contains(r.Errors[0].Message, "nope") {
		t.Fatalf("unknown member: %+v", r.Errors)
	}
	if r := x.api.GQL(x.admin, start, map[string]any{"m": []string{"m1", "m1"}}); r.Code() != "INVALID_INPUT" {
		t.Fatalf("a member twice: %+v", r.Errors)
	}
	// The plan: nothing recorded, the first member's projection.
	plan := x.gql(x.api, start, map[string]any{"m": []string{"m1", "m2", "m3"}, "dry": true})["startRollingReboot"].(map[string]any)["plan"].(map[string]any)
	if plan["refused"] != false || x.api.Count("rolling_operations") != 0 {
		t.Fatalf("plan: %v", plan)
	}

	// The whole loop, with the driver killed once mid-run.
	w1 := x.startWorker("w1", x.workerEnv()...)
	began := time.Now()
	op := x.gql(x.api, start, map[string]any{"m": []string{"m1", "m2", "m3"}})["startRollingReboot"].(map[string]any)["rollingReboot"].(map[string]any)
	id := op["id"].(string)
	if r := x.api.GQL(x.admin, start, map[string]any{"m": []string{"m2"}}); r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "one rolling reboot per cluster") {
		t.Fatalf("a second rolling reboot: %+v", r.Errors)
	}
	x.awaitRolling(id, "m2 under way", func(r map[string]any) bool {
		return r["current"] == "m2" && r["stage"] == "POWER_OFF" || r["state"] != "RUNNING"
	})
	w1.kill(syscall.SIGKILL)
	x.startWorker("w2", x.workerEnv()...)
	final := x.awaitRolling(id, "the end", func(r map[string]any) bool { return r["state"] != "RUNNING" })
	took := time.Since(began)
	if final["state"] != "SUCCEEDED" || final["done"] != float64(3) || final["current"] != nil {
		t.Fatalf("rolling reboot ended %v\n%s", final, x.workerLogs())
	}
	t.Logf("3 members rebooted in %v (with the driver killed once)", took.Round(time.Second))
	for _, m := range lab.Members {
		t.Logf("%s: evacuate to restored in %.1f s", m.Name, x.api.Scalar(`SELECT extract(epoch FROM max(at) - min(at))::float8 FROM audit_events
			WHERE action = 'rollingRebootStep' AND machine = $1 AND parameters->>'rollingReboot' = $2`, m.Name, id))
	}
	if got := locations(); fmt.Sprint(got) != fmt.Sprint(where) {
		t.Fatalf("instances are not back where they were: %v, want %v", got, where)
	}
	for _, m := range lab.Members {
		for _, step := range []string{"EVACUATE", "POWER_OFF", "CONFIRM_OFF", "POWER_ON", "WAIT_ONLINE", "RESTORE"} {
			// The driver's own outcome of each step (one the killed driver sent and the
			// reconciler recorded is counted below).
			n := x.api.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'rollingRebootStep' AND machine = $1 AND parameters->>'step' = $2 AND outcome = 'SUCCEEDED'
				AND details->>'recordedBy' IS DISTINCT FROM 'reconciler'`, m.Name, step).(int64)
			if n != 1 {
				t.Errorf("%s %s: %d audit events, want 1", m.Name, step, n)
			}
		}
		if n := x.maas.requests(m.Name, "power_off"); n != 1 {
			t.Errorf("%s: %d power_off requests to MAAS, want 1", m.Name, n)
		}
		if n := x.maas.requests(m.Name, "power_on"); n != 1 {
			t.Errorf("%s: %d power_on requests to MAAS, want 1", m.Name, n)
		}
	}
	if n := x.api.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'rollingRebootStep' AND outcome NOT IN ('SUCCEEDED', 'STARTED')
		AND details->>'recordedBy' IS DISTINCT FROM 'reconciler'`).(int64); n != 0 {
		t.Errorf("%d failed steps", n)
	}
	// The steps sent to Incus or MAAS (evacuate, power off, power on, restore) were each an
	// intent and one outcome: the driver's, or, for a command the killed driver had in
	// flight, the reconciler's (what MAAS then showed); the next driver took the step again.
	waitUntil(t, "every step's outcome recorded", func() bool {
		return x.api.Scalar(`SELECT count(*) FROM change_steps WHERE outcome IS NULL`).(int64) == 0
	})
	if n := x.api.Scalar(`SELECT count(*) FROM change_steps c WHERE action = 'rollingRebootStep'
		AND (SELECT count(*) FROM audit_events a WHERE a.details->>'intent' = c.intent_event::text) = 1`).(int64); n < 12 {
		t.Errorf("%d steps sent upstream with an intent and one outcome, want at least 12", n)
	}
	if n := x.api.Scalar(`SELECT count(*) FROM fence_events WHERE kind IN ('ELIGIBLE', 'REQUESTED', 'CONFIRMED')`).(int64); n != 0 {
		t.Errorf("%d fence decisions or power-offs by the fence worker during a rolling reboot", n)
	}

	// A member that does not come back: the rolling reboot stops there, the member stays evacuated.
	x.mu.Lock()
	x.dead["m2"] = true
	x.mu.Unlock()
	op = x.gql(x.api, start, map[string]any{"m": []string{"m2", "m3"}})["startRollingReboot"].(map[string]any)["rollingReboot"].(map[string]any)
	failed := x.awaitRolling(op["id"].(string), "the stop", func(r map[string]any) bool { return r["state"] != "RUNNING" })
	reason, _ := failed["reason"].(string)
	if failed["state"] != "FAILED" || failed["current"] != "m2" || failed["stage"] != "WAIT_ONLINE" || !strings.Contains(reason, "did not come back within 1m0s") {
		t.Fatalf("a member that does not come back: %v", failed)
	}
	t.Logf("stopped: %s", reason)
	if st := cli("cluster", "list", "-c", "ns", "-f", "csv"); !strings.Contains(st, "m2,EVACUATED") {
		t.Fatalf("m2 should stay evacuated: %s", st)
	}
	if n := x.api.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'rollingRebootStep' AND machine = 'm2' AND parameters->>'step' = 'WAIT_ONLINE' AND outcome = 'FAILED'`).(int64); n != 1 {
		t.Errorf("%d FAILED WAIT_ONLINE events for m2, want 1", n)
	}
	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Errorf("m3 was touched after m2 failed: %d power_off requests", n)
	}
	// Bring m2 back by hand and restore it, as the reason says.
	if err := lab.RestartMember(lab.Member("m2")); err != nil {
		t.Fatal(err)
	}
	x.waitFor("m2 answering", func() bool { _, err := lab.CLI(m1, "query", "/1.0/cluster/members/m2/state"); return err == nil })
	x.gql(x.api, `mutation { restoreMember(input: {name: "m2"}) { task { id } } }`, nil)
	x.waitFor("m2 restored", func() bool { return strings.Contains(cli("cluster", "list", "-c", "ns", "-f", "csv"), "m2,ONLINE") })

	// Pause, resume, cancel, with the driver stopped so nothing races them.
	for _, w := range x.workers {
		w.kill(syscall.SIGKILL)
	}
	op = x.gql(x.api, start, map[string]any{"m": []string{"m3"}})["startRollingReboot"].(map[string]any)["rollingReboot"].(map[string]any)
	id = op["id"].(string)
	move := func(verb string, dry bool) map[string]any {
		t.Helper()
		q := fmt.Sprintf(`mutation($id: ID!, $dry: Boolean) { %sRollingReboot(input: {id: $id, dryRun: $dry}) { rollingReboot { state reason } plan { refused } } }`, verb)
		return x.gql(x.api, q, map[string]any{"id": id, "dry": dry})[verb+"RollingReboot"].(map[string]any)
	}
	move("pause", true)
	if x.rolling(id)["state"] != "RUNNING" {
		t.Fatal("a planned pause paused")
	}
	if s := move("pause", false)["rollingReboot"].(map[string]any)["state"]; s != "PAUSED" {
		t.Fatalf("pause: %v", s)
	}
	if r := x.api.GQL(x.admin, `mutation($id: ID!) { pauseRollingReboot(input: {id: $id}) { rollingReboot { state } } }`, map[string]any{"id": id}); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("pausing twice: %+v", r.Errors)
	}
	if s := move("resume", false)["rollingReboot"].(map[string]any)["state"]; s != "RUNNING" {
		t.Fatalf("resume: %v", s)
	}
	c := move("cancel", false)["rollingReboot"].(map[string]any)
	if c["state"] != "CANCELLED" || !strings.Contains(c["reason"].(string), "cancelled at m3, stage EVACUATE") {
		t.Fatalf("cancel: %v", c)
	}
	r := x.api.GQL(x.admin, `mutation($id: ID!) { cancelRollingReboot(input: {id: $id}) { rollingReboot { state } } }`, map[string]any{"id": id})
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "has finished") {
		t.Fatalf("cancelling a cancelled rolling reboot: %+v", r.Errors)
	}
	for _, verb := range []string{"pauseRollingReboot", "resumeRollingReboot", "cancelRollingReboot"} {
		if n := x.api.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND parameters->'input'->>'id' = $2`, verb, id).(int64); n < 1 {
			t.Errorf("%s: no audit event", verb)
		}
	}
	// A new driver finds nothing to do: m3 was never touched.
	x.startWorker("w3", x.workerEnv()...)
	time.Sleep(3 * time.Second)
	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Errorf("a cancelled rolling reboot went on: %d power_off requests for m3", n)
	}
}
