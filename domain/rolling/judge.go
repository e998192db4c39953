package rolling

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/internal/apperr"
)

// StageJudge says what became of a rolling reboot stage whose outcome the driver did not
// record (package changes): an evacuation or a restore by the member's status (the
// maintenance judge), a power command by the power state MAAS last read for the machine
// its fence mapping names (PowerVerdict). The driver takes the stage on from there, reading
// Incus, MAAS and the task's row (it never trusts the trail).
type StageJudge struct {
	Store Store
	// Maintenance judges evacuations and restores.
	Maintenance func(ctx context.Context, st changes.Step, action string) (changes.Verdict, error)
	// PowerState is the power state MAAS reports for a machine ("on", "off", …); nil
	// when MAAS is not configured.
	PowerState func(ctx context.Context, systemID string) (string, error)
}

// Judge is the changes.Judge of StageAction.
func (j StageJudge) Judge(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	stage, _ := st.Parameters["step"].(string)
	switch Stage(stage) {
	case StageEvacuate:
		return j.Maintenance(ctx, st, maintenance.Evacuate)
	case StageRestore:
		return j.Maintenance(ctx, st, maintenance.Restore)
	case StagePowerOff, StagePowerOn:
		if j.PowerState == nil {
			return changes.Verdict{}, apperr.NotConfigured(apperr.MAAS)
		}
		cluster, err := j.cluster(ctx, st)
		if err != nil {
			return changes.Verdict{}, err
		}
		mappings, err := j.Store.Mappings(ctx, cluster)
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
		return PowerVerdict(Stage(stage), mp.SystemID, state), nil
	}
	return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("a rolling reboot stage %q sends nothing to Incus or MAAS: nothing to read", stage)}, nil
}

// cluster is the cluster of the stage's rolling reboot (its parameter rollingReboot).
func (j StageJudge) cluster(ctx context.Context, st changes.Step) (int64, error) {
	var id int64
	switch v := st.Parameters["rollingReboot"].(type) {
	case float64:
		id = int64(v)
	case int64:
		id = v
	case int:
		id = int64(v)
	case string:
		id, _ = strconv.ParseInt(v, 10, 64)
	}
	t, err := j.Store.Task(ctx, id)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, apperr.New(apperr.NotFound, "the stage names rolling reboot %v, which is not recorded", st.Parameters["rollingReboot"])
	}
	return t.Cluster, nil
}

// PowerVerdict is the rule for a power stage whose outcome was not recorded: it happened
// when MAAS reads the machine's power as the stage asked (off for POWER_OFF, on for
// POWER_ON).
func PowerVerdict(stage Stage, systemID, state string) changes.Verdict {
	want := "off"
	if stage == StagePowerOn {
		want = "on"
	}
	if state == want {
		return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("MAAS reads machine %s's power %s: the power %s happened", systemID, state, want)}
	}
	return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("MAAS reads machine %s's power %s, not %s: the power %s did not happen (yet)", systemID, state, want, want)}
}
