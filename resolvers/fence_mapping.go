package resolvers

import (
	"context"
	"encoding/base64"
	"sort"
	"strconv"
	"strings"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/apperr"
)

// Helpers of fence.resolvers.go (gqlgen moves helpers out of *.resolvers.go files).

func mapFenceMapping(m *fencing.Mapping) *model.FenceMapping {
	if m == nil {
		return nil
	}
	return &model.FenceMapping{ClusterID: m.Cluster, Member: m.Member, MaasSystemID: m.SystemID, HardwareUUID: m.HardwareUUID, SetBy: m.SetBy, SetAt: m.SetAt}
}

func mapFenceStatus(s *fencing.Status) *model.FenceMapping {
	if s == nil {
		return nil
	}
	out := mapFenceMapping(&s.Mapping)
	if d := s.Drill; d != nil {
		out.LastDrill = &model.FenceDrill{At: d.At, Ok: d.OK, PowerState: optional(d.PowerState), Problem: optional(d.Problem), Worker: d.Worker}
	}
	out.OfflineSince = s.OfflineSince
	if s.LastEvent != nil {
		out.LastEvent = mapFenceEvent(s.LastEvent)
	}
	return out
}

func mapFenceEvent(e *fencing.Event) *model.FenceEvent {
	out := &model.FenceEvent{
		ID: strconv.FormatInt(e.ID, 10), ClusterID: e.Cluster, At: e.At, Member: optional(e.Member), Kind: model.FenceEventKind(e.Kind),
		Message: e.Message, Worker: e.Worker, Details: e.Details,
	}
	if out.Details == nil {
		out.Details = map[string]any{}
	}
	if e.Reason != "" {
		r := model.FenceReason(e.Reason)
		out.Reason = &r
	}
	return out
}

func mapClusterView(v *fencing.ClusterView) *model.ClusterView {
	out := &model.ClusterView{HealingThreshold: v.HealingThreshold, OfflineThreshold: v.OfflineThreshold, MinimumOfflineAfter: v.MinOfflineAfter,
		Members: v.Members, OfflineMembers: v.OfflineMembers, Warnings: []*model.ClusterWarning{}}
	if v.Members != nil {
		out.UnmappedMembers = nonNil(v.UnmappedMembers) // null only when unknown
	}
	if w := v.Worker; w != nil {
		out.FenceWorker = &model.FenceWorker{Worker: w.Worker, LeaderSince: w.LeaderSince, LastRoundAt: w.LastRoundAt,
			PollSeconds: w.PollInterval.Seconds(), OfflineAfterSeconds: w.Limits.OfflineAfter.Seconds(),
			CooldownSeconds: w.Limits.Cooldown.Seconds(), ConfirmTimeoutSeconds: w.Limits.ConfirmTimeout.Seconds(),
			SettleSeconds: w.Limits.Settle.Seconds()}
	}
	for _, w := range v.Warnings {
		out.Warnings = append(out.Warnings, &model.ClusterWarning{Code: model.ClusterWarningCode(w.Code), Message: w.Message})
	}
	return out
}

// sortedFenceStatuses orders mappings by member, then cluster id.
func sortedFenceStatuses(m map[clusters.MemberKey]fencing.Status) []*model.FenceMapping {
	keys := make([]clusters.MemberKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Name != keys[j].Name {
			return keys[i].Name < keys[j].Name
		}
		return keys[i].Cluster < keys[j].Cluster
	})
	out := make([]*model.FenceMapping, len(keys))
	for i, k := range keys {
		s := m[k]
		out[i] = mapFenceStatus(&s)
	}
	return out
}

// clusterName names a cluster by id (nil for 0 or a cluster no longer registered).
func (r *Resolver) clusterName(id int64) *string {
	if id == 0 || r.Clusters == nil || r.Clusters.Registry == nil {
		return nil
	}
	if c, ok := r.Clusters.Registry.ByID(id); ok {
		return &c.Name
	}
	return nil
}

// machineIfKnown reads the machine of that name after a change; a machine no source knows,
// or a view that cannot be read, gives null (the change itself is done and audited).
func (r *Resolver) machineIfKnown(ctx context.Context, name string) *model.Machine {
	m, err := r.View.Machine(ctx, name)
	if err != nil {
		r.Log.WarnContext(ctx, "read the machine back after a fence mapping change", "machine", name, "error", err)
		return nil
	}
	if m == nil {
		return nil
	}
	return mapMachine(m)
}

const fenceCursorPrefix = "fence:"

func fenceCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fenceCursorPrefix + strconv.FormatInt(id, 10)))
}

func parseFenceCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), fenceCursorPrefix); ok {
			if id, err := strconv.ParseInt(rest, 10, 64); err == nil && id > 0 {
				return id, nil
			}
		}
	}
	return 0, apperr.Invalid("after", "cursor %s is not one this server gave out: pass a pageInfo.endCursor from an earlier page of fenceEvents", apperr.Quote(c))
}

// readableFenceEvents passes on the events of the clusters the caller reads (its scope
// read at each event from the socket's live identity); an event about no cluster (a
// worker taking the lease) is for callers who read every cluster.
func readableFenceEvents(ctx context.Context, in <-chan *model.FenceEvent) <-chan *model.FenceEvent {
	out := make(chan *model.FenceEvent)
	go func() {
		defer close(out)
		for {
			select {
			case e, ok := <-in:
				if !ok {
					return
				}
				if !identity.ReadScopeOf(ctx).Reads(e.ClusterID) {
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
