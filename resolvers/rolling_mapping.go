package resolvers

import (
	"strconv"

	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/graph/model"
)

// mapRolling answers a rolling reboot task as the schema's RollingReboot, with its
// cluster's record (null once the cluster is removed).
func (r *Resolver) mapRolling(t *rolling.Task) *model.RollingReboot {
	if t == nil {
		return nil
	}
	out := &model.RollingReboot{ID: strconv.FormatInt(t.ID, 10), Members: t.Members, Done: min(t.Position, len(t.Members)),
		Stage: model.RollingStage(t.Stage), StageSince: t.StageSince, StageSeconds: t.StageFor.Seconds(), State: model.RollingState(t.State),
		Reason: t.Reason, StartedBy: t.StartedBy, StartedAt: t.StartedAt}
	if r.Clusters != nil && r.Clusters.Registry != nil {
		if c, ok := r.Clusters.Registry.ByID(t.Cluster); ok {
			out.Cluster = mapCluster(&c)
		}
	}
	if out.Members == nil {
		out.Members = []string{}
	}
	if cur := t.Current(); cur != "" {
		out.Current = &cur
	}
	if !t.FinishedAt.IsZero() {
		at := t.FinishedAt
		out.FinishedAt = &at
	}
	return out
}
