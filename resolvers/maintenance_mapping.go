package resolvers

import (
	"context"
	"strconv"
	"strings"

	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

var maintenanceTaskEvents = broadcast.NewView(mapMaintenanceTaskEvent)

func mapMaintenanceTaskEvent(e maintenance.Event) *model.MaintenanceTaskEvent {
	return &model.MaintenanceTaskEvent{ID: strconv.FormatInt(e.ID, 10), TaskID: strconv.FormatInt(e.Task, 10),
		Machine: e.Machine, Action: model.MemberAction(strings.ToUpper(e.Action)), At: e.At,
		Kind: model.MaintenanceEventKind(e.Kind), Message: e.Message}
}

// subscribeMaintenance follows the member's maintenance tasks from the event after after
// (nil: from now on), each event converted by view.
func subscribeMaintenance[T any](ctx context.Context, r *Resolver, name string, after *string, view *broadcast.View[maintenance.Event, T]) (<-chan T, error) {
	var from *int64
	if after != nil {
		id, err := maintenance.ParseEventID("after", *after)
		if err != nil {
			return nil, err
		}
		from = &id
	}
	want, err := r.Maintenance.Progress(ctx, name, from)
	if err != nil {
		return nil, err
	}
	return broadcast.Subscribe(ctx, r.Maintenance.Feed, want, view, streamBuffer), nil
}

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

// mapMaintenanceTask answers a maintenance task as the schema's MaintenanceTask.
func mapMaintenanceTask(o *maintenance.Task) *model.MaintenanceTask {
	if o == nil {
		return nil
	}
	out := &model.MaintenanceTask{ID: strconv.FormatInt(o.ID, 10), Machine: o.Machine, Action: model.MemberAction(strings.ToUpper(o.Action)),
		Mode: optional(o.Mode), IncusOperation: o.IncusOperation, StartedBy: o.StartedBy, StartedAt: o.StartedAt, Message: o.Message}
	if !o.FinishedAt.IsZero() {
		t := o.FinishedAt
		out.FinishedAt = &t
		k := model.MaintenanceEventKind(o.Outcome)
		out.Outcome = &k
	}
	return out
}
