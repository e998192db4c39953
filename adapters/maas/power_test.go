package maas_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestPowerOffWithController(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("ipmi01", sim.StatusDeployed, "ipmi"), "apelora")))
	if st, err := e.client.QueryPowerState(ctx, "ipmi01"); err != nil || st != maas.PowerOn {
		t.Fatalf("before: %v %v", st, err)
	}
	sent, err := e.client.PowerOff(ctx, "ipmi01", maas.StopSoft)
	if err != nil || !sent {
		t.Fatalf("power off: sent=%v err=%v", sent, err)
	}
	if r := e.lastRequest("power_off"); r.Method != http.MethodPost || r.Form.Get("stop_mode") != "soft" {
		t.Fatalf("power_off request %+v", r)
	}
	// Accepted is not off: the controller has not acted yet.
	if st, _ := e.client.QueryPowerState(ctx, "ipmi01"); st != maas.PowerOn || len(e.powerOffs) != 0 {
		t.Fatalf("right after power_off: %v, hook calls %v", st, e.powerOffs)
	}
	e.clock.Advance(testDurations.PowerOff)
	if !slices.Equal(e.powerOffs, []string{"ipmi01"}) {
		t.Fatalf("hook calls %v", e.powerOffs)
	}
	if st, err := e.client.QueryPowerState(ctx, "ipmi01"); err != nil || st != maas.PowerOff {
		t.Fatalf("after the delay: %v %v", st, err)
	}
	if r := e.lastRequest("query_power_state"); r.Method != http.MethodGet {
		t.Fatalf("query_power_state sent as %s", r.Method)
	}
	// A second power-off of a machine already off fires no hook.
	if _, err := e.client.PowerOff(ctx, "ipmi01", ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(testDurations.PowerOff)
	if len(e.powerOffs) != 1 {
		t.Fatalf("hook calls %v", e.powerOffs)
	}
	if r := e.lastRequest("power_off"); r.Form.Get("stop_mode") != "hard" {
		t.Fatalf("default stop mode sent as %q", r.Form.Get("stop_mode"))
	}
}

func TestManualPowerCannotBeQueriedOrStopped(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("man001", sim.StatusDeployed, "manual"), "apelora")))
	_, err := e.client.QueryPowerState(ctx, "man001")
	if !errors.Is(err, maas.ErrPowerNotQueryable) || !errors.Is(err, maas.ErrBadRequest) {
		t.Fatalf("manual power query: %v", err)
	}
	apiError(t, err, http.StatusBadRequest)
	if n := e.sim.CountRequests(http.MethodGet, "query_power_state"); n != 1 {
		t.Fatalf("a 400 was retried: %d requests", n)
	}
	sent, err := e.client.PowerOff(ctx, "man001", maas.StopHard)
	if err != nil || !sent {
		t.Fatalf("MAAS accepts power_off for manual machines: sent=%v err=%v", sent, err)
	}
	e.clock.Advance(testDurations.PowerOff * 10)
	m, _ := e.client.Machine(ctx, "man001")
	if m.PowerState != maas.PowerUnknown || m.Status != maas.StatusDeployed || len(e.powerOffs) != 0 {
		t.Fatalf("manual power-off changed something: %s %v hooks %v", m.PowerState, m.Status, e.powerOffs)
	}
}

func TestPowerOffAcceptedButNeverEffective(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("stuck1", sim.StatusDeployed, "ipmi"), "apelora")))
	if err := e.sim.Edit("stuck1", func(m *sim.MachineEdit) { m.SetPowerOffIneffective(true) }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if sent, err := e.client.PowerOff(ctx, "stuck1", maas.StopHard); err != nil || !sent {
			t.Fatalf("power off %d: %v %v", i, sent, err)
		}
		e.clock.Advance(testDurations.PowerOff * 2)
	}
	if st, err := e.client.QueryPowerState(ctx, "stuck1"); err != nil || st != maas.PowerOn {
		t.Fatalf("power state %v %v, want still on", st, err)
	}
	if len(e.powerOffs) != 0 || e.snapshot("stuck1").PowerOffRequests != 3 {
		t.Fatalf("hooks %v, requests %d", e.powerOffs, e.snapshot("stuck1").PowerOffRequests)
	}
}

func TestPowerOffWithoutPowerTypeIsNotSent(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("nopwr1", sim.StatusDeployed, ""), "apelora")))
	sent, err := e.client.PowerOff(ctx, "nopwr1", maas.StopHard)
	if err != nil || sent {
		t.Fatalf("MAAS answers null when it cannot stop: sent=%v err=%v", sent, err)
	}
}

func TestPowerStateErrorIsReported(t *testing.T) {
	e := newEnv(t, withMachines(owned(spec("bmc001", sim.StatusDeployed, "redfish"), "apelora")))
	if err := e.sim.Edit("bmc001", func(m *sim.MachineEdit) { m.SetPowerState("error") }); err != nil {
		t.Fatal(err)
	}
	if st, err := e.client.QueryPowerState(ctx, "bmc001"); err != nil || st != maas.PowerError {
		t.Fatalf("%v %v", st, err)
	}
	if len(e.powerOffs) != 0 {
		t.Fatalf("on→error fired the power-off hook: %v", e.powerOffs)
	}
}

func TestPowerForbiddenForOthersMachines(t *testing.T) {
	key := sim.NewAPIKey()
	e := newEnv(t,
		withUsers(sim.User{Username: "fencer", APIKey: key}, sim.User{Username: "admin", APIKey: sim.NewAPIKey(), Admin: true}),
		withMachines(owned(spec("mine01", sim.StatusDeployed, "ipmi"), "fencer"), owned(spec("othr01", sim.StatusDeployed, "ipmi"), "admin")),
		withConfig(func(c *maas.Config) { c.APIKey = "" }))
	c, err := e.clientWith(t, func(c *maas.Config) { c.APIKey = key })
	if err != nil {
		t.Fatal(err)
	}
	if sent, err := c.PowerOff(ctx, "mine01", maas.StopHard); err != nil || !sent {
		t.Fatalf("owner power off: %v %v", sent, err)
	}
	_, err = c.PowerOff(ctx, "othr01", maas.StopHard)
	if !errors.Is(err, maas.ErrForbidden) {
		t.Fatalf("power off someone else's machine: %v", err)
	}
	_, err = c.Commission(ctx, "mine01", maas.CommissionOptions{})
	if !errors.Is(err, maas.ErrForbidden) {
		t.Fatalf("non-admin commission: %v", err)
	}
	ms, err := c.Machines(ctx, maas.MachineFilter{})
	if err != nil || len(ms) != 1 || ms[0].SystemID != "mine01" {
		t.Fatalf("non-admin sees %v (%v)", ms, err)
	}
}
