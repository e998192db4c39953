package resolvers

import (
	"strconv"

	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/graph/model"
)

func mapRolling(op *rolling.Operation) *model.RollingReboot {
	if op == nil {
		return nil
	}
	out := &model.RollingReboot{ID: strconv.FormatInt(op.ID, 10), Members: op.Members, Done: min(op.Position, len(op.Members)),
		Stage: model.RollingStage(op.Step), StageSince: op.StepSince, StageSeconds: op.StepFor.Seconds(), State: model.RollingState(op.State),
		Reason: op.Reason, StartedBy: op.StartedBy, StartedAt: op.StartedAt}
	if out.Members == nil {
		out.Members = []string{}
	}
	if cur := op.Current(); cur != "" {
		out.Current = &cur
	}
	if !op.FinishedAt.IsZero() {
		t := op.FinishedAt
		out.FinishedAt = &t
	}
	return out
}
