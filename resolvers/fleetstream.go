package resolvers

import (
	"sync"

	"github.com/apelora/fabric/domain/fleet"
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
