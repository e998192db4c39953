package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/mutations"
)

// humanPause is the pause of an administrator between reading a plan and confirming it.
const humanPause = 2100 * time.Millisecond

// TestEveryChangeConfirmedAtHumanPace walks every declared change as an administrator
// does, on a real lab and the MAAS simulator: plan it, read the plan for more than two
// seconds, confirm it with the hash it showed. Every confirmation goes through (no
// PLAN_CHANGED without a change), and the trail records what was approved: a step sent to
// Incus or MAAS as its intent (STARTED, with the approved input, plan and hash) and its
// outcome naming it; a change of the database alone as one event.
func TestEveryChangeConfirmedAtHumanPace(t *testing.T) {
	parallel(t, lasts(25))
	x := startChangeWorld(t)
	confirmed := map[string]bool{}
	// batch plans each change, pauses once, then confirms each with its plan's hash.
	batch := func(calls ...[2]any) {
		t.Helper()
		type shown struct {
			name string
			in   map[string]any
			plan map[string]any
		}
		var plans []shown
		for _, c := range calls {
			name, in := c[0].(string), c[1].(map[string]any)
			p, code, msg := x.changeCall(t, x.admin, name, mapsWith(in, "dryRun", true))
			if code != "" || p["refused"] != false {
				t.Fatalf("%s plan: %s %s %v", name, code, msg, p)
			}
			plans = append(plans, shown{name, in, p})
		}
		time.Sleep(humanPause)
		for _, s := range plans {
			before := x.e.Scalar(`SELECT coalesce(max(id), 0) FROM audit_events`).(int64)
			if _, code, msg := x.changeCall(t, x.admin, s.name, mapsWith(s.in, "planHash", s.plan["planHash"])); code != "" {
				t.Fatalf("%s confirmed %s after reading its plan: %s %s", s.name, humanPause, code, msg)
			}
			confirmed[s.name] = true
			upstream := len(callsTo(s.plan, "INCUS"))+len(callsTo(s.plan, "MAAS")) > 0
			got := x.e.Scalar(`SELECT string_agg(outcome || ':' || coalesce(details->>'intent', '-') || ':' || coalesce(details->>'planHash', '-') || ':' || (details ? 'approvedPlan')::text, ' ' ORDER BY id)
				FROM audit_events WHERE id > $1 AND action = $2`, before, s.name).(string)
			want := fmt.Sprintf("SUCCEEDED:-:%s:true", s.plan["planHash"])
			if upstream {
				intent := x.e.Scalar(`SELECT coalesce(min(id), 0) FROM audit_events WHERE id > $1 AND action = $2 AND outcome = 'STARTED'`, before, s.name).(int64)
				want = fmt.Sprintf("STARTED:-:%s:true SUCCEEDED:%d:%s:false", s.plan["planHash"], intent, s.plan["planHash"])
			}
			if got != want {
				t.Errorf("%s's events: %s, want %s", s.name, got, want)
			}
		}
	}
	call := func(name string, in map[string]any) [2]any { return [2]any{name, in} }
	taskDone := func(member string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			tasks := x.must(t, `query($n: String!) { maintenanceTasks(name: $n) { finishedAt outcome } }`, map[string]any{"n": member})["maintenanceTasks"].([]any)
			if len(tasks) > 0 && tasks[0].(map[string]any)["finishedAt"] != nil {
				if o := tasks[0].(map[string]any)["outcome"]; o != "SUCCEEDED" {
					t.Fatalf("%s's maintenance task ended %v", member, o)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's maintenance task did not end", member)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	nodeZ := map[string]any{"entity": "storage-pool", "name": "local", "key": "source", "value": ""}

	batch(
		call("setHardwareProfile", map[string]any{"profile": "big", "architecture": "x86_64", "minCpuCores": 2}),
		call("createIdentity", map[string]any{"name": "ops", "permissions": []any{"VIEW_INFRASTRUCTURE"}, "expiresIn": "30d"}),
		call("setPlacementGuard", map[string]any{"enabled": true}),
		call("registerMachine", map[string]any{"name": "node-new", "provisioner": "MAAS", "maasSystemId": "nnnn03", "description": "walked"}),
		call("approveEnrolment", map[string]any{"name": "node-z", "memberConfig": []any{nodeZ}}),
		call("releaseMachine", map[string]any{"systemId": "dddd04", "erase": false, "comment": "walked"}),
		call("commissionMachine", map[string]any{"systemId": "aaaa01", "tests": []any{}}),
	)
	batch(
		call("assignHardwareProfile", map[string]any{"machine": "node-z", "profile": "big"}),
		call("revokeIdentity", map[string]any{"name": "ops"}),
		call("revokeJoinToken", map[string]any{"name": "node-z"}),
		call("admitMember", map[string]any{"name": "m2"}),
	)
	x.maas.Clock.Advance(time.Minute) // commissioning ends: node-a is Ready
	batch(
		call("clearHardwareProfile", map[string]any{"machine": "node-z"}),
		call("runHardwareTests", map[string]any{"systemId": "aaaa01", "hostname": "node-a", "tests": []any{"smartctl-validate"}}),
		call("evacuateMember", map[string]any{"name": "m2"}),
	)
	taskDone("m2")
	x.maas.Clock.Advance(time.Minute) // the tests end: node-a is Ready again
	batch(
		call("removeHardwareProfile", map[string]any{"profile": "big"}),
		call("unregisterMachine", map[string]any{"name": "node-z"}),
		call("restoreMember", map[string]any{"name": "m2"}),
		call("installOperatingSystem", map[string]any{"name": "node-a", "series": "noble", "memberConfig": []any{nodeZ}}),
	)
	taskDone("m2")
	batch(call("startRollingReboot", map[string]any{"members": []any{"m2"}}))
	id := x.must(t, `{ rollingReboot { id state } }`, nil)["rollingReboot"].(map[string]any)["id"]
	batch(call("pauseRollingReboot", map[string]any{"id": id}))
	batch(call("resumeRollingReboot", map[string]any{"id": id}))
	batch(call("cancelRollingReboot", map[string]any{"id": id}))
	batch(
		call("setFenceMapping", map[string]any{"member": "m2", "maasSystemId": "mmmm02", "hardwareUuid": uuidM2}),
		call("registerCluster", map[string]any{"name": "rack2", "url": x.rack2.URL, "clusterCertificate": x.rack2.ClusterCertificatePEM()}),
	)
	batch(call("removeCluster", map[string]any{"name": "rack2"}))
	batch(
		call("removeFenceMapping", map[string]any{"member": "m2"}),
		call("removeMember", map[string]any{"name": "m2", "force": false}),
	)

	var missed []string
	for _, m := range mutations.All() {
		if !confirmed[m.Name] {
			missed = append(missed, m.Name)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Fatalf("declared changes the walk did not confirm: %s", strings.Join(missed, ", "))
	}
	// Every step sent to Incus or MAAS has exactly one intent and one outcome, and the
	// reconciler has a judge for its action, should its outcome ever be lost.
	if n := x.e.Scalar(`SELECT count(*) FROM change_steps WHERE outcome IS NULL`).(int64); n != 0 {
		t.Fatalf("%d steps without an outcome", n)
	}
	judged := app.JudgedActions()
	for _, a := range strings.Fields(x.e.Scalar(`SELECT string_agg(DISTINCT action, ' ') FROM change_steps`).(string)) {
		if !slices.Contains(judged, a) {
			t.Errorf("%s steps are sent to Incus or MAAS but no judge reads what became of one", a)
		}
	}
}
