package identity

import (
	"slices"
	"testing"
	"time"
)

// The rule of read scoping: view-infrastructure in some clusters scopes reads to them
// (and to the clusters managed); manage-infrastructure, scoped or not, reads every
// cluster otherwise.
func TestReadScope(t *testing.T) {
	const a, b, c = 1, 2, 3
	g := func(p Permission, cl int64) ClusterGrant {
		return ClusterGrant{Permission: p, Cluster: cl, ClusterName: "x"}
	}
	for _, tc := range []struct {
		name     string
		id       *Identity
		all, any bool
		clusters []int64
	}{
		{"none", nil, false, false, nil},
		{"no permission", &Identity{Name: "n"}, false, false, nil},
		{"hardware.delete alone", &Identity{Permissions: []Permission{HardwareDelete}}, false, false, nil},
		{"view", &Identity{Permissions: []Permission{ViewInfrastructure}}, true, true, nil},
		{"manage", &Identity{Permissions: []Permission{ManageInfrastructure}}, true, true, nil},
		{"manage@a", &Identity{Grants: []ClusterGrant{g(ManageInfrastructure, a)}}, true, true, nil},
		{"view@b", &Identity{Grants: []ClusterGrant{g(ViewInfrastructure, b)}}, false, true, []int64{b}},
		{"view@c,view@b", &Identity{Grants: []ClusterGrant{g(ViewInfrastructure, c), g(ViewInfrastructure, b), g(ViewInfrastructure, b)}}, false, true, []int64{b, c}},
		{"view@b,manage@a", &Identity{Grants: []ClusterGrant{g(ViewInfrastructure, b), g(ManageInfrastructure, a)}}, false, true, []int64{a, b}},
		{"view@b beside unscoped view", &Identity{Permissions: []Permission{ViewInfrastructure}, Grants: []ClusterGrant{g(ViewInfrastructure, b)}}, true, true, nil},
		{"view@b beside unscoped manage", &Identity{Permissions: []Permission{ManageInfrastructure}, Grants: []ClusterGrant{g(ViewInfrastructure, b)}}, true, true, nil},
	} {
		s := tc.id.ReadScope()
		if s.All() != tc.all || s.Any() != tc.any || !slices.Equal(s.Clusters(), tc.clusters) || s.Scoped() != (tc.any && !tc.all) {
			t.Errorf("%s: all %v any %v clusters %v, want %v %v %v", tc.name, s.All(), s.Any(), s.Clusters(), tc.all, tc.any, tc.clusters)
		}
		for _, cl := range []int64{0, a, b, c} {
			want := tc.all || (cl != 0 && slices.Contains(tc.clusters, cl))
			if s.Reads(cl) != want || tc.id.HasIn(ViewInfrastructure, cl) != (want && cl != 0 || tc.all) {
				t.Errorf("%s: reads cluster %d %v, want %v", tc.name, cl, s.Reads(cl), want)
			}
		}
		// Has(view) is reading every cluster: what the unscoped reads (identities, MAAS
		// images, the audit checkpoint) ask.
		if tc.id.Has(ViewInfrastructure) != tc.all {
			t.Errorf("%s: Has(view-infrastructure) %v, want %v", tc.name, tc.id.Has(ViewInfrastructure), tc.all)
		}
	}

	// An SSO identity whose groups await the re-check keeps its reads, scoped as granted:
	// never wider.
	now := time.Now()
	sso := &Identity{Name: "sso", Grants: []ClusterGrant{g(ViewInfrastructure, b), g(ManageInfrastructure, b)},
		SSO: &SSOAccount{Subject: "s", ConfirmedUntil: now.Add(-time.Minute)}}
	if s := sso.ReadScope(); !s.Scoped() || !s.Reads(b) || s.Reads(a) || sso.Has(ViewInfrastructure) || len(sso.Granted(now)) != 0 || sso.HasIn(ManageInfrastructure, b) {
		t.Errorf("unconfirmed SSO view@b: scope %+v, granted %v", s, sso.Granted(now))
	}
	if !InClusters(b, a, b).Equal(InClusters(a, b)) || InClusters(a).Equal(EveryCluster) {
		t.Error("Equal")
	}
}
