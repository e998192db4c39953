package rolling

import (
	"context"
	"fmt"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/internal/apperr"
)

// StepJudge says what became of a rolling reboot step whose outcome the driver did not
// record (package changes): an evacuation or a restore by the member's status (the
// maintenance judge), a power command by the power state MAAS last read for the machine
// its fence mapping names. The driver takes the step on from there, reading Incus, MAAS
// and the operation's row (it never trusts the trail).
type StepJudge struct {
	Store Store
	// Maintenance judges evacuations and restores.
	Maintenance func(ctx context.Context, st changes.Step, action string) (changes.Verdict, error)
	// PowerState is the power state MAAS reports for a machine ("on", "off", …); nil
	// when MAAS is not configured.
	PowerState func(ctx context.Context, systemID string) (string, error)
}

// Judge is the changes.Judge of StepAction.
func (j StepJudge) Judge(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	step, _ := st.Parameters["step"].(string)
	switch Step(step) {
	case StepEvacuate:
		return j.Maintenance(ctx, st, maintenance.Evacuate)
	case StepRestore:
		return j.Maintenance(ctx, st, maintenance.Restore)
	case StepPowerOff, StepPowerOn:
		if j.PowerState == nil {
			return changes.Verdict{}, apperr.NotConfigured(apperr.MAAS)
		}
		mappings, err := j.Store.Mappings(ctx)
		if err != nil {
			return changes.Verdict{}, err
		}
		mp, ok := mappings[st.Machine]
		if !ok {
			return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s has no fence mapping any more: which machine was powered is not known; look at it in MAAS", st.Machine)}, nil
		}
		state, err := j.PowerState(ctx, mp.SystemID)
		if err != nil {
			return changes.Verdict{}, err
		}
		want := "off"
		if Step(step) == StepPowerOn {
			want = "on"
		}
		if state == want {
			return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("MAAS reads machine %s's power %s: the power %s happened", mp.SystemID, state, want)}, nil
		}
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("MAAS reads machine %s's power %s, not %s: the power %s did not happen (yet)", mp.SystemID, state, want, want)}, nil
	}
	return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("a rolling reboot step %q sends nothing to Incus or MAAS: nothing to read", step)}, nil
}
