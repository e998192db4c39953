package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// taskWatcher follows maintenanceTask for one member over a websocket.
type taskWatcher struct {
	t      *testing.T
	events chan client.MaintenanceTaskProgressWsResponse
	errs   chan error
}

func watchMaintenanceTask(t *testing.T, e *producttest.Env, token, name string, after *string) *taskWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := client.NewWebSocket(e.Base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); ws.Close() })
	ch, _, err := client.MaintenanceTaskProgress(ctx, ws, name, after)
	if err != nil {
		t.Fatal(err)
	}
	return &taskWatcher{t: t, events: ch, errs: errs}
}

// until returns the events up to and including the task's end.
func (w *taskWatcher) until(within time.Duration) []client.MaintenanceTaskProgressMaintenanceTaskMaintenanceTaskEvent {
	w.t.Helper()
	var got []client.MaintenanceTaskProgressMaintenanceTaskMaintenanceTaskEvent
	deadline := time.After(within)
	for {
		select {
		case r, ok := <-w.events:
			if !ok {
				w.t.Fatalf("stream ended after %v", got)
			}
			if r.Errors != nil {
				w.t.Fatalf("maintenanceTask: %v", r.Errors)
			}
			ev := r.Data.MaintenanceTask
			got = append(got, ev)
			switch ev.Kind {
			case client.MaintenanceEventKindSucceeded, client.MaintenanceEventKindFailed, client.MaintenanceEventKindUnknown:
				return got
			}
		case err := <-w.errs:
			w.t.Fatalf("websocket: %v", err)
		case <-deadline:
			w.t.Fatalf("got %v, waiting for the task's end", got)
		}
	}
}

func messages(evs []client.MaintenanceTaskProgressMaintenanceTaskMaintenanceTaskEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s %s", e.Id, e.Kind, e.Message)
	}
	return b.String()
}

