package resolvers

import (
	"context"
	"fmt"
	"testing"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/identity"
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
	ctx, cancel := context.WithCancel(identity.WithIdentity(context.Background(), &identity.Identity{Permissions: []identity.Permission{identity.ViewInfrastructure}}))
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

// A read-scoped subscriber (view-infrastructure@rack2) of the whole fleet is sent rack2's
// rows and sources only, its scope read at each update from the live identity: narrowed
// to another cluster, the rows it held leave as they change.
func TestFleetUpdatesOfAReadScopedIdentity(t *testing.T) {
	const def, rack2 = 1, 2
	of := func(name string, cluster int64) *model.Machine {
		m := &model.Machine{Name: name}
		if cluster != 0 {
			m.Cluster = &model.Cluster{Name: fmt.Sprint(cluster), Record: &clusters.Cluster{ID: cluster}}
		}
		return m
	}
	scoped := func(c int64) *identity.Identity {
		return &identity.Identity{Name: "r", Grants: []identity.ClusterGrant{{Permission: identity.ViewInfrastructure, Cluster: c, ClusterName: fmt.Sprint(c)}}}
	}
	live := identity.NewLive(scoped(rack2))
	in := make(chan *model.FleetUpdate)
	ctx, cancel := context.WithCancel(identity.WithLive(context.Background(), live))
	defer cancel()
	out := followCluster(ctx, in, "")
	sources := &model.FleetSources{Incus: &model.SourceStatus{Configured: true, Available: false, Message: "cluster 1 did not answer"},
		Clusters: []*model.ClusterSource{
			{Cluster: of("", def).Cluster, Status: &model.SourceStatus{Configured: true, Message: "cluster 1 did not answer"}},
			{Cluster: of("", rack2).Cluster, Status: &model.SourceStatus{Configured: true, Available: true, Message: "ok"}}}}
	in <- &model.FleetUpdate{Revision: 1, Snapshot: true, Sources: sources, Added: []*model.Machine{of("m1", def), of("m2", rack2), of("maas-only", 0)}}
	got := <-out
	if fmt.Sprint(namesOf(got.Added)) != "[m2]" || len(got.Sources.Clusters) != 1 || got.Sources.Clusters[0].Cluster.Record.ID != rack2 ||
		!got.Sources.Incus.Available || got.Sources.Incus.Message != "ok" {
		t.Fatalf("snapshot: +%v sources %+v incus %+v", namesOf(got.Added), got.Sources.Clusters, got.Sources.Incus)
	}
	live.Set(scoped(def))
	in <- &model.FleetUpdate{Revision: 2, Changed: []*model.Machine{of("m2", rack2), of("m1", def)}}
	if got := <-out; fmt.Sprint(namesOf(got.Added), got.Removed) != "[m1] [m2]" {
		t.Fatalf("after the scope moved to cluster 1: +%v -%v", namesOf(got.Added), got.Removed)
	}
}
