package fleet

import (
	"reflect"
	"slices"
	"time"

	"github.com/apelora/fabric/domain/drift"
)

// Update is one message of the fleet stream: the whole fleet (a snapshot) or what changed
// since the previous revision.
type Update struct {
	// Revision numbers the fleet as this message leaves it. A change is always the
	// revision after the one before it, so a client can tell it missed nothing.
	Revision int64
	// Snapshot: Added holds every row and the client replaces whatever it held.
	Snapshot bool
	Added    []Machine
	Changed  []Machine
	Removed  []string // names
	// Sources is set in a snapshot and when a source's availability changed; nil otherwise.
	Sources *Sources
}

// Sources is what each upstream said about itself.
type Sources struct {
	Incus, MAAS Source
	// Clusters says per cluster whether it answered (View.Clusters).
	Clusters []ClusterSource
}

// Empty says whether the update carries nothing (the fleet did not change).
func (u *Update) Empty() bool {
	return !u.Snapshot && len(u.Added) == 0 && len(u.Changed) == 0 && len(u.Removed) == 0 && u.Sources == nil
}

// snapshotOf is the whole fleet v as one update.
func snapshotOf(v *View, rev int64) *Update {
	return &Update{Revision: rev, Snapshot: true, Added: v.Machines, Sources: &Sources{Incus: v.Incus, MAAS: v.MAAS, Clusters: v.Clusters}}
}

// Diff returns what changed from prev to next (both as View returns them, rows ordered
// by name), numbered rev: rows added, rows whose content changed (whole rows), names
// removed, and the sources when either one's availability or message changed.
func Diff(prev, next *View, rev int64) *Update {
	u := &Update{Revision: rev}
	old := make(map[string]*Machine, len(prev.Machines))
	for i := range prev.Machines {
		old[prev.Machines[i].Name] = &prev.Machines[i]
	}
	for i := range next.Machines {
		m := &next.Machines[i]
		was, ok := old[m.Name]
		switch {
		case !ok:
			u.Added = append(u.Added, *m)
		case !sameRow(was, m):
			u.Changed = append(u.Changed, *m)
		}
		delete(old, m.Name)
	}
	for i := range prev.Machines {
		if _, gone := old[prev.Machines[i].Name]; gone {
			u.Removed = append(u.Removed, prev.Machines[i].Name)
		}
	}
	if prev.Incus != next.Incus || prev.MAAS != next.MAAS || !slices.EqualFunc(prev.Clusters, next.Clusters, sameCluster) {
		u.Sources = &Sources{Incus: next.Incus, MAAS: next.MAAS, Clusters: next.Clusters}
	}
	return u
}

func sameCluster(a, b ClusterSource) bool { return *a.Cluster == *b.Cluster && a.Source == b.Source }

// sameRow compares two reads of a row by content: every part is read afresh from its
// source, so pointers differ while the facts may not. When drift last re-checked the
// machine is no change: otherwise each drift round (every minute) would re-send every
// admitted row to every subscriber.
func sameRow(a, b *Machine) bool {
	ac, bc := *a, *b
	ac.DriftChecked, bc.DriftChecked = time.Time{}, time.Time{}
	ac.Drift, bc.Drift = withoutCheckTimes(a.Drift), withoutCheckTimes(b.Drift)
	return reflect.DeepEqual(&ac, &bc)
}

func withoutCheckTimes(states []drift.State) []drift.State {
	if states == nil {
		return nil
	}
	out := slices.Clone(states)
	for i := range out {
		out[i].LastChecked = time.Time{}
	}
	return out
}
