package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

const (
	registerClusterQuery = `mutation($in: RegisterClusterInput!) { registerCluster(input: $in) {
		cluster { name certificateFingerprint registeredBy fromEnvironment addresses source { available message } members { name roles } }
		plan { planHash refused refusals { code message } facts { name value } calls { system target } } } }`
	removeClusterQuery = `mutation($in: RemoveClusterInput!) { removeCluster(input: $in) {
		removed { name } plan { planHash refused refusals { code message } } } }`
	clustersQuery = `{ clusters { name fromEnvironment certificateFingerprint registeredBy addresses through
		source { available message } members { name status roles version { incus } }
		quorum { voters votersOnline majority standbys databaseLeader }
		placementGuard { state } machineRecords removeRefusal } }`
)

// Two real Incus clusters on loopback: the one of APELORA_INCUS_* is adopted at start as
// "default", a second is registered through the API (planned, then confirmed with the plan's
// hash) with Apelora's one client identity, and both are listed with their members, state and
// guard. Every bad input is a clear refusal audited exactly once; registering and removing
// need manage-infrastructure; a cluster named by a machine record cannot be removed; no
// secret reaches the database.
func TestRegisteringASecondClusterAndEveryBadInput(t *testing.T) {
	parallel(t, lasts(8))
	lab := incuslab.Start(t, 1)
	// rack2 trusts Apelora's client identity (the first lab's); rack3 does not yet.
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 2, Identity: lab.Identity()})
	rack3 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity(), Untrusted: true})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)

	listClusters := func() map[string]map[string]any {
		t.Helper()
		out := map[string]map[string]any{}
		for _, c := range e.MustGQL(viewer, clustersQuery, nil)["clusters"].([]any) {
			c := c.(map[string]any)
			out[c["name"].(string)] = c
		}
		return out
	}
	memberNames := func(c map[string]any) []string {
		t.Helper()
		if c["members"] == nil {
			t.Fatalf("cluster %v: no members", c)
		}
		var names []string
		for _, m := range c["members"].([]any) {
			names = append(names, m.(map[string]any)["name"].(string))
		}
		return names
	}

	// The cluster of APELORA_INCUS_* is the first cluster, adopted as "default".
	cs := listClusters()
	def := cs["default"]
	if len(cs) != 1 || def == nil || def["fromEnvironment"] != true || def["registeredBy"] != "apelora (migration)" ||
		def["source"].(map[string]any)["available"] != true || fmt.Sprint(memberNames(def)) != "[m1]" {
		t.Fatalf("clusters at start: %v", cs)
	}
	if got := e.MustGQL(viewer, `{ incusClientCertificate }`, nil)["incusClientCertificate"]; got != readFile(t, lab.ClientCertFile) {
		t.Fatalf("incusClientCertificate = %v, want the client certificate of APELORA_INCUS_CLIENT_CERT", got)
	}

	// refused calls one bad call (not a dry run): its error's code, the field at fault, what
	// the message must say, and exactly one audit event for its request.
	refused := func(what, token, query string, in map[string]any, code, field, says string) {
		t.Helper()
		r := e.GQL(token, query, map[string]any{"in": in})
		if r.Code() != code || !strings.Contains(r.Errors[0].Message, says) {
			t.Fatalf("%s: %+v, want %s saying %q", what, r.Errors, code, says)
		}
		if f, _ := r.Errors[0].Extensions["field"].(string); field != "" && f != field {
			t.Fatalf("%s: field %q, want %q (%+v)", what, f, field, r.Errors)
		}
		id := r.Header.Get("X-Request-Id")
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1`, id); n != int64(1) {
			t.Fatalf("%s: %v audit events for request %s, want 1", what, n, id)
		}
		// An upstream that cannot be reached fails the step (FAILED); every other bad input is
		// refused before anything is recorded (REFUSED).
		want := "REFUSED "
		if code == "UNAVAILABLE" {
			want = "FAILED "
		}
		if o := e.Scalar(`SELECT outcome || ' ' || action FROM audit_events WHERE request_id = $1`, id); !strings.HasPrefix(o.(string), want) {
			t.Fatalf("%s: audited %v, want %s", what, o, want)
		}
	}
	reg := func(name, url, cert string) map[string]any {
		return map[string]any{"name": name, "url": url, "clusterCertificate": cert}
	}
	cert2, cert3 := rack2.ClusterCertificatePEM(), rack3.ClusterCertificatePEM()

	// Without manage-infrastructure: refused, the plan too.
	refused("register without permission", viewer, registerClusterQuery, reg("rack2", rack2.URL, cert2), "FORBIDDEN", "", "manage-infrastructure")
	dry := reg("rack2", rack2.URL, cert2)
	dry["dryRun"] = true
	// A plan asked without it is the plan's refusal, audited REFUSED.
	rp := e.GQL(viewer, registerClusterQuery, map[string]any{"in": dry})
	if p := rp.Data["registerCluster"].(map[string]any)["plan"].(map[string]any); p["refused"] != true || !strings.Contains(fmt.Sprint(p["refusals"]), "FORBIDDEN") {
		t.Fatalf("a plan without permission: %v %+v", rp.Data, rp.Errors)
	}
	if o := e.Scalar(`SELECT string_agg(outcome, ' ') FROM audit_events WHERE request_id = $1`, rp.Header.Get("X-Request-Id")); o != "REFUSED" {
		t.Fatalf("a plan without permission audited %v, want REFUSED once", o)
	}

	// The plan: the fingerprint it will pin, the members and their roles, no call to Incus.
	p := e.MustGQL(admin, registerClusterQuery, map[string]any{"in": dry})["registerCluster"].(map[string]any)
	plan := p["plan"].(map[string]any)
	facts := fmt.Sprint(plan["facts"])
	fp2 := fingerprintOf(t, cert2)
	if p["cluster"] != nil || plan["refused"] != false || !strings.Contains(facts, fp2) || !strings.Contains(facts, "member m1") ||
		!strings.Contains(facts, "member m2") || !strings.Contains(facts, "database") {
		t.Fatalf("the plan of registerCluster: %v", p)
	}
	for _, c := range plan["calls"].([]any) {
		if sys := c.(map[string]any)["system"]; sys != "DATABASE" {
			t.Fatalf("the plan sends %v to %v: registering writes nothing but its record", c, sys)
		}
	}
	if n := e.Scalar(`SELECT count(*) FROM clusters`); n != int64(1) {
		t.Fatalf("a plan recorded a cluster (%v clusters)", n)
	}
	in := reg("rack2", rack2.URL, cert2)
	in["planHash"] = plan["planHash"]
	r := e.MustGQL(admin, registerClusterQuery, map[string]any{"in": in})["registerCluster"].(map[string]any)["cluster"].(map[string]any)
	if r["name"] != "rack2" || r["certificateFingerprint"] != fp2 || r["registeredBy"] != "admin" || r["fromEnvironment"] != false ||
		fmt.Sprint(memberNames(r)) != "[m1 m2]" || !slices.Contains(anyStrings(r["addresses"]), rack2.URL) {
		t.Fatalf("registered %v", r)
	}

	// Both listed, each with its own members (both have an m1), state and guard.
	cs = listClusters()
	c2 := cs["rack2"]
	if len(cs) != 2 || c2 == nil || c2["source"].(map[string]any)["available"] != true || fmt.Sprint(memberNames(c2)) != "[m1 m2]" ||
		fmt.Sprint(c2["placementGuard"]) != "map[state:OFF]" || c2["removeRefusal"] != nil || c2["machineRecords"] != float64(0) {
		t.Fatalf("clusters after registering rack2: %v", cs)
	}
	for _, m := range c2["members"].([]any) {
		m := m.(map[string]any)
		if m["status"] != "ONLINE" || len(m["roles"].([]any)) == 0 || m["version"] == nil {
			t.Fatalf("rack2's member %v", m)
		}
	}
	// Two members: Incus keeps one voter (the database leader) and one stand-by.
	if q := fmt.Sprint(c2["quorum"]); q != "map[databaseLeader:m1 majority:1 standbys:1 voters:1 votersOnline:1]" {
		t.Fatalf("rack2's quorum: %v", q)
	}
	if got := fmt.Sprint(memberNames(cs["default"])); got != "[m1]" {
		t.Fatalf("default's members after registering rack2: %s", got)
	}

	// Bad input, each refused and audited once.
	refused("a URL that is not HTTPS", admin, registerClusterQuery, reg("rack4", strings.Replace(rack2.URL, "https://", "http://", 1), cert2),
		"INVALID_INPUT", "url", "HTTPS")
	refused("the same cluster under another name", admin, registerClusterQuery, reg("rack2-again", rack2.URL, cert2),
		"ALREADY_EXISTS", "clusterCertificate", "cluster rack2 has this certificate")
	refused("a name registered already", admin, registerClusterQuery, reg("rack2", rack3.URL, cert3),
		"ALREADY_EXISTS", "name", "rack2 is registered already")
	refused("a certificate that is not the cluster's", admin, registerClusterQuery, reg("rack4", rack2.URL, cert3),
		"FAILED_PRECONDITION", "clusterCertificate", fingerprintOf(t, cert3))
	refused("a cluster that does not trust Apelora", admin, registerClusterQuery, reg("rack3", rack3.URL, cert3),
		"FAILED_PRECONDITION", "", "incus config trust add-certificate")
	refused("a URL where no cluster answers", admin, registerClusterQuery, reg("rack4", "https://127.0.0.1:1", cert3),
		"UNAVAILABLE", "", "could not be reached")
	refused("an unknown cluster to remove", admin, removeClusterQuery, map[string]any{"name": "rack9"}, "NOT_FOUND", "name", "no cluster named rack9")
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "m1", "provisioner": "MANUAL"}})
	refused("a cluster a machine record names", admin, removeClusterQuery, map[string]any{"name": "default"}, "FAILED_PRECONDITION", "", "machine record")
	refused("remove without permission", viewer, removeClusterQuery, map[string]any{"name": "rack2"}, "FORBIDDEN", "", "manage-infrastructure")
	if r := e.GQL(viewer, `{ clusters(names: ["rack9"]) { name } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("clusters(names: [rack9]): %+v", r.Errors)
	}

	// The untrusted cluster's plan says what to run; once it trusts Apelora, it registers.
	dry3 := reg("rack3", rack3.URL, cert3)
	dry3["dryRun"] = true
	plan = e.MustGQL(admin, registerClusterQuery, map[string]any{"in": dry3})["registerCluster"].(map[string]any)["plan"].(map[string]any)
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "incus config trust add-certificate") {
		t.Fatalf("the plan for a cluster that does not trust Apelora: %v", plan)
	}
	if err := rack3.Trust(lab.Identity()); err != nil {
		t.Fatal(err)
	}
	if r := e.RegisterCluster(admin, "rack3", rack3); len(r.Errors) > 0 {
		t.Fatalf("rack3 once it trusts Apelora: %+v", r.Errors)
	}

	// A machine record names default (its members' records): it cannot be removed, as
	// Cluster.removeRefusal says beforehand.
	if refusal, _ := listClusters()["default"]["removeRefusal"].(string); !strings.Contains(refusal, "1 machine record") {
		t.Fatalf("default's removeRefusal: %q", refusal)
	}

	// rack2 has history, as a member that was admitted, evacuated and rolled through and
	// then left leaves it (written here as the steps write it; their own e2e tests run
	// them): removing rack2 is not refused for it, and the history still reads afterwards.
	rack2ID := e.Scalar(`SELECT id FROM clusters WHERE name = 'rack2'`)
	e.Scalar(`INSERT INTO admissions (machine, member, admitted_by, request_id, cluster_id, ended_at, ended_by)
		VALUES ('gone1', 'gone1', 'admin', 'r1', $1, now(), 'admin') RETURNING id`, rack2ID)
	e.Scalar(`INSERT INTO member_operations (machine, action, incus_operation, started_by, finished_at, outcome, cluster_id)
		VALUES ('gone1', 'evacuate', 'op-1', 'admin', now(), 'SUCCEEDED', $1) RETURNING id`, rack2ID)
	reboot := e.Scalar(`INSERT INTO rolling_operations (members, started_by, state, step, finished_at, cluster_id)
		VALUES ('{gone1}', 'admin', 'SUCCEEDED', 'DONE', now(), $1) RETURNING id::text`, rack2ID)
	if refusal := listClusters()["rack2"]["removeRefusal"]; refusal != nil {
		t.Fatalf("rack2's removeRefusal with history only: %v", refusal)
	}

	// Removing rack2: planned, confirmed, gone.
	plan = e.MustGQL(admin, removeClusterQuery, map[string]any{"in": map[string]any{"name": "rack2", "dryRun": true}})["removeCluster"].(map[string]any)["plan"].(map[string]any)
	if plan["refused"] != false {
		t.Fatalf("the plan of removing rack2: %v", plan)
	}
	e.MustGQL(admin, removeClusterQuery, map[string]any{"in": map[string]any{"name": "rack2", "planHash": plan["planHash"]}})
	if cs := listClusters(); cs["rack2"] != nil || cs["rack3"] == nil || cs["default"] == nil {
		t.Fatalf("clusters after removing rack2: %v", cs)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action IN ('registerCluster', 'removeCluster') AND outcome = 'SUCCEEDED'`); n != int64(3) {
		t.Fatalf("%v successful cluster changes audited, want 3 (register rack2, rack3, remove rack2)", n)
	}
	// Its history reads: the rolling reboot with no cluster, the evacuation by member.
	rr := e.MustGQL(viewer, `query($id: ID!) { rollingReboot(id: $id) { id state cluster { name } } }`, map[string]any{"id": reboot})["rollingReboot"].(map[string]any)
	if rr["id"] != reboot || rr["state"] != "SUCCEEDED" || rr["cluster"] != nil {
		t.Fatalf("rack2's rolling reboot after its removal: %v", rr)
	}
	tasks := e.MustGQL(viewer, `{ maintenanceTasks(name: "gone1") { action outcome } }`, nil)["maintenanceTasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["outcome"] != "SUCCEEDED" {
		t.Fatalf("rack2's evacuation after its removal: %v", tasks)
	}
	if n := e.Scalar(`SELECT count(*) FROM admissions WHERE cluster_id = $1 AND ended_at IS NOT NULL`, rack2ID); n != int64(1) {
		t.Fatalf("%v ended admissions of rack2 kept, want 1", n)
	}

	// No secret in the database: Apelora's client key is in no row.
	key := keyBody(t, lab.ClientKeyFile)
	if n := e.Scalar(`SELECT count(*) FROM clusters c WHERE c::text LIKE '%' || $1 || '%' OR c::text LIKE '%PRIVATE KEY%'`, key); n != int64(0) {
		t.Fatalf("%v cluster rows hold the client key", n)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events a WHERE a::text LIKE '%' || $1 || '%' OR a::text LIKE '%PRIVATE KEY%'`, key); n != int64(0) {
		t.Fatalf("%v audit events hold the client key", n)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// keyBody is a line from the middle of a PEM key file: what a leak of it would contain.
func keyBody(t *testing.T, name string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(readFile(t, name)), "\n")
	if len(lines) < 3 {
		t.Fatalf("%s is not a PEM key", name)
	}
	return lines[1]
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// fingerprintOf is the SHA-256 of a PEM certificate's first block, as Incus shows it.
func fingerprintOf(t *testing.T, pemText string) string {
	t.Helper()
	fps := clusters.Fingerprints(pemText)
	if len(fps) == 0 {
		t.Fatal("no certificate in the PEM")
	}
	return fps[0]
}

// TestConsoleRegistersACluster: the clusters page lists the cluster of APELORA_INCUS_*;
// a second real lab is registered through the dialog (its plan shows the fingerprint and the
// members with their roles), an untrusted one is refused in the plan with the command to run,
// and the second is removed again; with two, the approve dialog's chooser offers both and the
// plan names the one chosen; checked in Chromium (web/console/e2e/clusters.e2e.mjs).
func TestConsoleRegistersACluster(t *testing.T) {
	parallel(t, lasts(32), browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 1)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 2, Identity: lab.Identity()})
	rack3 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity(), Untrusted: true})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "m1", "provisioner": "MANUAL"}})
	// node-7: a registered record naming no cluster, for the approve dialog's chooser.
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "node-7", "provisioner": "MANUAL"}})
	cert2 := rack2.ClusterCertificatePEM()
	runScript(t, node, dir, "clusters.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "clusters"),
		"RACK2_URL": rack2.URL, "RACK2_CERT": cert2, "RACK2_FINGERPRINT": fingerprintOf(t, cert2),
		"RACK3_URL": rack3.URL, "RACK3_CERT": rack3.ClusterCertificatePEM(),
	})
}

