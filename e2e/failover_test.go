package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/patronilab"
	"github.com/apelora/fabric/testkit/producttest"
)

// TestFailoverDrill loses the PostgreSQL primary in the middle of a fence. The product runs
// on PostgreSQL under Patroni (testkit/patronilab: one etcd, two nodes, synchronous
// replication, ttl 10 s) through a libpq multi-host URL with target_session_attrs=read-write:
// two API replicas, two workers, a three-member Incus lab and the MAAS simulator. m3 hangs
// until it is offline past the limit; once MAAS has accepted its power-off, and while an
// administrator keeps creating identities through the API, the primary's Patroni and
// PostgreSQL are SIGKILLed. Then:
//
//   - the standby is promoted;
//   - the fence is confirmed exactly once, and MAAS was asked for one power_off;
//   - every mutation the API acknowledged is in the trail, and `apelora audit verify`
//     passes on the promoted primary;
//   - a fenceProgress subscription that lived through the failover, and one started with
//     `after` from before it, see every event once, in order; so does an
//     auditEventRecorded subscription on the replica that did not write the events;
//   - the time until the API answers writes again is measured and logged (no assertion).
//
// The last log line, "FAILOVER DRILL: …", is what scripts/ha-drill.sh collects.
func TestFailoverDrill(t *testing.T) {
	parallel(t, lasts(77), patroni)
	began := time.Now()
	pl := patronilab.Start(t, "apelora")
	db := patroniDatabase(t, pl)
	t.Logf("patroni lab ready in %s", time.Since(began).Round(time.Millisecond))
	state := t.TempDir() // one audit signing key for both replicas, as in production
	x := startFenceEnv(t, 3, db, fastFence("1m"), func(c *app.Config) { c.StateDir, c.AuditCheckpointInterval = state, time.Second })
	x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1"
	})
	x.startWorker("w2")
	x.gql(x.api, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	x.watch("0")
	t.Logf("lab, simulator, two API replicas and two workers up in %s", time.Since(began).Round(time.Millisecond))

	audit := collectAudit(t, x)
	w := startWriter(t, x)
	m3 := x.lab.Member("m3")
	if err := x.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	_, i := x.await("m3 OFFLINE", 0, fenceEventIs(client.FenceEventKindOffline, "m3"))
	req, i := x.await("m3 REQUESTED", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	x.waitFor("MAAS accepting the power-off", func() bool { return x.maas.requests("m3", "power_off") == 1 })

	// The fence is under way: the primary goes, with every connection to it.
	old := pl.WaitPrimary(t, nil)
	if err := pl.Kill(old); err != nil {
		t.Fatal(err)
	}
	// Measured from the moment nothing answers on the old primary any more: a write sent
	// while it was being killed could still be acknowledged by it (and must be kept).
	killed := time.Now()
	ackedBefore := w.acked()
	x.maas.clock.Advance(2 * time.Second) // the controller now reports off; the hook kills m3's incusd
	promoted := pl.WaitPrimary(t, old)
	promotion := time.Since(killed)
	t.Logf("%s killed; %s promoted after %s", old.Name, promoted.Name, promotion.Round(time.Millisecond))
	unavailable := w.firstAckAfter(t, killed, pl)
	t.Logf("the API answered a write again %s after the kill", unavailable.Round(time.Millisecond))
	_, _ = x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))
	time.Sleep(3 * time.Second) // writes and fence rounds on the new primary, before the books are closed
	acked := w.stop()

	// The books.
	powerOffs := x.maas.requests("m3", "power_off")
	var confirmed int
	if err := db.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM fence_events WHERE member = 'm3' AND kind = 'CONFIRMED'`).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, name := range acked {
		var inTable, inTrail bool
		err := db.Store.Pool().QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM identities WHERE name = $1),
			EXISTS (SELECT 1 FROM audit_events WHERE action = 'createIdentity' AND outcome = 'SUCCEEDED' AND parameters->'input'->>'name' = $1)`,
			name).Scan(&inTable, &inTrail)
		if err != nil {
			t.Fatal(err)
		}
		if !inTable || !inTrail {
			lost = append(lost, fmt.Sprintf("%s (identity %t, trail %t)", name, inTable, inTrail))
		}
	}
	t.Logf("FAILOVER DRILL: write_unavailable_ms=%d promotion_ms=%d power_offs=%d confirmed=%d acked_before_kill=%d acked=%d acked_lost=%d",
		unavailable.Milliseconds(), promotion.Milliseconds(), powerOffs, confirmed, len(ackedBefore), len(acked), len(lost))

	if powerOffs != 1 || confirmed != 1 {
		t.Errorf("m3: %d power_off requests and %d confirmations, want 1 and 1\n%s", powerOffs, confirmed, x.workerLogs())
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged mutations are not in the database after the failover: %s", len(lost), strings.Join(lost, ", "))
	}
	if len(ackedBefore) == 0 || len(acked) == len(ackedBefore) {
		t.Errorf("the writer had %d writes acknowledged before the kill and %d in all: the drill measured nothing", len(ackedBefore), len(acked))
	}

	// Subscriptions: the one that lived through the failover, and a new one from `after`
	// (the request, sent before the kill), both match the events in the database. (The
	// ids jump after the promotion: PostgreSQL logs sequences ahead, so the new primary's
	// next id is past the old one's. Resuming takes what is after, gaps and all.)
	eventIDs := func() []string {
		var ids []string
		rows, err := db.Store.Pool().Query(t.Context(), `SELECT id::text FROM fence_events ORDER BY fence_events.id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		return ids
	}
	pushedIDs := func() []string {
		var ids []string
		for _, e := range x.pushed() {
			ids = append(ids, e.Id)
		}
		return ids
	}
	for deadline := time.Now().Add(15 * time.Second); !slices.Equal(pushedIDs(), eventIDs()); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the fenceProgress subscription that lived through the failover pushed\n%v\nthe database has\n%v", pushedIDs(), eventIDs())
			break
		}
	}
	ids := eventIDs()
	after := slices.Index(ids, req.Id)
	resumed := subscribeFrom(t, x, req.Id, len(ids)-after-1)
	if ids = eventIDs(); !slices.Equal(resumed, ids[after+1:]) {
		t.Errorf("fenceProgress(after: %s) pushed %v, the database has %v after it", req.Id, resumed, ids[after+1:])
	}

	// The audit trail as pushed to a subscriber of the replica that did not write it (so
	// through LISTEN/NOTIFY, reconnected to the new primary): every event once, in order.
	var auditIDs []string
	rows, err := db.Store.Pool().Query(t.Context(), `SELECT id::text FROM audit_events ORDER BY audit_events.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		auditIDs = append(auditIDs, id)
	}
	rows.Close()
	for deadline := time.Now().Add(15 * time.Second); !slices.Equal(audit(), auditIDs); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			got := audit()
			t.Errorf("auditEventRecorded pushed %d events, the trail has %d; first difference at %d", len(got), len(auditIDs), firstDifference(got, auditIDs))
			break
		}
	}

	// The signed trail verifies on the promoted primary, with the replicas' public key.
	vkey := x.gql(x.api, `{ auditCheckpoint { verifierKey } }`, nil)["auditCheckpoint"].(map[string]any)["verifierKey"].(string)
	verify := exec.Command(buildCommand(t, "github.com/apelora/fabric/cmd/apelora"), "audit", "verify", "--verifier-key", vkey)
	verify.Env = append(withoutApeloraEnv(), "APELORA_DATABASE_URL="+db.URL, "APELORA_STATE_DIR="+t.TempDir())
	out, err := verify.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the audit log verifies") {
		t.Errorf("apelora audit verify after the failover: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
	// And on a replica's host, with the audit key and the replica's witness: every event's
	// seal, and every tree head the replicas appended, checked or signed across the
	// failover, is in the promoted primary's trail (no acknowledged event lost, no false
	// alarm from a commit that never was).
	verify = exec.Command(buildCommand(t, "github.com/apelora/fabric/cmd/apelora"), "audit", "verify")
	verify.Env = append(withoutApeloraEnv(), "APELORA_DATABASE_URL="+db.URL, "APELORA_STATE_DIR="+state, "APELORA_AUDIT_KEY_FILE="+x.auditKey)
	out, err = verify.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "every event's seal checked") || !strings.Contains(string(out), "tree heads witnessed outside the database") {
		t.Errorf("apelora audit verify with the key and the witness after the failover: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
	for _, r := range []*producttest.Env{x.api, x.bare} {
		if st := x.gql(r, `{ auditTrail { verifies problem } }`, nil)["auditTrail"].(map[string]any); st["verifies"] != true {
			t.Errorf("a replica says the audit trail does not verify after the failover: %v", st["problem"])
		}
	}
	t.Logf("failover drill done in %s", time.Since(began).Round(time.Millisecond))
}

// patroniDatabase opens and migrates the lab's database through its multi-host URL.
func patroniDatabase(t *testing.T, pl *patronilab.Cluster) *pgtest.DB {
	t.Helper()
	store, err := postgres.Open(context.Background(), pl.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &pgtest.DB{Name: "apelora", URL: pl.URL, Store: store}
}

func withoutApeloraEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APELORA_") {
			env = append(env, kv)
		}
	}
	return env
}