// TestEvacuateAndRestoreAMember evacuates a real 3-member cluster's member holding three
// instances with the placement guard on (the third member is not admitted): the plan lists
// the instances and the one target, progress is pushed, every instance lands on the
// admitted member, the phase is EVACUATED; the bad inputs are refused and audited once
// each; restore runs the admission checks and brings the instances back. An old client
// (memberOperation, memberOperations, the payload's operation, the plan's steps: the
// deprecated names) is answered alike, event for event. Then a server stopped while an
// evacuation runs (it never saw its end) is followed by a restarted one, which reports
// the task's end from the database and Incus.
func TestEvacuateAndRestoreAMember(t *testing.T) {
	parallel(t, lasts(13))
	lab := incuslab.Start(t, 3)
	db := pgtest.New(t)
	m0, m1, m2 := lab.Members[0], lab.Members[1], lab.Members[2]
	cli := func(args ...string) string {
		t.Helper()
		out, err := lab.CLI(m0, args...)
		if err != nil {
			t.Fatalf("incus %v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	location := func(name string) string { return cli("list", "^"+name+"$", "-c", "L", "-f", "csv") }
	cli("profile", "device", "add", "default", "root", "disk", "path=/", "pool="+incuslab.Pool)
	// m0 and m1 carry the admission mark; m2 joined and was never admitted.
	cli("cluster", "set", m0.Name, lifecycle.AdmissionKey, "test")
	cli("cluster", "set", m1.Name, lifecycle.AdmissionKey, "test")
	names := []string{"c1", "c2", "c3"}
	for _, n := range names {
		cli("init", "--empty", n, "-s", incuslab.Pool, "--target", m0.Name)
	}

	t.Run("first server", func(t *testing.T) {
		e := producttest.StartOn(t, db, db.Store, producttest.WithIncus(lab.Config))
		admin := e.Identity("admin", identity.ManageInfrastructure)
		viewer := e.Identity("viewer", identity.ViewInfrastructure)
		gql := func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }
		must := func(q string, vars map[string]any) map[string]any {
			t.Helper()
			r := gql(q, vars)
			if len(r.Errors) > 0 {
				t.Fatalf("%s: %+v", q, r.Errors)
			}
			return r.Data
		}
		for _, m := range lab.Members {
			must(`mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": m.Name})
		}
		must(`mutation { setPlacementGuard(input: {enabled: true}) { placementGuard { state } } }`, nil)
		const evacuate = `mutation($n: String!, $dry: Boolean) { evacuateMember(input: {name: $n, dryRun: $dry}) {
			instances { name project fate } targets { member instances } task { id incusOperation } operation { id incusOperation }
			plan { refused refusals { code message } warnings { message } quorum { leaving votersOnlineAfter }
				calls { system request target changes { field before after } } steps { system call target changes { field before after } } } } }`
		const restore = `mutation($n: String!, $dry: Boolean) { restoreMember(input: {name: $n, dryRun: $dry}) {
			instances { name fate } report { trigger verdict checks { name result } } task { id } operation { id } plan { refused refusals { code message } } } }`

		// The plan: every instance with its fate, the one admitted target, nothing sent.
		before := e.Count("member_operations")
		d := must(evacuate, map[string]any{"n": m0.Name, "dry": true})["evacuateMember"].(map[string]any)
		plan := d["plan"].(map[string]any)
		if plan["refused"] != false || len(d["instances"].([]any)) != 3 || d["task"] != nil || d["operation"] != nil {
			t.Fatalf("evacuation plan: %v", d)
		}
		// The old client reads the same calls as steps, the request as call.
		calls, steps := plan["calls"].([]any), plan["steps"].([]any)
		if len(calls) == 0 || len(calls) != len(steps) {
			t.Fatalf("the plan's calls %v, its steps (deprecated) %v", calls, steps)
		}
		for i, c := range calls {
			c, st := c.(map[string]any), steps[i].(map[string]any)
			if c["request"] != st["call"] || c["system"] != st["system"] || c["target"] != st["target"] || fmt.Sprint(c["changes"]) != fmt.Sprint(st["changes"]) {
				t.Fatalf("call %d: %v, as a step (deprecated): %v", i, c, st)
			}
		}
		for _, in := range d["instances"].([]any) {
			if in := in.(map[string]any); in["fate"] != "MOVE" || !slices.Contains(names, in["name"].(string)) {
				t.Fatalf("planned instance: %v", in)
			}
		}
		if ts := d["targets"].([]any); len(ts) != 1 || ts[0].(map[string]any)["member"] != m1.Name {
			t.Fatalf("targets %v, want only %s (admitted; %s is not)", ts, m1.Name, m2.Name)
		}
		if q := plan["quorum"].(map[string]any); fmt.Sprint(q["votersOnlineAfter"]) != "2" {
			t.Fatalf("quorum projection: %v", q)
		}
		if e.Count("member_operations") != before || location("c1") != m0.Name {
			t.Fatal("the dry run changed something")
		}

		// From the newest event on: the watchers have every event of the evacuation, however
		// late their subscriptions start on a loaded machine (no sleep "until they are in place").
		newest := fmt.Sprint(e.Scalar(`SELECT coalesce(max(id), 0) FROM member_operation_events`))
		watch := watchMaintenanceTask(t, e, viewer, m0.Name, &newest)
		old := subscribeAsAnOldClient(t, e.Base, viewer, oldClientSubscription, map[string]any{"name": m0.Name, "after": newest})
		// sameAsOld checks that the old client was pushed the same events, by its names.
		sameAsOld := func(evs []client.MaintenanceTaskProgressMaintenanceTaskMaintenanceTaskEvent) {
			t.Helper()
			for _, ev := range evs {
				o, _ := old.next(30 * time.Second)["memberOperation"].(map[string]any)
				if o["id"] != ev.Id || o["operationId"] != ev.TaskId || o["kind"] != string(ev.Kind) || o["message"] != ev.Message || o["action"] != string(ev.Action) {
					t.Fatalf("the old client was pushed %v where maintenanceTask pushed %+v", o, ev)
				}
			}
		}
		d = must(evacuate, map[string]any{"n": m0.Name})["evacuateMember"].(map[string]any)
		if d["task"] == nil || d["task"].(map[string]any)["incusOperation"] == "" {
			t.Fatalf("evacuation without a recorded maintenance task: %v", d)
		}
		if fmt.Sprint(d["operation"]) != fmt.Sprint(d["task"]) {
			t.Fatalf("the payload's task %v, its operation (deprecated) %v", d["task"], d["operation"])
		}
		evs := watch.until(60 * time.Second)
		sameAsOld(evs)
		if evs[0].Kind != client.MaintenanceEventKindStarted || evs[len(evs)-1].Kind != client.MaintenanceEventKindSucceeded {
			t.Fatalf("evacuation events:%s", messages(evs))
		}
		for _, n := range names {
			if !strings.Contains(messages(evs), n+": moved to "+m1.Name) {
				t.Fatalf("no event says %s moved to %s:%s", n, m1.Name, messages(evs))
			}
			if loc := location(n); loc != m1.Name {
				t.Fatalf("%s is on %q after the evacuation, want %s (the only admitted member)", n, loc, m1.Name)
			}
		}
		t.Logf("evacuation pushed:%s", messages(evs))
		phase := must(`query($n: String!) { machine(name: $n) { phase } }`, map[string]any{"n": m0.Name})["machine"].(map[string]any)["phase"]
		if phase != "EVACUATED" {
			t.Fatalf("phase after the evacuation: %v", phase)
		}

		// A power-off the fencing worker asked MAAS for and has not confirmed (as the worker
		// records it): that member cannot be evacuated.
		e.Scalar(`INSERT INTO fence_events (at, member, kind, worker) VALUES (now(), $1, 'REQUESTED', 'test-worker') RETURNING id`, m2.Name)

		// Bad input: each refused with its code and audited once.
		audited := func(action, machine string) int64 {
			return e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND machine = $2`, action, machine).(int64)
		}
		for _, c := range []struct {
			q, name, code, says string
		}{
			{evacuate, m0.Name, "FAILED_PRECONDITION", "already evacuated"},
			{evacuate, m1.Name, "FAILED_PRECONDITION", "while " + m0.Name + " is in maintenance"},
			{evacuate, m2.Name, "FAILED_PRECONDITION", "power-off in flight"},
			{evacuate, "nosuch", "NOT_FOUND", "not a member of this Incus cluster"},
			{restore, m1.Name, "FAILED_PRECONDITION", "not evacuated"},
			{restore, "other-cluster", "NOT_FOUND", "not a member of this Incus cluster"},
		} {
			action := "evacuateMember"
			if c.q == restore {
				action = "restoreMember"
			}
			n := audited(action, c.name)
			r := gql(c.q, map[string]any{"n": c.name})
			if r.Code() != c.code || !strings.Contains(r.Errors[0].Message, c.says) {
				t.Fatalf("%s %s: %+v, want %s saying %q", action, c.name, r.Errors, c.code, c.says)
			}
			if got := audited(action, c.name); got != n+1 {
				t.Fatalf("%s %s wrote %d audit events, want 1", action, c.name, got-n)
			}
		}

		// Restore: the checks run first, then the instances come back.
		d = must(restore, map[string]any{"n": m0.Name})["restoreMember"].(map[string]any)
		report := d["report"].(map[string]any)
		if report["trigger"] != "RESTORE" || report["verdict"] != "ADMISSIBLE" || len(d["instances"].([]any)) != 3 {
			t.Fatalf("restore: %v", d)
		}
		evs = watch.until(60 * time.Second)
		if evs[len(evs)-1].Kind != client.MaintenanceEventKindSucceeded {
			t.Fatalf("restore events:%s", messages(evs))
		}
		sameAsOld(evs)
		// The old client's history (memberOperations) is the maintenance tasks'.
		const fields = `id machine action mode incusOperation startedBy startedAt finishedAt outcome message`
		tasks := must(`query($n: String!) { maintenanceTasks(name: $n) { `+fields+` } }`, map[string]any{"n": m0.Name})["maintenanceTasks"]
		ops := must(`query MemberOperations($name: String!) { memberOperations(name: $name) { `+fields+` } }`, map[string]any{"name": m0.Name})["memberOperations"]
		if l, _ := tasks.([]any); len(l) != 2 || fmt.Sprint(tasks) != fmt.Sprint(ops) {
			t.Fatalf("maintenanceTasks %v, memberOperations (deprecated) %v", tasks, ops)
		}
		for _, n := range names {
			if loc := location(n); loc != m0.Name {
				t.Fatalf("%s is on %q after the restore, want %s", n, loc, m0.Name)
			}
		}
		t.Logf("restore pushed:%s", messages(evs))
	})

	// A server that cannot read Incus's operations (its reads of /1.0/operations fail)
	// starts an evacuation and stops: it never saw the end.
	t.Run("server stopped mid-operation", func(t *testing.T) {
		ic := lab.Config
		ic.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/1.0/operations/") {
					return nil, errors.New("operations hidden from this server")
				}
				return next.RoundTrip(r)
			})
		}
		e := producttest.StartOn(t, db, db.Store, producttest.WithIncus(ic))
		admin := e.Identity("admin-2", identity.ManageInfrastructure)
		r := e.GQL(admin, `mutation($n: String!) { evacuateMember(input: {name: $n}) { task { id } } }`, map[string]any{"n": m0.Name})
		if len(r.Errors) > 0 {
			t.Fatalf("evacuate: %+v", r.Errors)
		}
	})
	if n := db.Store.Pool(); n == nil {
		t.Fatal("no pool")
	}
	var running int64
	if err := db.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM member_operations WHERE finished_at IS NULL`).Scan(&running); err != nil || running != 1 {
		t.Fatalf("maintenance tasks running after the stop: %d %v, want 1", running, err)
	}

	// The restarted server finds it and reports its end to a subscriber replaying from the start.
	e := producttest.StartOn(t, db, db.Store, producttest.WithIncus(lab.Config))
	viewer := e.Identity("viewer-3", identity.ViewInfrastructure)
	zero := "0"
	evs := watchMaintenanceTask(t, e, viewer, m0.Name, &zero)
	var last []client.MaintenanceTaskProgressMaintenanceTaskMaintenanceTaskEvent
	for range 3 { // the evacuation, the restore, then the one the stopped server began
		last = evs.until(60 * time.Second)
	}
	if last[len(last)-1].Kind != client.MaintenanceEventKindSucceeded {
		t.Fatalf("after the restart:%s", messages(last))
	}
	for _, n := range names {
		if loc := location(n); loc != m1.Name {
			t.Fatalf("%s is on %q after the evacuation the restarted server reported, want %s", n, loc, m1.Name)
		}
	}
	t.Logf("after the restart:%s", messages(last))
}

// TestFencingNeverPowersOffAnEvacuatedMember evacuates a member of a real cluster through
// Apelora: the fencing worker, with a correct mapping, says once that it will not power it
// off (REFUSED, MAINTENANCE), and after the member hangs (SIGSTOP) past Incus's offline
// threshold and the worker's offline time, MAAS is still never asked.
func TestFencingNeverPowersOffAnEvacuatedMember(t *testing.T) {
	parallel(t, lasts(61))
	x := startFenceEnv(t, 3, nil, fastFence("1m"))
	m3 := x.lab.Member("m3")
	x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1"
	})
	x.gql(x.api, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	x.watch("0")
	x.gql(x.api, `mutation { evacuateMember(input: {name: "m3"}) { operation { id } } }`, nil)
	x.waitFor("m3 evacuated", func() bool {
		ops := x.gql(x.api, `{ memberOperations(name: "m3") { outcome } }`, nil)["memberOperations"].([]any)
		return len(ops) == 1 && ops[0].(map[string]any)["outcome"] == "SUCCEEDED"
	})
	ev, _ := x.await("m3 refused for maintenance", 0, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonMaintenance))
	if !strings.Contains(ev.Message, "maintenance") {
		t.Fatalf("refusal message: %s", ev.Message)
	}
	// Hung well past Incus's offline threshold and the worker's offline time (Incus keeps
	// listing it Evacuated): still never powered off.
	if err := x.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.lab.Thaw(m3) })
	time.Sleep(50 * time.Second)
	if n := x.count(fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonMaintenance)); n != 1 {
		t.Fatalf("%d MAINTENANCE refusals of m3, want 1 (once per maintenance)", n)
	}
	if n := x.count(fenceEventIs(client.FenceEventKindRequested, "m3")); n != 0 {
		t.Fatalf("%d power-off requests for an evacuated member", n)
	}
	if n := x.maas.requests("m3", "power_off"); n != 0 {
		t.Fatalf("MAAS got %d power-off commands", n)
	}
}
