package e2e

import (
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// TestConsoleRollingReboot starts a rolling reboot from the Rolling reboots page on a real
// two-member lab, then pauses, resumes and cancels it (web/console/e2e/rolling.e2e.mjs);
// no worker runs, so it stays at its first step. Each change is one audit event.
func TestConsoleRollingReboot(t *testing.T) {
	parallel(t, lasts(13), browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 2)
	member := lab.Members[1].Name // the stand-by: taking it down keeps the one voter
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, `mutation($m: String!) { setFenceMapping(input: {member: $m, maasSystemId: "rll001", hardwareUuid: "4c4c4544-0046-4e43-8045-000000000001"}) { mapping { member } } }`,
		map[string]any{"m": member})
	runScript(t, node, dir, "rolling.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "rolling"), "MEMBER": member,
	})
	for _, action := range []string{"startRollingReboot", "pauseRollingReboot", "resumeRollingReboot", "cancelRollingReboot"} {
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND outcome = 'SUCCEEDED'`, action).(int64); n != 1 {
			t.Errorf("%d successful %s in the audit trail, want 1", n, action)
		}
	}
	if n := e.Scalar(`SELECT count(*) FROM rolling_operations WHERE state = 'CANCELLED'`).(int64); n != 1 {
		t.Errorf("%d cancelled rolling reboots, want 1", n)
	}
}
