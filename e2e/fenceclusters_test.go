package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// One worker leader fences two real Incus clusters on loopback, each within its own
// limits: the environment's cluster (default: m1, m2, m3) and a registered one (b: m1 to
// m4), each member with its own machine in the MAAS simulator (default's fncmN, b's
// fnbmN), every member of both mapped. default's m3 is killed and fenced (1 of 3 offline)
// while two of b's members, killed at the same time, are refused for too many offline (2
// of 4; counted over both clusters, 3 of 7 would have let them be fenced). b has four
// members, not two: with two, both are database voters and one down leaves b without
// quorum (no member list at all); with four, b's standby and one voter down leave it its
// quorum. b frozen pauses b only, with one UNREADABLE event, and default goes on: its m2
// killed is fenced during b's outage; default's tracking is whole and b's is kept. The m2
// of each cluster only ever names its own machine, and b's machines are never powered.
func TestFencingLimitsPerCluster(t *testing.T) {
	parallel(t, lasts(77))
	a := incuslab.Start(t, 3)
	b := incuslab.StartWith(t, incuslab.Options{Members: 4, Identity: a.Identity()})
	// Incus's least offline threshold (11 s: "must be greater than 10") in both clusters,
	// so the worker may fence after 16 s offline: the test waits for Incus, not the limits.
	for _, l := range []*incuslab.Cluster{a, b} {
		if out, err := l.CLI(l.Members[0], "config", "set", "cluster.offline_threshold", "11"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	fs := startFenceSimOf(t, fenceLab{"fnc", a}, fenceLab{"fnb", b})
	db := pgtest.New(t)
	auditKey := filepath.Join(t.TempDir(), auditlog.KeyFile)
	k, _, err := auditlog.LoadOrCreateKey(auditKey)
	if err != nil {
		t.Fatal(err)
	}
	db.Store.SealAuditWith(k.Sealer)
	api := producttest.StartOn(t, db, db.Store, producttest.WithIncus(a.Config), withFenceMAAS(fs.apiConfig()),
		producttest.WithRequestTimeout(3*time.Second), func(c *app.Config) { c.AuditKeyFile = auditKey })
	limits := fastFence("10m")
	limits["APELORA_FENCE_OFFLINE_AFTER"] = "16s"
	limits["APELORA_REQUEST_TIMEOUT"] = "3s"
	// The test lets the simulated controller say off once it has seen the request: a
	// confirmation time that a loaded machine cannot outrun between the two.
	limits["APELORA_FENCE_CONFIRM_TIMEOUT"] = "60s"
	x := &fenceEnv{t: t, lab: a, maas: fs, db: db, api: api, bare: api, workers: map[string]*workerProc{}, limits: limits, auditKey: auditKey}
	x.admin = api.Identity("admin", identity.ManageInfrastructure)
	x.gql(api, registerClusterQuery, map[string]any{"in": map[string]any{"name": "b", "url": b.URL, "clusterCertificate": b.ClusterCertificatePEM()}})

	// Mappings: no machine records, so each names its cluster.
	const setIn = `mutation($m: String!, $c: String, $s: String!, $u: String!) { setFenceMapping(input: {member: $m, cluster: $c, maasSystemId: $s, hardwareUuid: $u}) {
		mapping { member cluster maasSystemId } verifiedWithMaas } }`
	for _, m := range []string{"m1", "m2", "m3"} {
		r := x.gql(api, setIn, map[string]any{"m": m, "c": "default", "s": "fnc" + m, "u": fenceLabUUID("fnc", m)})["setFenceMapping"].(map[string]any)
		if mp := r["mapping"].(map[string]any); mp["cluster"] != "default" || r["verifiedWithMaas"] != true {
			t.Fatalf("default's %s: %v", m, r)
		}
	}
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		r := x.gql(api, setIn, map[string]any{"m": m, "c": "b", "s": "fnb" + m, "u": fenceLabUUID("fnb", m)})["setFenceMapping"].(map[string]any)
		if mp := r["mapping"].(map[string]any); mp["cluster"] != "b" || mp["maasSystemId"] != "fnb"+m {
			t.Fatalf("b's %s: %v", m, r)
		}
	}
	// The same machine for a member of the other cluster is refused: one machine powers
	// one member.
	if r := api.GQL(x.admin, setIn, map[string]any{"m": "m1", "c": "default", "s": "fnbm2", "u": fenceLabUUID("fnb", "m2")}); r.Code() != "ALREADY_EXISTS" ||
		!strings.Contains(r.Errors[0].Message, "m2 of cluster b") {
		t.Fatalf("b's m2's machine for default's m1: %+v", r.Errors)
	}

	x.startWorker("w1")
	state := func() map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, c := range x.gql(api, `{ clusters { name fencing { acting pausedCode pausedReason unreadableSince mappings } } }`, nil)["clusters"].([]any) {
			c := c.(map[string]any)
			out[c["name"].(string)] = c["fencing"].(map[string]any)
		}
		return out
	}
	x.waitFor("the worker acting in both clusters", func() bool {
		s := state()
		return s["default"]["acting"] == true && s["b"]["acting"] == true
	})
	if s := state(); s["default"]["mappings"] != float64(3) || s["b"]["mappings"] != float64(4) {
		t.Fatalf("cluster fencing %v", s)
	}

	// events reads the fence events of one cluster's member (member "": the cluster's own).
	type event struct{ kind, reason, system string }
	events := func(cluster, member string) []event {
		var out []event
		rows, err := db.Store.Pool().Query(context.Background(), `SELECT e.kind, coalesce(e.reason, ''), coalesce(e.details->>'maasSystemId', '')
			FROM fence_events e JOIN clusters c ON c.id = e.cluster_id WHERE c.name = $1 AND coalesce(e.member, '') = $2 ORDER BY e.id`, cluster, member)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var e event
			if err := rows.Scan(&e.kind, &e.reason, &e.system); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	has := func(cluster, member, kind string) bool {
		return slices.ContainsFunc(events(cluster, member), func(e event) bool { return e.kind == kind })
	}
	// fence waits for the member's power-off request, lets the simulated controller say
	// off, and waits for the confirmation.
	fence := func(cluster, member string) {
		t.Helper()
		x.waitFor(cluster+"'s "+member+" REQUESTED", func() bool { return has(cluster, member, "REQUESTED") })
		fs.clock.Advance(2 * time.Second)
		x.waitFor(cluster+"'s "+member+" CONFIRMED", func() bool { return has(cluster, member, "CONFIRMED") })
	}

	// default's m3 dies, and with it b's standby and one of b's voters that does not lead
	// (b keeps its quorum).
	roles := map[string]string{}
	for _, m := range x.gql(api, `{ clusters { name members { name roles } } }`, nil)["clusters"].([]any) {
		if m := m.(map[string]any); m["name"] == "b" {
			for _, mem := range m["members"].([]any) {
				mem := mem.(map[string]any)
				roles[mem["name"].(string)] = fmt.Sprint(mem["roles"])
			}
		}
	}
	var standby, voter string
	for _, n := range []string{"m4", "m3", "m2"} {
		switch r := roles[n]; {
		case strings.Contains(r, "database-standby") && standby == "":
			standby = n
		case strings.Contains(r, "database") && !strings.Contains(r, "leader") && !strings.Contains(r, "standby") && voter == "":
			voter = n
		}
	}
	if standby == "" || voter == "" {
		t.Fatalf("b's roles %v: no standby and non-leading voter", roles)
	}
	down := []string{voter, standby}
	slices.Sort(down)
	if err := a.Kill(a.Member("m3")); err != nil {
		t.Fatal(err)
	}
	for _, n := range down {
		if err := b.Kill(b.Member(n)); err != nil {
			t.Fatal(err)
		}
	}
	fence("default", "m3")
	for _, n := range down {
		x.waitFor("b's "+n+" refused", func() bool { return has("b", n, "REFUSED") })
		if got := events("b", n); !slices.Equal(got, []event{{"OFFLINE", "", ""}, {"REFUSED", "TOO_MANY_OFFLINE", "fnb" + n}}) {
			t.Fatalf("b's %s: %v", n, got)
		}
	}
	for _, e := range events("default", "m3") {
		if e.system != "" && e.system != "fncm3" {
			t.Fatalf("default's m3 names machine %s", e.system)
		}
	}

	// b frozen (every member still running): paused there, once; default goes on.
	var up []string
	for _, m := range b.Members {
		if !slices.Contains(down, m.Name) {
			up = append(up, m.Name)
			if err := b.Freeze(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	x.waitFor("b UNREADABLE", func() bool { return has("b", "", "UNREADABLE") })
	if s := state()["b"]; s["acting"] != false || s["pausedCode"] != "INCUS_UNAVAILABLE" || s["unreadableSince"] == nil {
		t.Fatalf("b's fencing while frozen: %v", s)
	}
	if s := state()["default"]; s["acting"] != true {
		t.Fatalf("default's fencing while b is frozen: %v", s)
	}
	// default's m3 back (repaired), then its m2 dies: 1 of 3 offline again, fenced.
	if err := a.RestartMember(a.Member("m3")); err != nil {
		t.Fatal(err)
	}
	x.waitFor("default's m3 back online", func() bool { return has("default", "m3", "BACK_ONLINE") })
	if err := a.Kill(a.Member("m2")); err != nil {
		t.Fatal(err)
	}
	fence("default", "m2")
	if got := events("b", ""); len(got) != 1 || got[0].kind != "UNREADABLE" {
		t.Fatalf("b's cluster events %v, want one UNREADABLE", got)
	}
	if s := state()["b"]; s["pausedCode"] != "INCUS_UNAVAILABLE" {
		t.Fatalf("b's fencing after default's second fence: %v", s)
	}

	// Through the API: fenceEvents(cluster:) keeps one cluster's events, and with member
	// one member of one cluster; every event names its cluster.
	apiEvents := func(vars map[string]any) []string {
		var out []string
		d := x.gql(api, `query($m: String, $c: String) { fenceEvents(member: $m, cluster: $c, first: 500) { edges { node { kind member cluster } } } }`, vars)
		for _, e := range d["fenceEvents"].(map[string]any)["edges"].([]any) {
			n := e.(map[string]any)["node"].(map[string]any)
			out = append(out, fmt.Sprintf("%v/%v/%v", n["cluster"], n["member"], n["kind"]))
		}
		return out
	}
	for _, e := range apiEvents(map[string]any{"c": "b"}) {
		if !strings.HasPrefix(e, "b/") {
			t.Fatalf("fenceEvents(cluster: b) gave %s", e)
		}
	}
	if got := apiEvents(map[string]any{"c": "b", "m": nil}); !slices.Contains(got, "b/<nil>/UNREADABLE") {
		t.Fatalf("fenceEvents(cluster: b): %v", got)
	}
	if got := apiEvents(map[string]any{"m": "m2", "c": "default"}); !slices.Contains(got, "default/m2/CONFIRMED") || slices.ContainsFunc(got, func(e string) bool { return !strings.HasPrefix(e, "default/m2/") }) {
		t.Fatalf("fenceEvents(member: m2, cluster: default): %v", got)
	}

	// Tracking: default's whole, b's kept through its outage (its two still in theirs).
	tracked := func(cluster string) string {
		var out []string
		rows, err := db.Store.Pool().Query(context.Background(), `SELECT t.member, t.first_seen_offline IS NOT NULL FROM fence_member_tracking t
			JOIN clusters c ON c.id = t.cluster_id WHERE c.name = $1 ORDER BY t.member`, cluster)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var m string
			var off bool
			if err := rows.Scan(&m, &off); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s:%v", m, off))
		}
		return strings.Join(out, " ")
	}
	if got := tracked("default"); got != "m1:false m2:true m3:false" {
		t.Fatalf("default's tracking %q", got)
	}
	var want []string
	for _, m := range b.Members {
		want = append(want, fmt.Sprintf("%s:%v", m.Name, slices.Contains(down, m.Name)))
	}
	if got := tracked("b"); got != strings.Join(want, " ") {
		t.Fatalf("b's tracking during its outage %q, want %q", got, strings.Join(want, " "))
	}
	// The m2 of each cluster named its own machine only; b's machines were never powered.
	for _, e := range events("default", "m2") {
		if e.system != "" && e.system != "fncm2" {
			t.Fatalf("default's m2 names machine %s", e.system)
		}
	}
	for _, id := range []string{"fnbm1", "fnbm2", "fnbm3", "fnbm4", "fncm1"} {
		for _, r := range fs.Requests() {
			if r.Path == "/MAAS/api/2.0/machines/"+id+"/" && r.Op == "power_off" {
				t.Fatalf("machine %s was powered off", id)
			}
		}
	}

	// b thawed: READABLE once, and it acts again.
	for _, n := range up {
		if err := b.Thaw(b.Member(n)); err != nil {
			t.Fatal(err)
		}
	}
	x.waitFor("b READABLE", func() bool { return has("b", "", "READABLE") })
	// (Thawed, b's members answer before its database does: a QUORUM_LOST and QUORUM_BACK
	// may come between; the outage itself is one UNREADABLE and one READABLE.)
	var kinds []string
	for _, e := range events("b", "") {
		if e.kind == "UNREADABLE" || e.kind == "READABLE" {
			kinds = append(kinds, e.kind)
		}
	}
	if !slices.Equal(kinds, []string{"UNREADABLE", "READABLE"}) {
		t.Fatalf("b's cluster events %v", events("b", ""))
	}
	x.waitFor("b acting again", func() bool { return state()["b"]["acting"] == true })
	if logs := x.workerLogs(); strings.Contains(logs, "panic") {
		t.Fatalf("worker log:\n%s", logs)
	}
}
