package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/testkit/incuslab"
)

// TestAPausedLeaderSendsNothingAfterItsLeaseLapsed is issue 20 item 3's pause drill with
// real processes: on a three-member cluster with two apelora-worker processes and a short
// lease, m3 stays offline past the limit; the leading worker w1 records its request and
// sends the power-off, which the simulator holds in flight (received, not acted on), and
// w1 is SIGSTOPped right then. Its lease lapses; w2 takes over with a higher epoch and
// confirms w1's request instead of sending another. MAAS then acts on the held command,
// and w1 is SIGCONTed. Then:
//
//   - MAAS got one power_off for m3 in all: none from w2, none from w1 after it resumed,
//     none inside the cooldown;
//   - the fence is confirmed exactly once, by w2, for w1's request;
//   - w1 writes nothing once w2 leads (no fence event of it after w2's LEADING), says in
//     its log that its epoch's lease was lost, and stands by.
func TestAPausedLeaderSendsNothingAfterItsLeaseLapsed(t *testing.T) {
	parallel(t, lasts(62))
	limits := fastFence("10m")
	// The confirmation outlives the pause and the take-over: the request is confirmed by
	// reading the power state, not given up on while w1 is stopped.
	limits["APELORA_FENCE_CONFIRM_TIMEOUT"] = "2m"
	limits["APELORA_LEADER_LEASE"] = "3s"
	x := startFenceEnv(t, 3, nil, limits)
	w1 := x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1"
	})
	x.startWorker("w2")
	x.gql(x.api, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	x.watch("0")
	epochOf := func(worker string) int64 { // the epoch of the worker's last LEADING event
		var e int64
		if err := x.db.Store.Pool().QueryRow(t.Context(), `SELECT coalesce(max((details->>'epoch')::bigint), 0) FROM fence_events
			WHERE kind = 'LEADING' AND worker = $1`, worker).Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}

	release := x.maas.HoldOp("power_off")
	t.Cleanup(release)
	if err := x.lab.Freeze(x.lab.Member("m3")); err != nil {
		t.Fatal(err)
	}
	req, i := x.await("m3 REQUESTED", 0, fenceEventIs(client.FenceEventKindRequested, "m3"))
	if req.Worker != "w1" {
		t.Fatalf("request %s, want w1's", describeEvent(req))
	}
	x.waitFor("w1's power-off in flight", func() bool { return x.maas.Held("power_off") == 1 })
	if err := w1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := incuslab.WaitStopped(w1.cmd.Process.Pid, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = w1.cmd.Process.Signal(syscall.SIGCONT) })
	e1 := epochOf("w1")

	lead, i := x.await("w2 LEADING", i, func(e client.FenceEventFields) bool {
		return e.Kind == client.FenceEventKindLeading && e.Worker == "w2"
	})
	t.Logf("w2 leads %s after w1 was stopped", time.Since(stopped).Round(time.Millisecond))
	if e2 := epochOf("w2"); e2 <= e1 {
		t.Fatalf("w2 leads with epoch %d, w1 led with %d: want a higher one", e2, e1)
	}
	var holder string
	var epoch int64
	if err := x.db.Store.Pool().QueryRow(t.Context(), `SELECT holder, epoch FROM leader_leases WHERE role = 'fence'`).Scan(&holder, &epoch); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(holder, "w2") || epoch <= e1 {
		t.Fatalf("the fence lease is %s's, epoch %d; want w2's, past w1's %d", holder, epoch, e1)
	}

	// MAAS acts on the command w1 sent before it was stopped; the power goes off.
	release()
	x.waitFor("MAAS acting on the held power-off", func() bool { return x.maas.requests("m3", "power_off") == 1 })
	x.maas.clock.Advance(2 * time.Second)
	conf, _ := x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))
	if conf.Worker != "w2" || fmt.Sprint(conf.Details["requestEventId"]) != req.Id {
		t.Fatalf("confirmation %s for request %v, want w2's for w1's request %s", describeEvent(conf), conf.Details["requestEventId"], req.Id)
	}

	// w1 resumes, past its lease.
	if err := w1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lostLine := fmt.Sprintf("fence lease, epoch %d", e1)
	x.waitFor("w1 saying its lease was lost", func() bool {
		data, _ := os.ReadFile(w1.log)
		return strings.Contains(string(data), lostLine)
	})
	// Then it stands by behind w2's lease rather than leading again.
	x.waitFor("w1 standing by", func() bool {
		data, _ := os.ReadFile(w1.log)
		s := string(data)
		i := strings.Index(s, lostLine)
		return i >= 0 && strings.Contains(s[i:], "another apelora-worker holds the fence lease: standing by")
	})
	time.Sleep(5 * time.Second) // several rounds of both workers (poll 1 s), inside the cooldown

	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Errorf("MAAS got %d power_off requests for m3, want 1 (w1's, sent before it was stopped)\n%s", n, x.workerLogs())
	}
	var confirmed, afterTakeover int
	if err := x.db.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE member = 'm3' AND kind = 'CONFIRMED'),
		count(*) FILTER (WHERE worker = 'w1' AND id > $1::bigint) FROM fence_events`, lead.Id).Scan(&confirmed, &afterTakeover); err != nil {
		t.Fatal(err)
	}
	if confirmed != 1 {
		t.Errorf("m3 confirmed %d times, want once", confirmed)
	}
	if afterTakeover != 0 {
		t.Errorf("%d fence events written by w1 after w2 took over (epoch %d), want none", afterTakeover, epoch)
	}
	if n := x.count(fenceEventIs(client.FenceEventKindRequested, "m3")); n != 1 {
		t.Errorf("%d requests for m3 pushed, want 1", n)
	}
	if !x.lab.Member("m1").Running() || !x.lab.Member("m2").Running() {
		t.Error("a live member was touched")
	}
	data, _ := os.ReadFile(w1.log)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, lostLine) {
			t.Logf("w1: %s", l)
		}
	}
}
