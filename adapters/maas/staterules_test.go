package maas_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

// Every (operation, status) pair of the reference's §3 table, through the
// client, against the simulator.

const allStatuses = 23

// ownedIn: statuses in which a machine normally has an owner.
var ownedIn = []int{sim.StatusReserved, sim.StatusDeployed, sim.StatusDeploying, sim.StatusAllocated,
	sim.StatusFailedDeployment, sim.StatusReleasing, sim.StatusFailedReleasing, sim.StatusDiskErasing,
	sim.StatusFailedDiskErasing, sim.StatusRescueMode, sim.StatusEnteringRescueMode,
	sim.StatusFailedEnteringRescueMode, sim.StatusExitingRescueMode, sim.StatusFailedExitingRescueMode}

func tableEnv(t *testing.T, prefix string) (*env, func(int) string) {
	var specs []sim.MachineSpec
	id := func(st int) string { return fmt.Sprintf("%s%02d", prefix, st) }
	for st := 0; st < allStatuses; st++ {
		sp := spec(id(st), st, "ipmi")
		c := true
		sp.Commissioned = &c // New here has been commissioned before
		if slices.Contains(ownedIn, st) {
			sp.Owner = "apelora"
		}
		specs = append(specs, sp)
	}
	return newEnv(t, withMachines(specs...)), id
}

func TestCommissionStateRules(t *testing.T) {
	e, id := tableEnv(t, "cm")
	allowed := []int{sim.StatusNew, sim.StatusFailedCommissioning, sim.StatusReady, sim.StatusBroken}
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Commission(ctx, id(st), maas.CommissionOptions{})
		if slices.Contains(allowed, st) {
			if err != nil || m.Status != maas.StatusCommissioning {
				t.Errorf("commission from %s: %v, status %v", sim.StatusLabel(st), err, m.Status)
			}
			continue
		}
		if err == nil {
			t.Errorf("commission from %s accepted", sim.StatusLabel(st))
			continue
		}
		wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest,
			"Commission is not available because of the current state of the node.")
		if f := apiError(t, err, 400).Fields["__all__"]; len(f) != 1 {
			t.Errorf("form errors %v, want one __all__ entry", f)
		}
	}
}

func TestTestStateRules(t *testing.T) {
	e, id := tableEnv(t, "ts")
	allowed := []int{sim.StatusNew, sim.StatusReady, sim.StatusReserved, sim.StatusAllocated, sim.StatusDeployed,
		sim.StatusMissing, sim.StatusRetired, sim.StatusBroken, sim.StatusRescueMode,
		sim.StatusFailedCommissioning, sim.StatusFailedDeployment, sim.StatusFailedReleasing,
		sim.StatusFailedDiskErasing, sim.StatusFailedEnteringRescueMode, sim.StatusFailedExitingRescueMode,
		sim.StatusFailedTesting}
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Test(ctx, id(st), maas.TestOptions{})
		if slices.Contains(allowed, st) {
			if err != nil || m.Status != maas.StatusTesting {
				t.Errorf("test from %s: %v, status %v", sim.StatusLabel(st), err, m.Status)
			}
			continue
		}
		if err == nil {
			t.Errorf("test from %s accepted", sim.StatusLabel(st))
			continue
		}
		wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest,
			"Test is not available because of the current state of the node.")
	}
}

func TestTestNeverCommissionedNew(t *testing.T) {
	e := newEnv(t, withMachines(neverCommissioned(spec("fresh1", sim.StatusNew, "ipmi"))))
	_, err := e.client.Test(ctx, "fresh1", maas.TestOptions{})
	wantMessage(t, err, http.StatusBadRequest, maas.ErrBadRequest,
		"Unable to start machine testing; this node has never been commissioned. "+
			"Please use the 'Commission' action to commission & test this machine.")
}