// writer is an administrator creating identities through the replica without MAAS, one
// after another, as fast as the API acknowledges them.
type writer struct {
	mu    sync.Mutex
	acks  []string
	sent  []time.Time // when each acknowledged write was sent
	times []time.Time // and answered
	fails int
	quit  chan struct{}
	done  chan struct{}
}

func startWriter(t *testing.T, x *fenceEnv) *writer {
	w := &writer{quit: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 10 * time.Second}
	go func() {
		defer close(w.done)
		for n := 1; ; n++ {
			select {
			case <-w.quit:
				return
			default:
			}
			name := fmt.Sprintf("drill-%d", n)
			body, _ := json.Marshal(map[string]any{"query": `mutation($n: String!) { createIdentity(input: {name: $n, permissions: [VIEW_INFRASTRUCTURE]}) { token } }`,
				"variables": map[string]any{"n": name}})
			req, _ := http.NewRequest(http.MethodPost, x.bare.Base+"/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+x.admin)
			ok, sent := false, time.Now()
			if resp, err := hc.Do(req); err == nil {
				var r producttest.Response
				ok = json.NewDecoder(resp.Body).Decode(&r) == nil && len(r.Errors) == 0 && r.Data["createIdentity"] != nil
				resp.Body.Close()
			}
			w.mu.Lock()
			if ok {
				w.acks, w.sent, w.times = append(w.acks, name), append(w.sent, sent), append(w.times, time.Now())
			} else {
				w.fails++
			}
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *writer) acked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

// firstAckAfter waits for the first acknowledged write sent after at and returns how long
// after at it was answered (a write sent before at and answered after it says nothing of
// the database that came after).
func (w *writer) firstAckAfter(t *testing.T, at time.Time, pl *patronilab.Cluster) time.Duration {
	t.Helper()
	deadline := time.Now().Add(fenceWaitLimit)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		for i, ts := range w.sent {
			if ts.After(at) {
				w.mu.Unlock()
				return w.times[i].Sub(at)
			}
		}
		w.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the API answered no write within %s of the primary's loss\n%s", fenceWaitLimit, pl.Logs())
	return 0
}

// stop ends the writer and returns every acknowledged name.
func (w *writer) stop() []string {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
	return w.acked()
}

// subscribeFrom subscribes to fenceProgress with after and returns the ids of the first n
// events pushed (fewer if they do not come within a few seconds of each other).
func subscribeFrom(t *testing.T, x *fenceEnv, after string, n int) []string {
	t.Helper()
	ws, err := client.NewWebSocket(x.api.Base+"/graphql", x.admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	defer ws.Close()
	if _, err := ws.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ch, _, err := client.FenceProgress(ctx, ws, nil, &after)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for len(ids) < n {
		select {
		case r, ok := <-ch:
			if !ok {
				return ids
			}
			if r.Errors != nil {
				t.Fatalf("fenceProgress(after: %s): %v", after, r.Errors)
			}
			ids = append(ids, r.Data.FenceProgress.Id)
		case <-time.After(10 * time.Second):
			return ids
		}
	}
	// Nothing more than asked for: a repeat would come right behind.
	select {
	case r, ok := <-ch:
		if ok && r.Errors == nil {
			ids = append(ids, r.Data.FenceProgress.Id)
		}
	case <-time.After(2 * time.Second):
	}
	return ids
}

// collectAudit subscribes to auditEventRecorded on the replica with MAAS, from the first
// event, drains it as it comes, and returns what was pushed so far.
func collectAudit(t *testing.T, x *fenceEnv) func() []string {
	from := "0"
	w := watchAudit(t, x.api.Base, x.admin, nil, &from)
	var mu sync.Mutex
	var ids []string
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var r client.AuditEventRecordedWsResponse
			var ok bool
			select {
			case <-stop:
				return
			case r, ok = <-w.events:
			}
			if !ok {
				return
			}
			if r.Errors != nil {
				t.Errorf("auditEventRecorded: %v", r.Errors)
				continue
			}
			mu.Lock()
			ids = append(ids, r.Data.AuditEventRecorded.Id)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-done; w.close() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ids)
	}
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
