package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// TestRollingRebootInEachCluster: two real Incus clusters on loopback, "default" (the one
// of APELORA_INCUS_*) and "b" (registered through the API), each with members m1 (the
// database voter, admitted) and m2 (a stand-by) — the same member names in both. The
// placement guard is each cluster's own: turned on in one, it reads on there and off in the
// other, and a call naming no cluster is refused while there are two. Then a rolling reboot
// of m2 in each cluster, started at once, driven by one worker: both complete, each power
// cycle reaching its own cluster's MAAS machine; a second start in "default" is refused
// while its own runs, and b's goes on meanwhile.
func TestRollingRebootInEachCluster(t *testing.T) {
	parallel(t, lasts(36))
	labA, labB := twoLabs(t, 2)
	labs := map[string]*incuslab.Cluster{"default": labA, "b": labB}
	fs := startTwoClusterFenceSim(t, labs)

	db := pgtest.New(t)
	auditKey := filepath.Join(t.TempDir(), auditlog.KeyFile)
	k, _, err := auditlog.LoadOrCreateKey(auditKey)
	if err != nil {
		t.Fatal(err)
	}
	db.Store.SealAuditWith(k.Sealer)
	api := producttest.StartOn(t, db, db.Store, producttest.WithIncus(labA.Config), withFenceMAAS(fs.apiConfig()),
		func(c *app.Config) { c.AuditKeyFile = auditKey })
	// The fence worker in the same process must not act during the test: a member it sees
	// offline is evacuated anyway, and the long delay keeps it a bystander.
	x := &fenceEnv{t: t, lab: labA, maas: fs.fenceSim, db: db, api: api, bare: api, workers: map[string]*workerProc{}, auditKey: auditKey,
		limits: map[string]string{"APELORA_FENCE_OFFLINE_AFTER": "10m", "APELORA_FENCE_POLL_INTERVAL": "1s", "APELORA_FENCE_DRILL_INTERVAL": "1h"}}
	x.admin = api.Identity("admin", identity.ManageInfrastructure)
	if r := api.RegisterCluster(x.admin, "b", labB); len(r.Errors) > 0 {
		t.Fatalf("register b: %+v", r.Errors)
	}

	// Each lab: m1 admitted (the guard and the evacuation place on it), a root disk for
	// evacuations on the dir pool, one instance on m2.
	for name, lab := range labs {
		m1 := lab.Members[0]
		for _, args := range [][]string{
			{"profile", "device", "add", "default", "root", "disk", "path=/", "pool=" + incuslab.Pool},
			{"cluster", "set", "m1", lifecycle.AdmissionKey, "test"},
			{"init", "--empty", "c-" + name, "-s", incuslab.Pool, "--target", "m2"},
		} {
			if out, err := lab.CLI(m1, args...); err != nil {
				t.Fatalf("%s: incus %v: %v: %s", name, args, err, out)
			}
		}
	}

	// The guard, per cluster.
	const setGuard = `mutation($on: Boolean!, $c: String) { setPlacementGuard(input: {enabled: $on, cluster: $c}) { placementGuard { state } } }`
	if r := api.GQL(x.admin, setGuard, map[string]any{"on": true}); r.Code() != "INVALID_INPUT" || !strings.Contains(r.Errors[0].Message, "b, default") {
		t.Fatalf("a guard call naming no cluster, with two: %+v", r.Errors)
	}
	if r := api.GQL(x.admin, setGuard, map[string]any{"on": true, "c": "nope"}); r.Code() != "NOT_FOUND" || r.Errors[0].Extensions["field"] != "cluster" {
		t.Fatalf("a guard call naming an unknown cluster: %+v", r.Errors)
	}
	scriptlet := func(lab *incuslab.Cluster) string {
		out, err := lab.CLI(lab.Members[0], "config", "get", "instances.placement.scriptlet")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	guards := func() string {
		var out []string
		for _, c := range x.gql(api, `{ clusters { name placementGuard { state } } }`, nil)["clusters"].([]any) {
			c := c.(map[string]any)
			out = append(out, fmt.Sprintf("%s %v", c["name"], c["placementGuard"].(map[string]any)["state"]))
		}
		return strings.Join(out, ", ")
	}
	x.gql(api, setGuard, map[string]any{"on": true, "c": "b"})
	if g := guards(); g != "b ON, default OFF" || scriptlet(labA) != "" || scriptlet(labB) == "" {
		t.Fatalf("the guard turned on in b: %s", g)
	}
	x.gql(api, setGuard, map[string]any{"on": true, "c": "default"})
	if g := guards(); g != "b ON, default ON" {
		t.Fatalf("the guard turned on in both: %s", g)
	}
	if n := api.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'setPlacementGuard' AND outcome = 'SUCCEEDED' AND details->>'cluster' IN ('b', 'default')`); n != int64(2) {
		t.Fatalf("%v audited guard changes naming their cluster, want 2", n)
	}

	// A fence mapping per member of each cluster, through setFenceMapping naming the
	// member's cluster (both clusters have an m1 and an m2).
	const setMappingIn = `mutation($m: String!, $s: String!, $u: String!, $c: String) {
		setFenceMapping(input: {member: $m, maasSystemId: $s, hardwareUuid: $u, cluster: $c}) { mapping { member } } }`
	for _, c := range []string{"default", "b"} {
		for _, m := range []string{"m1", "m2"} {
			vars := mappingVars(m, fs.ids[c+"/"+m], fs.uuids[c+"/"+m])
			vars["c"] = c
			x.gql(api, setMappingIn, vars)
		}
	}

	const start = `mutation($m: [String!]!, $c: String) { startRollingReboot(input: {members: $m, cluster: $c}) {
		rollingReboot { id state cluster { name } } } }`
	// Members of no record with two clusters: the cluster must be named.
	if r := api.GQL(x.admin, start, map[string]any{"m": []string{"m2"}}); r.Code() != "INVALID_INPUT" {
		t.Fatalf("a start naming no cluster, with two: %+v", r.Errors)
	}
	x.startWorker("w1", "APELORA_ROLLING_ONLINE_TIMEOUT=90s")
	began := time.Now()
	ids := map[string]string{}
	for _, c := range []string{"default", "b"} {
		r := x.gql(api, start, map[string]any{"m": []string{"m2"}, "c": c})["startRollingReboot"].(map[string]any)["rollingReboot"].(map[string]any)
		if r["cluster"].(map[string]any)["name"] != c {
			t.Fatalf("the rolling reboot started in %s is in %v", c, r["cluster"])
		}
		ids[c] = r["id"].(string)
	}
	// A second in default is refused while its own runs; b's is not touched by it.
	if r := api.GQL(x.admin, start, map[string]any{"m": []string{"m1"}, "c": "default"}); r.Code() != "FAILED_PRECONDITION" ||
		!strings.Contains(r.Errors[0].Message, "rolling reboot "+ids["default"]) || !strings.Contains(r.Errors[0].Message, "one rolling reboot per cluster") {
		t.Fatalf("a second rolling reboot in default: %+v", r.Errors)
	}
	rolling := func(c string) map[string]any {
		r, _ := x.gql(api, `query($c: String) { rollingReboot(cluster: $c) { id state stage current reason } }`, map[string]any{"c": c})["rollingReboot"].(map[string]any)
		return r
	}
	if r := rolling("b"); r["id"] != ids["b"] || r["state"] != "RUNNING" {
		t.Fatalf("b's rolling reboot after the refusal in default: %v", r)
	}
	last := map[string]string{}
	waitUntil(t, "both rolling reboots ended", func() bool {
		ended := 0
		for c := range ids {
			r := rolling(c)
			if now := fmt.Sprintf("%v %v %v", r["current"], r["stage"], r["state"]); now != last[c] {
				t.Logf("%s: rolling reboot %v: %s", c, r["id"], now)
				last[c] = now
			}
			if r["state"] != "RUNNING" {
				ended++
			}
		}
		return ended == len(ids)
	})
	t.Logf("m2 of both clusters rebooted at once in %v", time.Since(began).Round(time.Second))
	for c, id := range ids {
		if r := rolling(c); r["id"] != id || r["state"] != "SUCCEEDED" {
			t.Fatalf("%s: %v\n%s", c, r, x.workerLogs())
		}
		// Each power cycle went to the cluster's own machine, once.
		for _, op := range []string{"power_off", "power_on"} {
			if n := fs.count(fs.ids[c+"/m2"], op); n != 1 {
				t.Errorf("%s/m2: %d %s requests, want 1", c, n, op)
			}
		}
		if n := fs.count(fs.ids[c+"/m1"], "power_off"); n != 0 {
			t.Errorf("%s/m1 was powered off", c)
		}
		// Every stage of each is audited once, naming its cluster where it called out.
		if n := api.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'rollingRebootStep' AND parameters->>'rollingReboot' = $1 AND outcome = 'SUCCEEDED'
			AND machine = 'm2' AND parameters->>'step' IN ('EVACUATE', 'POWER_OFF', 'CONFIRM_OFF', 'POWER_ON', 'WAIT_ONLINE', 'RESTORE')`, id); n != int64(6) {
			t.Errorf("%s: %v succeeded stages, want 6", c, n)
		}
		if n := api.Scalar(`SELECT count(DISTINCT details->>'cluster') FROM audit_events WHERE action = 'rollingRebootStep' AND parameters->>'rollingReboot' = $1
			AND details ? 'cluster' AND details->>'cluster' <> $2`, id, c); n != int64(0) {
			t.Errorf("%s: stages name another cluster", c)
		}
		if n := api.Scalar(`SELECT count(*) FROM member_operations o JOIN clusters c ON c.id = o.cluster_id WHERE c.name = $1 AND o.machine = 'm2' AND o.outcome = 'SUCCEEDED'`, c); n != int64(2) {
			t.Errorf("%s: %v evacuations and restores recorded in the cluster, want 2", c, n)
		}
		lab := labs[c]
		if out, _ := lab.CLI(lab.Members[0], "list", "-c", "nL", "-f", "csv"); strings.TrimSpace(out) != "c-"+c+",m2" {
			t.Errorf("%s: the instance is not back on m2: %s", c, out)
		}
	}
}

