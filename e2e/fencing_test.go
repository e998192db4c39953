package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/localpg"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/testkit/producttest"
)

// fastFence are short limits so the tests wait for Incus, not for the worker. The offline
// time is the least Incus's default cluster.offline_threshold allows (20 s + 5 s).
func fastFence(cooldown string) map[string]string {
	return map[string]string{
		"APELORA_FENCE_OFFLINE_AFTER": "25s", "APELORA_FENCE_POLL_INTERVAL": "1s", "APELORA_FENCE_COOLDOWN": cooldown,
		"APELORA_FENCE_CONFIRM_TIMEOUT": "4s", "APELORA_FENCE_DRILL_INTERVAL": "1h",
	}
}

// TestFencingOnARealCluster walks a fence on a real three-member Incus cluster with the
// MAAS simulator: mappings checked against MAAS (or said not to be), the readiness drill,
// a member stopped with SIGSTOP until Incus calls it offline, a wrong UUID refused, MAAS
// unreachable refused, a power-off MAAS accepts but that changes nothing reported as not
// fenced, the cooldown respected, and a power-off confirmed by the standby worker after the
// leader is killed between sending it and confirming it. Everything is watched through
// fenceProgress on a websocket to the other API replica.
func TestFencingOnARealCluster(t *testing.T) {
	parallel(t, lasts(84))
	began := time.Now()
	const cooldown = 20 * time.Second
	x := startFenceEnv(t, 3, nil, fastFence(cooldown.String()))
	t.Logf("lab, simulator and two API replicas up in %s", time.Since(began).Round(time.Millisecond))
	m3 := x.lab.Member("m3")

	// Two workers: w1 leads, w2 stands by.
	x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1"
	})
	x.startWorker("w2")

	// Mappings. The replica without MAAS saves what it is given, and says it did not check.
	r := x.gql(x.bare, setMapping, mappingVars("m3", x.maas.ids["m3"], "4C4C4544-0046-4E43-8045-0000DEADBEEF"))["setFenceMapping"].(map[string]any)
	if r["verifiedWithMaas"] != false || !strings.Contains(r["notice"].(string), "MAAS is not configured for the API") ||
		r["mapping"].(map[string]any)["hardwareUuid"] != "4c4c4544-0046-4e43-8045-0000deadbeef" || r["mapping"].(map[string]any)["setBy"] != "admin" {
		t.Fatalf("unchecked mapping: %v", r)
	}
	// The replica with MAAS checks: the right UUID passes, a wrong one or an unknown system
	// id is refused with the field at fault.
	r = x.gql(x.api, setMapping, mappingVars("m2", x.maas.ids["m2"], x.maas.uuids["m2"]))["setFenceMapping"].(map[string]any)
	if r["verifiedWithMaas"] != true || r["machine"].(map[string]any)["name"] != "m2" {
		t.Fatalf("checked mapping: %v", r)
	}
	bad := x.api.GQL(x.admin, setMapping, mappingVars("m1", x.maas.ids["m1"], x.maas.uuids["m2"]))
	if bad.Code() != "FAILED_PRECONDITION" || bad.Errors[0].Extensions["field"] != "hardwareUuid" || !strings.Contains(bad.Errors[0].Message, x.maas.uuids["m1"]) {
		t.Fatalf("wrong UUID: %+v", bad.Errors)
	}
	bad = x.api.GQL(x.admin, setMapping, mappingVars("m1", "nosuch1", x.maas.uuids["m1"]))
	if bad.Code() != "NOT_FOUND" || bad.Errors[0].Extensions["field"] != "maasSystemId" {
		t.Fatalf("unknown system id: %+v", bad.Errors)
	}
	bad = x.api.GQL(x.admin, setMapping, mappingVars("M1", x.maas.ids["m1"], "not-a-uuid"))
	if bad.Code() != "INVALID_INPUT" || bad.Errors[0].Extensions["field"] != "member" {
		t.Fatalf("bad member name: %+v", bad.Errors)
	}
	var outcomes []string
	rows, err := x.db.Store.Pool().Query(context.Background(), `SELECT outcome FROM audit_events WHERE action = 'setFenceMapping' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		outcomes = append(outcomes, o)
	}
	rows.Close()
	if !slices.Equal(outcomes, []string{"SUCCEEDED", "SUCCEEDED", "REFUSED", "REFUSED", "REFUSED"}) {
		t.Fatalf("setFenceMapping audit outcomes %v", outcomes)
	}

	// The readiness drill finds the wrong mapping before it is needed; the fleet shows it.
	x.waitFor("drills of m2 and m3", func() bool {
		f2, _ := x.machineFence("m2")
		f3, _ := x.machineFence("m3")
		return f2 != nil && f2["lastDrill"] != nil && f3 != nil && f3["lastDrill"] != nil
	})
	f2, _ := x.machineFence("m2")
	f3, _ := x.machineFence("m3")
	if d := f2["lastDrill"].(map[string]any); d["ok"] != true || d["powerState"] != "on" || d["problem"] != nil {
		t.Fatalf("m2 drill %v", d)
	}
	if d := f3["lastDrill"].(map[string]any); d["ok"] != false || !strings.Contains(d["problem"].(string), x.maas.uuids["m3"]) {
		t.Fatalf("m3 drill %v", d)
	}
	// The cluster view: healing off (Incus's default), m1 unmapped, the worker reporting.
	cl := x.gql(x.api, `{ cluster { healingThreshold offlineThreshold members unmappedMembers fenceWorker { worker offlineAfterSeconds cooldownSeconds } warnings { code } } }`, nil)["cluster"].(map[string]any)
	if cl["healingThreshold"] != float64(0) || cl["offlineThreshold"] != float64(20) || cl["members"] != float64(3) ||
		!slices.Equal(stringList(cl["unmappedMembers"]), []string{"m1"}) || warningCodes(cl["warnings"]) != "UNMAPPED_MEMBERS" ||
		cl["fenceWorker"].(map[string]any)["cooldownSeconds"] != cooldown.Seconds() {
		t.Fatalf("cluster view %v", cl)
	}

	// Healing on in Incus: the cluster view warns. (A valid value: a rejected cluster-wide
	// PATCH would wipe the member's local config on 6.0.4, see incus-api.md §0.)
	m1 := x.lab.Member("m1")
	if out, err := x.lab.CLI(m1, "config", "set", "cluster.healing_threshold", "30"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cl = x.gql(x.api, `{ cluster { healingThreshold warnings { code message } } }`, nil)["cluster"].(map[string]any)
	if cl["healingThreshold"] != float64(30) || warningCodes(cl["warnings"]) != "HEALING_ENABLED,UNMAPPED_MEMBERS" {
		t.Fatalf("cluster view with healing on: %v", cl)
	}
	if out, err := x.lab.CLI(m1, "config", "unset", "cluster.healing_threshold"); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	// Watch from the first event on (a console that reconnects replays what it missed).
	page := x.gql(x.api, `{ fenceEvents(first: 500) { edges { node { id kind worker } } } }`, nil)["fenceEvents"].(map[string]any)["edges"].([]any)
	first := page[len(page)-1].(map[string]any)["node"].(map[string]any)
	if first["kind"] != "LEADING" || first["worker"] != "w1" {
		t.Fatalf("first fence event %v", first)
	}
	x.watch("0")
	x.await("w1's LEADING, replayed", 0, fenceEventIs(client.FenceEventKindLeading, ""))

	// m3 hangs (SIGSTOP) until Incus says it is offline. Its mapping names the wrong
	// machine: refused, and MAAS is neither read further nor powered.
	stopped := time.Now()
	if err := x.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	_, i := x.await("m3 OFFLINE", 0, fenceEventIs(client.FenceEventKindOffline, "m3"))
	t.Logf("Incus reported m3 offline %s after SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	_, i = x.await("m3 ELIGIBLE", i, fenceEventIs(client.FenceEventKindEligible, "m3"))
	_, i = x.await("m3 refused for the UUID", i, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonUuidMismatch))
	if n := x.maas.requests("m3", "power_off") + x.maas.requests("m3", "query_power_state"); n != 0 {
		t.Fatalf("MAAS was sent %d power commands or reads for a mismatched machine", n)
	}

	// MAAS becomes unreachable, and the mapping is corrected (on the replica that cannot
	// check it): refused again, for MAAS this time.
	x.maas.SetFault(sim.FaultDrop)
	x.gql(x.bare, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	_, i = x.await("m3 refused: MAAS unreachable", i, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonMaasUnavailable))
	if n := x.maas.requests("m3", "power_off"); n != 0 {
		t.Fatalf("%d power-offs while MAAS was unreachable", n)
	}

	// MAAS is back, but accepts the power-off without doing it: not fenced.
	if err := x.maas.Edit(x.maas.ids["m3"], func(m *sim.MachineEdit) { m.SetPowerOffIneffective(true) }); err != nil {
		t.Fatal(err)
	}
	x.maas.SetFault(sim.FaultNone)
	req1, i := x.await("m3 REQUESTED", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	nc, i := x.await("m3 NOT_CONFIRMED", i, fenceEventIs(client.FenceEventKindNotConfirmed, "m3"))
	if *nc.Reason != client.FenceReasonPowerNotOff || nc.Details["powerState"] != "on" {
		t.Fatalf("not confirmed: %+v", nc)
	}
	if f, status := x.machineFence("m3"); status != "OFFLINE" || f["lastEvent"].(map[string]any)["kind"] == "CONFIRMED" {
		t.Fatalf("m3 after an ineffective power-off: %s %v", status, f)
	}
	// Inside the cooldown (from the request) nothing more is sent.
	_, i = x.await("m3 refused: cooldown", i, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonCooldown))
	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Fatalf("%d power-offs, want 1", n)
	}

	// The power-off works from now on. When the cooldown is over the worker asks again;
	// w1 is killed after MAAS has accepted that request and before anyone confirms it. The
	// standby takes over and confirms; nothing is sent twice.
	if err := x.maas.Edit(x.maas.ids["m3"], func(m *sim.MachineEdit) { m.SetPowerOffIneffective(false) }); err != nil {
		t.Fatal(err)
	}
	req2, i := x.await("m3 REQUESTED again", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	if gap := req2.At.Sub(req1.At); gap < cooldown {
		t.Fatalf("second request %s after the first, inside the %s cooldown", gap, cooldown)
	}
	x.waitFor("MAAS accepting the second power-off", func() bool { return x.maas.requests("m3", "power_off") == 2 })
	x.workers["w1"].kill(syscall.SIGKILL)
	x.maas.clock.Advance(2 * time.Second) // the controller now reports off; the hook kills m3's incusd
	x.await("w2 LEADING", i, func(e client.FenceEventFields) bool {
		return e.Kind == client.FenceEventKindLeading && e.Worker == "w2"
	})
	conf, _ := x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))
	if conf.Worker != "w2" || conf.Details["powerState"] != "off" || fmt.Sprint(conf.Details["requestEventId"]) != req2.Id {
		t.Fatalf("confirmation %+v", conf)
	}
	if n := x.maas.requests("m3", "power_off"); n != 2 {
		t.Fatalf("%d power-offs, want 2 (none sent again by the standby)", n)
	}
	if n := x.count(fenceEventIs(client.FenceEventKindRequested, "m3")); n != 2 {
		t.Fatalf("%d requests for m3", n)
	}
	if f, status := x.machineFence("m3"); status != "OFFLINE" || f["lastEvent"].(map[string]any)["kind"] != "CONFIRMED" || f["offlineSince"] == nil {
		t.Fatalf("m3 after the fence: %s %v", status, f)
	}
	// Past events, newest first, page by page.
	p1 := x.gql(x.api, `{ fenceEvents(member: "m3", first: 2) { edges { node { id kind } } pageInfo { hasNextPage endCursor } } }`, nil)["fenceEvents"].(map[string]any)
	edges := p1["edges"].([]any)
	if len(edges) != 2 || edges[0].(map[string]any)["node"].(map[string]any)["kind"] != "CONFIRMED" || p1["pageInfo"].(map[string]any)["hasNextPage"] != true {
		t.Fatalf("first page %v", p1)
	}
	p2 := x.gql(x.api, `query($a: String) { fenceEvents(member: "m3", first: 500, after: $a) { edges { node { id kind } } pageInfo { hasNextPage } } }`,
		map[string]any{"a": p1["pageInfo"].(map[string]any)["endCursor"]})["fenceEvents"].(map[string]any)
	var older []string
	for _, e := range p2["edges"].([]any) {
		older = append(older, e.(map[string]any)["node"].(map[string]any)["kind"].(string))
	}
	if !slices.Equal(older, []string{"ELIGIBLE", "REFUSED", "NOT_CONFIRMED", "REQUESTED", "ELIGIBLE", "REFUSED", "ELIGIBLE", "REFUSED", "ELIGIBLE", "OFFLINE"}) {
		t.Fatalf("older m3 events %v", older)
	}
	if r := x.api.GQL(x.admin, `{ fenceEvents(after: "bogus") { edges { cursor } } }`, nil); r.Code() != "INVALID_INPUT" {
		t.Fatalf("bad cursor: %+v", r.Errors)
	}
	// Mappings listed, and one removed (audited); removing it again is NOT_FOUND.
	ms := x.gql(x.api, `{ fenceMappings { member maasSystemId } }`, nil)["fenceMappings"].([]any)
	if len(ms) != 2 || ms[0].(map[string]any)["member"] != "m2" || ms[1].(map[string]any)["member"] != "m3" {
		t.Fatalf("mappings %v", ms)
	}
	rm := x.gql(x.api, `mutation { removeFenceMapping(input: {member: "m2"}) { removed { member maasSystemId } machine { name fence { member } } } }`, nil)["removeFenceMapping"].(map[string]any)
	if rm["removed"].(map[string]any)["maasSystemId"] != x.maas.ids["m2"] || rm["machine"].(map[string]any)["fence"] != nil {
		t.Fatalf("remove: %v", rm)
	}
	if r := x.api.GQL(x.admin, `mutation { removeFenceMapping(input: {member: "m2"}) { removed { member } } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("remove twice: %+v", r.Errors)
	}

	// Only the worker's key ever asked for power.
	for _, r := range x.maas.Requests() {
		if (r.Op == "power_off" || r.Op == "query_power_state") && r.User != "fencer" {
			t.Fatalf("%s by %q", r.Op, r.User)
		}
	}
	// No MAAS key anywhere: database, server logs, worker logs.
	x.assertNoMAASKey("database dump", x.db.Dump(t))
	for where, text := range x.allLogs() {
		x.assertNoMAASKey(where, text)
	}
	if !m1.Running() {
		t.Fatal("m1 was touched")
	}
	t.Logf("fence walk-through done in %s", time.Since(began).Round(time.Millisecond))
}

