package resolvers

import (
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

// The old names (schema/deprecated.graphqls) answer what their replacements answer,
// converted here from the replacement's model: nothing below reads anything itself.

// memberOperation is a maintenance task as the deprecated MemberOperation.
func memberOperation(t *model.MaintenanceTask) *model.MemberOperation {
	if t == nil {
		return nil
	}
	out := &model.MemberOperation{ID: t.ID, Machine: t.Machine, Action: t.Action, Mode: t.Mode, IncusOperation: t.IncusOperation,
		StartedBy: t.StartedBy, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, Message: t.Message}
	if t.Outcome != nil {
		k := model.MemberOperationKind(*t.Outcome)
		out.Outcome = &k
	}
	return out
}

// memberOperationEvents is the deprecated memberOperation subscription's view of the
// events maintenanceTask pushes.
var memberOperationEvents = broadcast.NewView(func(e maintenance.Event) *model.MemberOperationEvent {
	t := mapMaintenanceTaskEvent(e)
	return &model.MemberOperationEvent{ID: t.ID, OperationID: t.TaskID, Machine: t.Machine, Action: t.Action, At: t.At,
		Kind: model.MemberOperationKind(t.Kind), Message: t.Message}
})
