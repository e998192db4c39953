package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/client"
)

// TestFencingWhenIncusCannotBeTrusted runs a worker on a real three-member cluster through
// the two ways Incus's view misleads it:
//
//   - Incus loses its quorum (two of three voters hang) and regains it: for a few seconds
//     it lists every member Offline, live ones included. No OFFLINE may be recorded for
//     them: Offline counts only once Incus has answered for the settle period.
//   - A fenced (confirmed off) member goes through an Incus outage longer than the
//     observation gap and the cooldown: its outage clock restarts, but it stays fenced, and
//     no second power-off is sent.
//
// First of all, a worker whose offline time Incus's own offline threshold could outlast
// does not start.
func TestFencingWhenIncusCannotBeTrusted(t *testing.T) {
	parallel(t, lasts(189))
	limits := fastFence("5s")
	limits["APELORA_FENCE_SETTLE"] = "15s"
	limits["APELORA_REQUEST_TIMEOUT"] = "3s" // a hung Incus fails a round quickly
	x := startFenceEnv(t, 3, nil, limits)
	m1, m2, m3 := x.lab.Member("m1"), x.lab.Member("m2"), x.lab.Member("m3")

	// (a) Below cluster.offline_threshold (20 s) plus 5 s: refused at start, saying why.
	short := x.startWorker("short", "APELORA_FENCE_OFFLINE_AFTER=24s")
	select {
	case <-short.done:
	case <-time.After(fenceWaitLimit):
		t.Fatal("a worker with an offline time below Incus's threshold kept running")
	}
	if log, _ := os.ReadFile(short.log); !strings.Contains(string(log), "cluster.offline_threshold (20s) plus 5s, so 25s") {
		t.Fatalf("the refused worker said:\n%s", log)
	}
	delete(x.workers, "short")
	cl := x.gql(x.api, `{ cluster { offlineThreshold minimumOfflineAfter } }`, nil)["cluster"].(map[string]any)
	if cl["offlineThreshold"] != float64(20) || cl["minimumOfflineAfter"] != float64(25) {
		t.Fatalf("cluster view %v", cl)
	}

	x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker settleSeconds } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1" && ws.(map[string]any)["settleSeconds"] == float64(15)
	})
	x.gql(x.api, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	x.watch("0")

	// (b) Quorum lost: m2 and m3 hang together, long enough for the worker to fail reads,
	// not long enough for Incus to call them Offline first.
	for _, m := range []string{"m2", "m3"} {
		if err := x.lab.Freeze(x.lab.Member(m)); err != nil {
			t.Fatal(err)
		}
	}
	x.waitFor("the worker failing to read Incus", func() bool {
		return strings.Contains(x.workerLogs(), "cannot read the Incus members")
	})
	// Quorum loss is a state: one QUORUM_LOST event (m1 answers GET /1.0, the member list
	// it cannot), and the cluster view says since when, and that fencing is paused.
	lostEv, _ := x.await("QUORUM_LOST", 0, fenceEventIs(client.FenceEventKindQuorumLost, ""))
	if lostEv.Member != nil || !strings.HasPrefix(lostEv.Message, "Incus has no quorum since ") || !strings.HasSuffix(lostEv.Message, ": fencing paused") {
		t.Fatalf("QUORUM_LOST: %+v", lostEv)
	}
	noQuorumWarning := func() string {
		for _, w := range x.gql(x.api, `{ cluster { warnings { code message } } }`, nil)["cluster"].(map[string]any)["warnings"].([]any) {
			if w.(map[string]any)["code"] == "INCUS_NO_QUORUM" {
				return w.(map[string]any)["message"].(string)
			}
		}
		return ""
	}
	x.waitFor("the cluster view saying Incus has no quorum", func() bool { return noQuorumWarning() != "" })
	if w := noQuorumWarning(); !strings.HasPrefix(w, lostEv.Message) {
		t.Fatalf("cluster view: %q, want it to start with %q", w, lostEv.Message)
	}
	time.Sleep(5 * time.Second)
	if n := x.count(fenceEventIs(client.FenceEventKindQuorumLost, "")); n != 1 {
		t.Fatalf("%d QUORUM_LOST events, want 1", n)
	}
	for _, m := range []string{"m2", "m3"} {
		if err := x.lab.Thaw(x.lab.Member(m)); err != nil {
			t.Fatal(err)
		}
	}
	x.waitFor("Incus answering again", func() bool { return strings.Contains(x.workerLogs(), "Incus answers again") })
	x.await("QUORUM_BACK", 0, fenceEventIs(client.FenceEventKindQuorumBack, ""))
	x.waitFor("the cluster view without the quorum warning", func() bool { return noQuorumWarning() == "" })
	// Past the settle period and the few seconds Incus lists everyone Offline.
	thawed, inc := time.Now(), x.lab.Client(t, m1)
	x.waitFor("members listed Online again and the settle period over", func() bool {
		ms, err := inc.Members(t.Context())
		if err != nil || time.Since(thawed) < 25*time.Second {
			return false
		}
		for _, m := range ms {
			if m.Status != "Online" {
				return false
			}
		}
		return true
	})
	if n := x.count(fenceEventIs(client.FenceEventKindOffline, "")); n != 0 {
		t.Fatalf("%d OFFLINE events for live members after Incus regained its quorum:\n%s", n, x.workerLogs())
	}

	// (c) m3 dies and is fenced.
	if err := x.lab.Freeze(m3); err != nil {
		t.Fatal(err)
	}
	_, i := x.await("m3 OFFLINE", 0, fenceEventIs(client.FenceEventKindOffline, "m3"))
	el, i := x.await("m3 ELIGIBLE", i, fenceEventIs(client.FenceEventKindEligible, "m3"))
	if q, _ := el.Details["quorum"].(map[string]any); q == nil || q["voters"] != float64(3) || q["votersOnlineAfter"] != float64(2) {
		t.Fatalf("ELIGIBLE without the quorum projection: %v", el.Details)
	}
	_, i = x.await("m3 REQUESTED", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	x.waitFor("MAAS accepting the power-off", func() bool { return x.maas.requests("m3", "power_off") == 1 })
	x.maas.clock.Advance(2 * time.Second) // the controller reports off; the hook kills m3's incusd
	_, i = x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))

	// Incus unreadable (m2 hangs too: no quorum) for longer than the observation gap (30 s)
	// and the cooldown (5 s).
	if err := x.lab.Freeze(m2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Second)
	if err := x.lab.Thaw(m2); err != nil {
		t.Fatal(err)
	}
	// m3's outage clock restarts at the first read that counts; once it has run the
	// offline time again, m3 is still fenced: nothing is asked of MAAS.
	_, i = x.await("m3's outage clock starting again", i, fenceEventIs(client.FenceEventKindOffline, "m3"))
	restarted := time.Now()
	x.waitFor("the offline time after the restart, and more", func() bool { return time.Since(restarted) > 35*time.Second })
	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Fatalf("%d power-offs of m3, want 1 (it was confirmed off and never came back)", n)
	}
	if n := x.count(fenceEventIs(client.FenceEventKindRequested, "m3")) + x.count(fenceEventIs(client.FenceEventKindEligible, "m3")); n != 2 {
		t.Fatalf("m3 was found eligible or requested again after its confirmed fence:\n%s", x.workerLogs())
	}
	for _, e := range x.pushed()[i:] {
		if e.Member != nil && *e.Member != "m3" && e.Kind == client.FenceEventKindOffline {
			t.Fatalf("live member recorded OFFLINE after the outage: %+v", e)
		}
	}
	if !m1.Running() || !m2.Running() {
		t.Fatal("a live member was touched")
	}
}
