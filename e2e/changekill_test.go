package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/patronilab"
	"github.com/apelora/fabric/testkit/producttest"
)

// Issue 25.7: a step sent to Incus or MAAS is recorded before it is sent (its intent) and
// after (its outcome). These tests cut the process carrying two steps off from their
// outcome while both are in flight, a MAAS step held by the simulator (HoldOp) and an Incus
// step held by a SIGSTOPped incusd, and check that after recovery every upstream change
// has exactly one intent and one outcome in the trail, and that the outcome is what MAAS
// and Incus really did.

// killWorld is a three-member lab, the MAAS simulator and a database, with node-a (MAAS,
// Ready) registered through the API at base.
type killWorld struct {
	lab   *incuslab.Cluster
	maas  *producttest.MAASSim
	db    *pgtest.DB
	admin string
}

// gqlAt posts one GraphQL request and answers its errors' codes; a transport error (the
// server died) is an error, never a test failure: callers run it while they kill things.
func gqlAt(base, token, query string, vars map[string]any) (map[string]any, []string, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Data   map[string]any
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, nil, fmt.Errorf("not JSON (%d): %.200s", resp.StatusCode, raw)
	}
	var codes []string
	for _, e := range out.Errors {
		codes = append(codes, fmt.Sprint(e.Extensions["code"])+": "+e.Message)
	}
	return out.Data, codes, nil
}

func (w *killWorld) mustAt(t *testing.T, base, q string) {
	t.Helper()
	_, errs, err := gqlAt(base, w.admin, q, nil)
	if err != nil || len(errs) > 0 {
		t.Fatalf("%s: %v %v", q, err, errs)
	}
}

// inFlight sends the two steps from goroutines and returns once both intents are
// committed and the MAAS request is held by the simulator: the commission of node-a (held)
// and turning the placement guard on (its PATCH /1.0 waits for m3, which is frozen).
func (w *killWorld) inFlight(t *testing.T, base string) (releaseMAAS func()) {
	t.Helper()
	releaseMAAS = w.maas.HoldOp("commission")
	t.Cleanup(releaseMAAS)
	go func() {
		_, _, _ = gqlAt(base, w.admin, `mutation { commissionMachine(input: {systemId: "aaaa01", tests: []}) { maas { status } } }`, nil)
	}()
	waitUntil(t, "the commission held by MAAS", func() bool { return w.maas.Held("commission") == 1 })
	m3 := w.lab.Member("m3")
	if err := w.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.lab.Thaw(m3) })
	go func() {
		_, _, _ = gqlAt(base, w.admin, `mutation { setPlacementGuard(input: {enabled: true}) { placementGuard { state } } }`, nil)
	}()
	waitUntil(t, "both intents", func() bool { return w.count(t, `SELECT count(*) FROM change_steps WHERE outcome IS NULL`) == 2 })
	return releaseMAAS
}

func (w *killWorld) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.db.Store.Pool().QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return -1 // the database is not answering (yet)
	}
	return n
}