func TestAllocateStateRules(t *testing.T) {
	e, id := tableEnv(t, "al")
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Allocate(ctx, id(st), maas.AllocateOptions{})
		if st == sim.StatusReady {
			if err != nil || m.Status != maas.StatusAllocated || m.Owner != "apelora" {
				t.Errorf("allocate Ready: %v, %+v", err, m)
			}
			continue
		}
		if err == nil {
			t.Errorf("allocate from %s accepted", sim.StatusLabel(st))
			continue
		}
		wantMessage(t, err, http.StatusConflict, maas.ErrConflict, fmt.Sprintf("No machine with system ID %s available.", id(st)))
	}
	// The last call was for status 22; allocate is a collection op.
	r := e.lastRequest("allocate")
	if r.Path != "/MAAS/api/2.0/machines/" || r.Method != http.MethodPost || r.Form.Get("system_id") != id(22) {
		t.Fatalf("allocate request %+v", r)
	}
}

func TestDeployStateRules(t *testing.T) {
	e, id := tableEnv(t, "dp")
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Deploy(ctx, id(st), maas.DeployOptions{DistroSeries: "noble"})
		if st == sim.StatusReady || st == sim.StatusAllocated {
			if err != nil || m.Status != maas.StatusDeploying || m.Owner != "apelora" {
				t.Errorf("deploy from %s: %v, %+v", sim.StatusLabel(st), err, m)
			}
			continue
		}
		if err == nil {
			t.Errorf("deploy from %s accepted", sim.StatusLabel(st))
			continue
		}
		wantMessage(t, err, http.StatusConflict, maas.ErrConflict,
			fmt.Sprintf("Can't deploy a machine that is in the '%s' state", sim.StatusLabel(st)))
		if ae := apiError(t, err, 409); ae.RetryAfter != 0 {
			t.Errorf("state conflict carries Retry-After %v", ae.RetryAfter)
		}
	}
	// A state conflict is answered once: POSTs are never retried.
	if n := e.sim.CountRequests(http.MethodPost, "deploy"); n != allStatuses {
		t.Fatalf("%d deploy requests for %d calls", n, allStatuses)
	}
}

func TestReleaseStateRules(t *testing.T) {
	e, id := tableEnv(t, "rl")
	allowed := []int{sim.StatusAllocated, sim.StatusReserved, sim.StatusBroken, sim.StatusDeploying, sim.StatusDeployed,
		sim.StatusFailedDeployment, sim.StatusFailedDiskErasing, sim.StatusFailedReleasing}
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Release(ctx, id(st), maas.ReleaseOptions{})
		switch {
		case slices.Contains(allowed, st):
			if err != nil || m.Status != maas.StatusReleasing {
				t.Errorf("release from %s: %v, status %v", sim.StatusLabel(st), err, m.Status)
			}
		case st == sim.StatusReady || st == sim.StatusReleasing:
			if err != nil || int(m.Status) != st {
				t.Errorf("release from %s is a no-op in MAAS: %v, status %v", sim.StatusLabel(st), err, m.Status)
			}
		case err == nil:
			t.Errorf("release from %s accepted", sim.StatusLabel(st))
		default:
			wantMessage(t, err, http.StatusConflict, maas.ErrConflict,
				fmt.Sprintf("Machine cannot be released in its current state ('%s').", sim.StatusLabel(st)))
		}
	}
}

func TestAbortStateRules(t *testing.T) {
	e, id := tableEnv(t, "ab")
	after := map[int]maas.Status{
		sim.StatusCommissioning: maas.StatusNew,
		sim.StatusDiskErasing:   maas.StatusFailedDiskErasing,
		sim.StatusDeploying:     maas.StatusAllocated,
		sim.StatusTesting:       maas.StatusReady,
	}
	for st := 0; st < allStatuses; st++ {
		m, err := e.client.Abort(ctx, id(st), "operator abort")
		if want, ok := after[st]; ok {
			if err != nil || m.Status != want {
				t.Errorf("abort from %s: %v, status %v, want %v", sim.StatusLabel(st), err, m.Status, want)
			}
			continue
		}
		if err == nil {
			t.Errorf("abort from %s accepted", sim.StatusLabel(st))
			continue
		}
		wantMessage(t, err, http.StatusConflict, maas.ErrConflict,
			fmt.Sprintf("Cannot abort in current state: node %s is in state %s.", id(st), sim.StatusLabel(st)))
	}
	if r := e.lastRequest("abort"); r.Form.Get("comment") != "operator abort" {
		t.Fatalf("abort sent %v", r.Form)
	}
}