func stringList(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func warningCodes(v any) string {
	var out []string
	for _, w := range v.([]any) {
		out = append(out, w.(map[string]any)["code"].(string))
	}
	return strings.Join(out, ",")
}

// TestFencingLimitsAcrossAPostgreSQLRestart runs on a four-member cluster (m4 joins as a
// stand-by, so m3 and m4 can hang without losing the database quorum) and on a PostgreSQL
// of its own, which it restarts: half the cluster offline is refused; the worker comes back
// after the restart with the outage it had recorded, and says nothing twice; when one member
// returns, the other is fenced. Then, with a long offline time, a member that hangs and
// comes back before it is fenced is left alone.
func TestFencingLimitsAcrossAPostgreSQLRestart(t *testing.T) {
	parallel(t, lasts(111))
	began := time.Now()
	pg, db := startPrivatePostgreSQL(t)
	x := startFenceEnv(t, 4, db, fastFence("1m"))
	m3, m4 := x.lab.Member("m3"), x.lab.Member("m4")
	x.startWorker("w1")
	x.watch("0")
	i := 0
	x.await("w1 LEADING", 0, fenceEventIs(client.FenceEventKindLeading, ""))

	// m3 and m4 hang; with no mapping yet, each is refused for that.
	for _, m := range []string{"m3", "m4"} {
		if err := x.lab.Freeze(x.lab.Member(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"m3", "m4"} {
		x.await(m+" refused: not mapped", 0, fenceEventIs(client.FenceEventKindRefused, m, client.FenceReasonNotMapped))
	}
	// Mapped now: 2 of 4 offline is half, so neither is powered off.
	for _, m := range []string{"m3", "m4"} {
		x.gql(x.api, setMapping, mappingVars(m, x.maas.ids[m], x.maas.uuids[m]))
	}
	for _, m := range []string{"m3", "m4"} {
		e, at := x.await(m+" refused: half offline", 0, fenceEventIs(client.FenceEventKindRefused, m, client.FenceReasonTooManyOffline))
		if e.Details["offlineMembers"] != float64(2) || e.Details["members"] != float64(4) {
			t.Fatalf("refusal details %v", e.Details)
		}
		i = max(i, at+1)
	}
	if n := x.maas.requests("m3", "power_off") + x.maas.requests("m4", "power_off"); n != 0 {
		t.Fatalf("%d power-offs with half the cluster offline", n)
	}
	f3, _ := x.machineFence("m3")
	since := f3["offlineSince"]

	// PostgreSQL restarts. The worker loses its lock with its connection, takes it again,
	// and goes on from what it had recorded.
	restart := time.Now()
	if err := pg.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(context.Background(), "apelora"); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL restarted in %s", time.Since(restart).Round(time.Millisecond))
	back, i := x.await("w1 LEADING after the restart", i, fenceEventIs(client.FenceEventKindLeading, ""))
	if back.Worker != "w1" || x.count(fenceEventIs(client.FenceEventKindLeading, "")) != 2 {
		t.Fatalf("after the restart: %s", describeEvent(back))
	}
	x.waitFor("three rounds after the restart", func() bool {
		r := x.api.GQL(x.admin, `{ cluster { fenceWorker { lastRoundAt } } }`, nil)
		if len(r.Errors) > 0 {
			return false
		}
		last, _ := time.Parse(time.RFC3339Nano, r.Data["cluster"].(map[string]any)["fenceWorker"].(map[string]any)["lastRoundAt"].(string))
		return last.After(back.At.Add(3 * time.Second))
	})
	if f3, _ := x.machineFence("m3"); f3["offlineSince"] != since {
		t.Fatalf("m3's outage started at %v before the restart, %v after", since, f3["offlineSince"])
	}
	for _, m := range []string{"m3", "m4"} {
		if n := x.count(fenceEventIs(client.FenceEventKindRefused, m, client.FenceReasonTooManyOffline)); n != 1 {
			t.Fatalf("%d half-offline refusals for %s: a restart repeated (or forgot) a decision", n, m)
		}
		if n := x.count(fenceEventIs(client.FenceEventKindOffline, m)); n != 1 {
			t.Fatalf("%d outages recorded for %s across the restart", n, m)
		}
	}

	// m4 comes back: m3 is now 1 of 4 and is fenced.
	if err := x.lab.Thaw(m4); err != nil {
		t.Fatal(err)
	}
	_, i = x.await("m4 BACK_ONLINE", i, fenceEventIs(client.FenceEventKindBackOnline, "m4"))
	_, i = x.await("m3 REQUESTED", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	x.waitFor("MAAS accepting m3's power-off", func() bool { return x.maas.requests("m3", "power_off") == 1 })
	x.maas.clock.Advance(2 * time.Second)
	_, i = x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))
	if m3.Running() {
		t.Fatal("m3's incusd still runs after its machine was powered off")
	}

	// A new worker with a long offline time: m4 hangs and comes back before it: no fence.
	x.workers["w1"].kill(syscall.SIGTERM)
	x.startWorker("w3", "APELORA_FENCE_OFFLINE_AFTER=10m")
	_, i = x.await("w3 LEADING", i, func(e client.FenceEventFields) bool {
		return e.Kind == client.FenceEventKindLeading && e.Worker == "w3"
	})
	if err := x.lab.Freeze(m4); err != nil {
		t.Fatal(err)
	}
	_, j := x.await("m4 OFFLINE again", i, fenceEventIs(client.FenceEventKindOffline, "m4"))
	if err := x.lab.Thaw(m4); err != nil {
		t.Fatal(err)
	}
	back, _ = x.await("m4 BACK_ONLINE again", j, fenceEventIs(client.FenceEventKindBackOnline, "m4"))
	x.waitFor("three rounds after m4 came back", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { lastRoundAt } } }`, nil)["cluster"].(map[string]any)["fenceWorker"].(map[string]any)
		last, _ := time.Parse(time.RFC3339Nano, ws["lastRoundAt"].(string))
		return last.After(back.At.Add(3 * time.Second))
	})
	for _, e := range x.pushed()[j:] {
		if e.Member != nil && (*e.Member == "m4" && e.Kind != client.FenceEventKindOffline && e.Kind != client.FenceEventKindBackOnline ||
			*e.Member == "m3") {
			t.Fatalf("after m3's fence and m4's short outage: %s", describeEvent(e))
		}
	}
	if n := x.maas.requests("m4", "power_off"); n != 0 {
		t.Fatalf("m4 was powered off %d times", n)
	}
	x.assertNoMAASKey("database dump", x.db.Dump(t))
	for where, text := range x.allLogs() {
		x.assertNoMAASKey(where, text)
	}
	t.Logf("limits across a PostgreSQL restart done in %s", time.Since(began).Round(time.Millisecond))
}

// startPrivatePostgreSQL runs a PostgreSQL of the test's own (Debian's binaries, in a
// folder the postgres user can reach), so that it can be restarted without disturbing
// other tests.
func startPrivatePostgreSQL(t *testing.T) (*localpg.Server, *pgtest.DB) {
	t.Helper()
	pgtest.AdminURL(t) // skips loudly (fails under CI) where the test PostgreSQL is missing
	dir, err := os.MkdirTemp("/var/tmp", "apelora-fence-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := localpg.New(filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := pg.Start(ctx, "apelora"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pg.Stop(context.Background())
		_ = os.RemoveAll(dir)
	})
	store, err := postgres.Open(ctx, pg.URL("apelora"), producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return pg, &pgtest.DB{Name: "apelora", URL: pg.URL("apelora"), Store: store}
}
