package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
)

// TestFencingWhenThePowerReadFailsOrTheWorkerDiesBeforeSending runs, on a real
// three-member cluster with two workers, the two fence paths that only unit tests checked:
//
//   - m3's machine becomes manual-power in MAAS in the middle of its fence (after MAAS
//     accepted the power-off): the power read answers 400, so the fence is reported
//     NOT_CONFIRMED/POWER_NOT_QUERYABLE, m3 is not counted as fenced, and nothing more is
//     sent inside the cooldown;
//   - the leading worker records its next request and dies before MAAS receives the
//     power-off (the simulator holds it, never acting on it): the standby takes over,
//     reads the power still on and reports NOT_CONFIRMED/POWER_NOT_OFF for that request,
//     sends nothing inside the cooldown, and after it fences m3 with a request of its own.
func TestFencingWhenThePowerReadFailsOrTheWorkerDiesBeforeSending(t *testing.T) {
	parallel(t, lasts(90))
	const cooldown = 20 * time.Second
	x := startFenceEnv(t, 3, nil, fastFence(cooldown.String()))
	x.startWorker("w1")
	x.waitFor("w1 leading", func() bool {
		ws := x.gql(x.api, `{ cluster { fenceWorker { worker } } }`, nil)["cluster"].(map[string]any)["fenceWorker"]
		return ws != nil && ws.(map[string]any)["worker"] == "w1"
	})
	x.startWorker("w2")
	x.gql(x.api, setMapping, mappingVars("m3", x.maas.ids["m3"], x.maas.uuids["m3"]))
	x.watch("0")
	answered := func() int { // power_offs MAAS received and answered
		n := 0
		for _, r := range x.maas.Requests() {
			if r.Path == "/MAAS/api/2.0/machines/"+x.maas.ids["m3"]+"/" && r.Op == "power_off" && r.Status == 200 {
				n++
			}
		}
		return n
	}

	// (a) The power read answers 400 in the middle of the fence.
	if err := x.lab.Freeze(x.lab.Member("m3")); err != nil {
		t.Fatal(err)
	}
	req1, i := x.await("m3 REQUESTED", 0, fenceEventIs(client.FenceEventKindRequested, "m3"))
	x.waitFor("MAAS accepting the power-off", func() bool { return answered() == 1 })
	if err := x.maas.Edit(x.maas.ids["m3"], func(m *sim.MachineEdit) { m.SetPowerType("manual") }); err != nil {
		t.Fatal(err)
	}
	nc, i := x.await("m3 NOT_CONFIRMED: power not queryable", i, fenceEventIs(client.FenceEventKindNotConfirmed, "m3", client.FenceReasonPowerNotQueryable))
	if fmt.Sprint(nc.Details["requestEventId"]) != req1.Id {
		t.Fatalf("not confirmed %+v, for request %s", nc, req1.Id)
	}
	if f, _ := x.machineFence("m3"); f["lastEvent"].(map[string]any)["kind"] == "CONFIRMED" {
		t.Fatalf("m3 counted as fenced without a power read: %v", f)
	}
	_, i = x.await("m3 refused: cooldown", i, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonCooldown))
	if n := x.maas.requests("m3", "power_off"); n != 1 {
		t.Fatalf("%d power-offs inside the cooldown after an unreadable power state, want 1", n)
	}

	// (b) The power type is fixed; MAAS will not receive the next power-off. When the
	// cooldown is over w1 records its request, and dies while the command is on its way.
	if err := x.maas.Edit(x.maas.ids["m3"], func(m *sim.MachineEdit) { m.SetPowerType("ipmi"); m.SetPowerState("on") }); err != nil {
		t.Fatal(err)
	}
	x.maas.SetOpFault("power_off", sim.FaultHang)
	req2, i := x.await("m3 REQUESTED again", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	if req2.Worker != "w1" {
		t.Fatalf("second request %s", describeEvent(req2))
	}
	x.waitFor("w1's power-off on its way", func() bool { return x.maas.requests("m3", "power_off") == 2 })
	x.workers["w1"].kill(syscall.SIGKILL)
	x.maas.SetOpFault("power_off", sim.FaultNone)
	_, i = x.await("w2 LEADING", i, func(e client.FenceEventFields) bool {
		return e.Kind == client.FenceEventKindLeading && e.Worker == "w2"
	})
	nc, i = x.await("m3 NOT_CONFIRMED: power still on", i, fenceEventIs(client.FenceEventKindNotConfirmed, "m3", client.FenceReasonPowerNotOff))
	if nc.Worker != "w2" || fmt.Sprint(nc.Details["requestEventId"]) != req2.Id || nc.Details["powerState"] != "on" {
		t.Fatalf("the standby's verdict on the request w1 never sent: %+v", nc)
	}
	_, i = x.await("m3 refused by w2: cooldown", i, fenceEventIs(client.FenceEventKindRefused, "m3", client.FenceReasonCooldown))
	if n := answered(); n != 1 {
		t.Fatalf("MAAS answered %d power-offs, want 1 (none sent again inside the cooldown)", n)
	}

	// After the cooldown w2 asks for itself, and the fence is confirmed.
	req3, i := x.await("m3 REQUESTED by w2", i, fenceEventIs(client.FenceEventKindRequested, "m3"))
	if req3.Worker != "w2" || req3.At.Sub(req2.At) < cooldown {
		t.Fatalf("third request %s at %s, %s after the second", describeEvent(req3), req3.At, req3.At.Sub(req2.At))
	}
	x.waitFor("MAAS accepting w2's power-off", func() bool { return answered() == 2 })
	x.maas.clock.Advance(2 * time.Second)
	conf, _ := x.await("m3 CONFIRMED", i, fenceEventIs(client.FenceEventKindConfirmed, "m3"))
	if conf.Worker != "w2" || fmt.Sprint(conf.Details["requestEventId"]) != req3.Id {
		t.Fatalf("confirmation %+v", conf)
	}
	if n := x.count(fenceEventIs(client.FenceEventKindConfirmed, "m3")); n != 1 {
		t.Fatalf("%d confirmations of m3", n)
	}
	if !x.lab.Member("m1").Running() || !x.lab.Member("m2").Running() {
		t.Fatal("a live member was touched")
	}
}