// twoLabs starts two labs of n members at the same time, both trusting one client
// identity (Apelora's).
func twoLabs(t *testing.T, n int) (*incuslab.Cluster, *incuslab.Cluster) {
	labs := startLabs(t, n, n)
	return labs[0], labs[1]
}

// startLabs starts one lab of each size at once, all trusting one client identity (the
// one Apelora presents to every cluster), each on its own loopback block.
func startLabs(t *testing.T, sizes ...int) []*incuslab.Cluster {
	t.Helper()
	id, err := incuslab.NewIdentity(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	incusd, cli := incuslab.Require(t)
	labs := make([]*incuslab.Cluster, len(sizes))
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i, n := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i], errs[i] = incuslab.Launch(incuslab.Options{Members: n, Incusd: incusd, CLI: cli, Identity: id})
		}()
	}
	wg.Wait()
	for i, lab := range labs {
		if lab != nil {
			t.Cleanup(func() {
				if err := lab.Close(); err != nil {
					t.Logf("incuslab: %v", err)
				}
			})
		}
		if errs[i] != nil {
			t.Fatalf("incuslab: %v", errs[i])
		}
		t.Logf("incuslab: %s", lab.Summary())
	}
	return labs
}

// startTwoClusterFenceSim is startFenceSim for several labs whose members share names:
// one machine per (cluster, member), ids and UUIDs keyed "cluster/member"; a power-off
// kills that lab's member, a power-on restarts it.
func startTwoClusterFenceSim(t *testing.T, labs map[string]*incuslab.Cluster) *twoClusterSim {
	t.Helper()
	f := &twoClusterSim{fenceSim: &fenceSim{clock: sim.NewFakeClock(time.Now()), apiKey: sim.NewAPIKey(), powerKey: sim.NewAPIKey(),
		ids: map[string]string{}, uuids: map[string]string{}}, by: map[string]func() (*incuslab.Cluster, *incuslab.Member){}}
	var specs []sim.MachineSpec
	n := 0
	for c, lab := range labs {
		for i, m := range lab.Members {
			key := c + "/" + m.Name
			id := fmt.Sprintf("fnc%s%d", strings.ReplaceAll(c, "-", ""), i+1)
			n++
			f.ids[key], f.uuids[key] = id, fmt.Sprintf("4c4c4544-0046-4e43-8045-%012x", n)
			f.by[id] = func() (*incuslab.Cluster, *incuslab.Member) { return lab, lab.Member(m.Name) }
			specs = append(specs, sim.MachineSpec{SystemID: id, Hostname: c + "-" + m.Name, Status: sim.StatusDeployed, PowerType: "ipmi",
				Owner: "fencer", HardwareUUID: f.uuids[key], CPUCount: 8, Memory: 32768, OSystem: "ubuntu", DistroSeries: "noble"})
		}
	}
	s, err := sim.New(sim.Options{
		Users:     []sim.User{{Username: "apelora", APIKey: f.apiKey, Admin: true}, {Username: "fencer", APIKey: f.powerKey}},
		Fixture:   sim.Fixture{Machines: specs},
		Clock:     f.clock,
		Durations: sim.Durations{PowerOff: 2 * time.Second},
		OnPowerOff: func(id string) {
			if lab, m := f.by[id](); m != nil && m.Running() {
				if err := lab.Kill(m); err != nil {
					t.Errorf("power-off hook: %v", err)
				}
			}
		},
		OnPowerOn: func(id string) {
			lab, m := f.by[id]()
			for i := 0; m.Running() && i < 100; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if err := lab.RestartMember(m); err != nil {
				t.Errorf("power-on hook: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.listen(t, s)
	f.runClock(t)
	return f
}

type twoClusterSim struct {
	*fenceSim
	by map[string]func() (*incuslab.Cluster, *incuslab.Member)
}

// count counts the requests with this op for the machine with system id.
func (f *twoClusterSim) count(systemID, op string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Path == "/MAAS/api/2.0/machines/"+systemID+"/" && r.Op == op {
			n++
		}
	}
	return n
}
