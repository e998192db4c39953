package resolvers

import (
	"strconv"
	"strings"

	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

var memberOperationEvents = broadcast.NewView(func(e maintenance.Event) *model.MemberOperationEvent {
	return &model.MemberOperationEvent{ID: strconv.FormatInt(e.ID, 10), OperationID: strconv.FormatInt(e.Task, 10),
		Machine: e.Machine, Action: model.MemberAction(strings.ToUpper(e.Action)), At: e.At,
		Kind: model.MemberOperationKind(e.Kind), Message: e.Message}
})

// evacuationMode is the schema's mode as Incus spells it ("" for none).
func evacuationMode(m *model.EvacuationMode) string {
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(string(*m)), "_", "-")
}

func mapMaintenanceInstances(ps []maintenance.Affected) []*model.MaintenanceInstance {
	out := make([]*model.MaintenanceInstance, len(ps))
	for i, p := range ps {
		out[i] = &model.MaintenanceInstance{Project: p.Project, Name: p.Name, Type: p.Type, Status: p.Status,
			ClusterEvacuate: optional(p.Evacuate), Fate: model.InstanceFate(p.Fate)}
	}
	return out
}

func mapTargets(ts []maintenance.Target) []*model.EvacuationTarget {
	out := make([]*model.EvacuationTarget, len(ts))
	for i, t := range ts {
		out[i] = &model.EvacuationTarget{Member: t.Member, Instances: t.Instances}
	}
	return out
}

// mapMemberOperation answers a maintenance task as the schema's MemberOperation.
func mapMemberOperation(o *maintenance.Task) *model.MemberOperation {
	if o == nil {
		return nil
	}
	out := &model.MemberOperation{ID: strconv.FormatInt(o.ID, 10), Machine: o.Machine, Action: model.MemberAction(strings.ToUpper(o.Action)),
		Mode: optional(o.Mode), IncusOperation: o.IncusOperation, StartedBy: o.StartedBy, StartedAt: o.StartedAt, Message: o.Message}
	if !o.FinishedAt.IsZero() {
		t := o.FinishedAt
		out.FinishedAt = &t
		k := model.MemberOperationKind(o.Outcome)
		out.Outcome = &k
	}
	return out
}
