package resolvers

import (
	"context"
	"fmt"
	"testing"

	"github.com/apelora/fabric/graph/model"
)

func inCluster(name, cluster string) *model.Machine {
	m := &model.Machine{Name: name}
	if cluster != "" {
		m.Cluster = &model.Cluster{Name: cluster}
	}
	return m
}

func namesOf(ms []*model.Machine) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// A subscriber of one cluster is sent its rows only: a row that moves into the cluster
// comes added, one that moves out or is gone comes removed, another cluster's rows never;
// every revision is passed on; a snapshot starts over.
func TestFleetUpdatesOfOneCluster(t *testing.T) {
	in := make(chan *model.FleetUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := followCluster(ctx, in, "rack2")
	send := func(u *model.FleetUpdate) string {
		in <- u
		got := <-out
		return fmt.Sprintf("%d %t +%v ~%v -%v", got.Revision, got.Snapshot, namesOf(got.Added), namesOf(got.Changed), got.Removed)
	}
	steps := []struct {
		u    *model.FleetUpdate
		want string
	}{
		{&model.FleetUpdate{Revision: 1, Snapshot: true, Added: []*model.Machine{inCluster("m1", "default"), inCluster("m1.rack2", "rack2"), inCluster("m2", "rack2"), inCluster("node-x", "")}},
			"1 true +[m1.rack2 m2] ~[] -[]"},
		// default's m1 changes; m3, registered with no cluster, is added (not rack2's).
		{&model.FleetUpdate{Revision: 2, Added: []*model.Machine{inCluster("m3", "")}, Changed: []*model.Machine{inCluster("m1", "default")}},
			"2 false +[] ~[] -[]"},
		// m3 is enrolled into rack2: added; m2 changes.
		{&model.FleetUpdate{Revision: 3, Changed: []*model.Machine{inCluster("m3", "rack2"), inCluster("m2", "rack2")}},
			"3 false +[m3] ~[m2] -[]"},
		// m2 leaves rack2 (its record moves); m1.rack2 is gone; default's m1 is gone.
		{&model.FleetUpdate{Revision: 4, Changed: []*model.Machine{inCluster("m2", "default")}, Removed: []string{"m1.rack2", "m1"}},
			"4 false +[] ~[] -[m2 m1.rack2]"},
		// A snapshot replaces what the subscriber held.
		{&model.FleetUpdate{Revision: 9, Snapshot: true, Added: []*model.Machine{inCluster("m3", "rack2")}},
			"9 true +[m3] ~[] -[]"},
		{&model.FleetUpdate{Revision: 10, Removed: []string{"m2"}, Changed: []*model.Machine{inCluster("m3", "rack2")}},
			"10 false +[] ~[m3] -[]"},
	}
	for _, s := range steps {
		if got := send(s.u); got != s.want {
			t.Fatalf("revision %d: sent %s, want %s", s.u.Revision, got, s.want)
		}
	}
	cancel()
	if _, open := <-out; open {
		t.Fatal("the stream stays open after its subscriber left")
	}
}