// upstreamNow is what MAAS and Incus show once everything settled: node-a's status and
// the placement guard's state.
func (w *killWorld) upstreamNow(t *testing.T) (maasStatus string, guard placement.State) {
	t.Helper()
	mc, err := maas.New(w.maas.Config)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mc.Machine(t.Context(), "aaaa01")
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := w.lab.Client(t, w.lab.Members[0]).PlacementScriptlet(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m.StatusName, placement.Judge(v).State
}

// books checks the trail after recovery: every step has exactly one intent and one
// outcome, and each outcome says what MAAS and Incus show (read once every outcome is
// recorded: long after the last call in flight reached them).
func (w *killWorld) books(t *testing.T) {
	t.Helper()
	waitUntil(t, "every step's outcome recorded", func() bool {
		return w.count(t, `SELECT count(*) FROM change_steps WHERE outcome IS NULL`) == 0
	})
	maasStatus, guard := w.upstreamNow(t)
	t.Logf("MAAS shows node-a %s, Incus's guard is %s", maasStatus, guard)
	rows, err := w.db.Store.Pool().Query(t.Context(), `SELECT c.action, c.outcome, c.intent_event,
			(SELECT count(*) FROM audit_events a WHERE a.id = c.intent_event AND a.outcome = 'STARTED'),
			(SELECT count(*) FROM audit_events a WHERE a.details->>'intent' = c.intent_event::text),
			(SELECT coalesce(string_agg(coalesce(a.details->>'found', '(recorded by its own process)'), ' '), '') FROM audit_events a WHERE a.details->>'intent' = c.intent_event::text),
			(SELECT count(*) FROM audit_events a WHERE a.action = c.action)
		FROM change_steps c ORDER BY c.intent_event`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]string{}
	for rows.Next() {
		var action, outcome, found string
		var intent, intents, outcomes, events int64
		if err := rows.Scan(&action, &outcome, &intent, &intents, &outcomes, &found, &events); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: intent %d, outcome %s: %s", action, intent, outcome, found)
		if intents != 1 || outcomes != 1 || events != 2 {
			t.Errorf("%s: %d intents, %d outcomes, %d events in all; want 1, 1 and 2", action, intents, outcomes, events)
		}
		if !strings.HasPrefix(found, changes.FoundAfterRestart) && found != "(recorded by its own process)" {
			t.Errorf("%s's outcome says %q", action, found)
		}
		seen[action] = outcome
	}
	if want := map[bool]string{true: "SUCCEEDED", false: "FAILED"}[maasStatus == "Commissioning"]; seen["commissionMachine"] != want {
		t.Errorf("commissionMachine recorded %s; MAAS shows node-a %s", seen["commissionMachine"], maasStatus)
	}
	if want := map[bool]string{true: "SUCCEEDED", false: "FAILED"}[guard == placement.On]; seen["setPlacementGuard"] != want {
		t.Errorf("setPlacementGuard recorded %s; Incus's guard is %s", seen["setPlacementGuard"], guard)
	}
	// MAAS acted on the commission at most once, and only with its intent in the trail.
	acted := 0
	for _, r := range w.maas.Requests() {
		if r.Method == http.MethodPost && r.Op == "commission" && r.Status == http.StatusOK {
			acted++
		}
	}
	if acted != map[bool]int{true: 1, false: 0}[maasStatus == "Commissioning"] {
		t.Errorf("MAAS acted on %d commissions; node-a is %s", acted, maasStatus)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStepsInFlightWhenTheAPIProcessIsKilledAreRecordedOnce: a real `apelora serve`
// process has both steps in flight; it is stopped (SIGSTOP) while MAAS acts on the held
// commission and the frozen member wakes, so each upstream change may happen with nobody
// left to record it, then killed (SIGKILL). A new `apelora serve` on the same database
// finds both steps, reads MAAS and Incus, and records each outcome once.
func TestStepsInFlightWhenTheAPIProcessIsKilledAreRecordedOnce(t *testing.T) {
	parallel(t, lasts(37))
	w := &killWorld{lab: incuslab.Start(t, 3), maas: producttest.StartMAAS(t, maasFleet()), db: pgtest.New(t)}
	w.admin = producttest.CreateIdentity(t, w.db.Store, "admin", identity.ManageInfrastructure)
	bin := buildCommand(t, "github.com/apelora/fabric/cmd/apelora")
	lc := w.lab.Config
	addr := freeAddr(t)
	env := []string{"APELORA_DATABASE_URL=" + w.db.URL, "APELORA_STATE_DIR=" + t.TempDir(), "APELORA_LOG_LEVEL=debug", "APELORA_LISTEN=" + addr,
		"APELORA_INCUS_URL=" + lc.URL, "APELORA_INCUS_CLIENT_CERT=" + lc.ClientCertFile, "APELORA_INCUS_CLIENT_KEY=" + lc.ClientKeyFile,
		"APELORA_INCUS_SERVER_CERT=" + lc.ServerCertFile,
		"APELORA_MAAS_URL=" + w.maas.Config.BaseURL, "APELORA_MAAS_API_KEY=" + w.maas.Key, "APELORA_MAAS_CA_FILE=" + w.maas.Config.CAFile,
		"APELORA_LEADER_LEASE=3s", "APELORA_REQUEST_TIMEOUT=30s"}
	base := "http://" + addr
	serve := func() *proc {
		p := startProc(t, bin, env, "serve")
		waitUntil(t, "apelora serve answering", func() bool {
			_, _, err := gqlAt(base, w.admin, `{ machines { name } }`, nil)
			return err == nil
		})
		return p
	}
	api := serve()
	w.mustAt(t, base, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`)

	releaseMAAS := w.inFlight(t, base)
	// The process stops with both calls in flight; meanwhile MAAS acts on the commission
	// and m3 wakes, so Incus can finish the PATCH: changes nobody is left to record.
	if err := api.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := incuslab.WaitStopped(api.cmd.Process.Pid, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	releaseMAAS()
	_ = w.lab.Thaw(w.lab.Member("m3"))
	mc, err := maas.New(w.maas.Config)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "MAAS commissioning node-a", func() bool {
		m, err := mc.Machine(t.Context(), "aaaa01")
		return err == nil && m.StatusName == "Commissioning"
	})
	api.stop(syscall.SIGKILL)
	if n := w.count(t, `SELECT count(*) FROM change_steps WHERE outcome IS NULL`); n != 2 {
		t.Fatalf("%d steps without an outcome after the kill, want 2\n%s", n, api.logs())
	}
	next := serve()
	w.books(t)
	if t.Failed() {
		t.Logf("restarted server's log:\n%s", next.logs())
	}
	// node-a is free again: a plan of it is no longer BUSY.
	data, errs, err := gqlAt(base, w.admin, `mutation { commissionMachine(input: {systemId: "aaaa01", dryRun: true}) { plan { refusals { code } } } }`, nil)
	if err != nil || len(errs) > 0 || strings.Contains(fmt.Sprint(data), "BUSY") {
		t.Fatalf("node-a after recovery: %v %v %v", data, errs, err)
	}
}

// TestStepsInFlightWhenThePrimaryIsKilledAreRecordedOnce: the product runs on PostgreSQL
// under Patroni; with both steps in flight the primary is killed, and MAAS and Incus then
// carry the steps out while no database takes their outcome. Once the standby is promoted,
// the server's reconciler (or the change itself, if its write reached the new primary)
// records each outcome once.
func TestStepsInFlightWhenThePrimaryIsKilledAreRecordedOnce(t *testing.T) {
	parallel(t, lasts(43), patroni)
	pl := patronilab.Start(t, "apelora")
	w := &killWorld{lab: incuslab.Start(t, 3), maas: producttest.StartMAAS(t, maasFleet()), db: patroniDatabase(t, pl)}
	e := producttest.StartOn(t, w.db, w.db.Store, producttest.WithIncus(w.lab.Config), producttest.WithMAAS(w.maas.Config),
		producttest.WithLeaderLease(3*time.Second), producttest.WithRequestTimeout(30*time.Second))
	w.admin = e.Identity("admin", identity.ManageInfrastructure)
	w.mustAt(t, e.Base, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`)

	releaseMAAS := w.inFlight(t, e.Base)
	old := pl.WaitPrimary(t, nil)
	if err := pl.Kill(old); err != nil {
		t.Fatal(err)
	}
	// The upstreams answer while the database is gone.
	releaseMAAS()
	_ = w.lab.Thaw(w.lab.Member("m3"))
	promoted := pl.WaitPrimary(t, old)
	t.Logf("%s killed, %s promoted", old.Name, promoted.Name)
	mc, err := maas.New(w.maas.Config)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "MAAS commissioning node-a", func() bool {
		m, err := mc.Machine(t.Context(), "aaaa01")
		return err == nil && m.StatusName == "Commissioning"
	})
	w.books(t)
}