// An install of the previous release runs on unchanged: its database (migrated up to 0039,
// written as that release wrote it) keeps every record, admission and fence mapping after
// migration 0040, and the cluster of APELORA_INCUS_* is adopted at the first start under
// APELORA_INCUS_CLUSTER_NAME, with them all; it cannot be removed while they name it.
func TestThePreviousReleasesDatabaseRunsOnUnchanged(t *testing.T) {
	parallel(t, lasts(6))
	ctx := t.Context()
	lab := incuslab.Start(t, 2)
	db := pgtest.NewBefore(t, 40)
	for _, sql := range []string{
		`INSERT INTO machine_records (name, provisioner, maas_system_id, hardware_uuid, registered_at, registered_by) VALUES
			('m1', 'MANUAL', NULL, NULL, now(), 'admin'), ('m2', 'MAAS', 'aaaa01', '4c4c4544-0042-3510-8052-000000000001', now(), 'admin')`,
		`INSERT INTO admissions (machine, member, roles, admitted_by, request_id) VALUES ('m2', 'm2', '{database-standby}', 'admin', 'r1')`,
		`INSERT INTO fence_mappings (member, maas_system_id, hardware_uuid, set_by, set_at) VALUES ('m2', 'aaaa01', '4c4c4544-0042-3510-8052-000000000001', 'admin', now())`,
	} {
		if _, err := db.Store.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := db.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := producttest.StartOn(t, db, db.Store, producttest.WithIncus(lab.Config), func(c *app.Config) { c.Incus.ClusterName = "rack1" })
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	admin := e.Identity("admin", identity.ManageInfrastructure)

	cs := e.MustGQL(viewer, `{ clusters { name fromEnvironment registeredBy members { name } machineRecords removeRefusal } }`, nil)["clusters"].([]any)
	if len(cs) != 1 {
		t.Fatalf("clusters: %v", cs)
	}
	c := cs[0].(map[string]any)
	refusal, _ := c["removeRefusal"].(string)
	if c["name"] != "rack1" || c["fromEnvironment"] != true || c["registeredBy"] != "apelora (migration)" || c["machineRecords"] != float64(2) ||
		fmt.Sprint(c["members"]) != "[map[name:m1] map[name:m2]]" || !strings.Contains(refusal, "2 machine records, 1 fence mapping, 1 admission") {
		t.Fatalf("the carried-over cluster: %v", c)
	}
	if got := fmt.Sprint(e.MustGQL(viewer, `{ machines { name } fenceMappings { member maasSystemId } }`, nil)); got !=
		"map[fenceMappings:[map[maasSystemId:aaaa01 member:m2]] machines:[map[name:m1] map[name:m2]]]" {
		t.Fatalf("records and mappings after the upgrade: %s", got)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'adoptCluster' AND outcome = 'SUCCEEDED'`); n != int64(1) {
		t.Fatalf("%v adoption events, want 1", n)
	}
	r := e.GQL(admin, removeClusterQuery, map[string]any{"in": map[string]any{"name": "rack1"}})
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "2 machine records") {
		t.Fatalf("removing the carried-over cluster: %+v", r.Errors)
	}
}

// The previous release's database started without APELORA_INCUS_*: its records stay with
// the cluster the migration carried them over to, listed unread until those settings are
// set again (its source says so).
func TestACarriedOverClusterWaitsForItsSettings(t *testing.T) {
	parallel(t)
	ctx := t.Context()
	db := pgtest.NewBefore(t, 40)
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO machine_records (name, provisioner, registered_at, registered_by) VALUES ('m1', 'MANUAL', now(), 'admin')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := producttest.StartOn(t, db, db.Store, producttest.WithoutIncus())
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	cs := e.MustGQL(viewer, `{ clusters { name fromEnvironment certificateFingerprint source { available message } members { name } machineRecords } }`, nil)["clusters"].([]any)
	if len(cs) != 1 {
		t.Fatalf("clusters: %v", cs)
	}
	c := cs[0].(map[string]any)
	src := c["source"].(map[string]any)
	msg, _ := src["message"].(string)
	if c["name"] != "default" || c["fromEnvironment"] != true || c["certificateFingerprint"] != "" || c["members"] != nil || c["machineRecords"] != float64(1) ||
		src["available"] != false || !strings.Contains(msg, "APELORA_INCUS_") {
		t.Fatalf("the carried-over cluster without APELORA_INCUS_*: %v", c)
	}
}
