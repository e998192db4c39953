package resolvers

import (
	"context"
	"strings"
	"sync"

	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

// fleetUpdates maps each fleet change once for every subscriber. A snapshot is sent to
// each subscriber on its own (as it starts), so the last one mapped is kept: the
// watcher hands every subscriber of a revision the same snapshot.
var fleetUpdates = broadcast.NewView((&snapshotMemo{}).mapUpdate)

// fleetBuffer is how many changes a fleetUpdates subscriber may fall behind before it is
// sent a fresh snapshot instead.
const fleetBuffer = 16

type snapshotMemo struct {
	mu  sync.Mutex
	of  *fleet.Update
	out *model.FleetUpdate
}

func (s *snapshotMemo) mapUpdate(u *fleet.Update) *model.FleetUpdate {
	if !u.Snapshot {
		return mapFleetUpdate(u)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.of != u {
		s.of, s.out = u, mapFleetUpdate(u)
	}
	return s.out
}

func mapFleetUpdate(u *fleet.Update) *model.FleetUpdate {
	out := &model.FleetUpdate{Revision: int(u.Revision), Snapshot: u.Snapshot,
		Removed: nonNil(u.Removed)}
	cm := clusterModels{}
	out.Added, out.Changed = mapMachines(u.Added, cm), mapMachines(u.Changed, cm)
	if u.Sources != nil {
		out.Sources = mapSources(u.Sources.Incus, u.Sources.MAAS, u.Sources.Clusters, cm)
	}
	return out
}

func mapMachines(ms []fleet.Machine, cm clusterModels) []*model.Machine {
	out := make([]*model.Machine, len(ms))
	for i := range ms {
		out[i] = mapMachineIn(&ms[i], cm)
	}
	return out
}

// followCluster passes on the updates of the rows of one cluster: the subscriber's own
// execution keeps which rows it was sent, so a row that joins the cluster is added, one
// that leaves it (or is gone) removed. Every revision is passed on (empty when nothing of
// the cluster changed), so the client still sees a gap; a snapshot starts over.
// cluster "" follows every cluster; a read-scoped caller's rows are those of its clusters
// (identity.ReadScope, read at each update from the socket's live identity).
func followCluster(ctx context.Context, in <-chan *model.FleetUpdate, cluster string) <-chan *model.FleetUpdate {
	out := make(chan *model.FleetUpdate)
	go func() {
		defer close(out)
		f := clusterFilter{cluster: cluster, held: map[string]bool{}, scope: func() identity.ReadScope { return identity.ReadScopeOf(ctx) }}
		for {
			var u *model.FleetUpdate
			var ok bool
			select {
			case u, ok = <-in:
				if !ok {
					return
				}
			case <-ctx.Done():
				return
			}
			select {
			case out <- f.apply(u):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// clusterFilter is one subscriber's view of one cluster's rows.
type clusterFilter struct {
	cluster string          // "": every cluster the scope reads
	held    map[string]bool // the rows the subscriber was sent and holds
	scope   func() identity.ReadScope
	now     identity.ReadScope // the scope of the update being applied
}

func (f *clusterFilter) in(m *model.Machine) bool {
	if f.cluster != "" && (m.Cluster == nil || m.Cluster.Name != f.cluster) {
		return false
	}
	return f.now.All() || m.Cluster != nil && m.Cluster.Record != nil && f.now.Reads(m.Cluster.Record.ID)
}

// apply is u as the subscriber of the cluster sees it (u itself is shared: never changed).
func (f *clusterFilter) apply(u *model.FleetUpdate) *model.FleetUpdate {
	f.now = identity.EveryCluster
	if f.scope != nil {
		f.now = f.scope()
	}
	out := &model.FleetUpdate{Revision: u.Revision, Snapshot: u.Snapshot, Sources: scopedSources(u.Sources, f.now),
		Added: []*model.Machine{}, Changed: []*model.Machine{}, Removed: []string{}}
	if u.Snapshot {
		clear(f.held)
	}
	for _, m := range u.Added {
		if f.in(m) {
			out.Added = append(out.Added, m)
			f.held[m.Name] = true
		}
	}
	for _, m := range u.Changed {
		switch in, held := f.in(m), f.held[m.Name]; {
		case in && held:
			out.Changed = append(out.Changed, m)
		case in:
			out.Added = append(out.Added, m)
			f.held[m.Name] = true
		case held:
			out.Removed = append(out.Removed, m.Name)
			delete(f.held, m.Name)
		}
	}
	for _, name := range u.Removed {
		if f.held[name] {
			out.Removed = append(out.Removed, name)
			delete(f.held, name)
		}
	}
	return out
}

// scopedSources are the sources as a read-scoped caller sees them: its clusters only,
// and Incus said of them (as mapFleet's scopedIncus).
func scopedSources(s *model.FleetSources, scope identity.ReadScope) *model.FleetSources {
	if s == nil || scope.All() {
		return s
	}
	out := &model.FleetSources{Maas: s.Maas, Incus: s.Incus, Clusters: []*model.ClusterSource{}}
	var failed []string
	for _, c := range s.Clusters {
		if c.Cluster != nil && c.Cluster.Record != nil && scope.Reads(c.Cluster.Record.ID) {
			out.Clusters = append(out.Clusters, c)
			if c.Status != nil && !c.Status.Available {
				failed = append(failed, c.Status.Message)
			}
		}
	}
	if s.Incus != nil && s.Incus.Configured {
		out.Incus = &model.SourceStatus{Configured: true, Available: len(failed) == 0, Message: "ok"}
		if len(failed) > 0 {
			out.Incus.Message, out.Incus.Since = strings.Join(failed, "; "), s.Incus.Since
		}
	}
	return out
}
