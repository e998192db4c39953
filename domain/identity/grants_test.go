package identity

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// The grant rules: unscoped grants hold everywhere; a grant in one cluster holds there
// only; hardware.delete in a cluster needs manage-infrastructure there; manage anywhere
// lets the identity read every cluster (unless view is granted scoped: readscope_test.go);
// an unconfirmed SSO identity's grants in
// clusters lapse with its permissions.
func TestGrantsInClusters(t *testing.T) {
	const a, b = 1, 2
	scoped := &Identity{Name: "rack1-ops", Grants: []ClusterGrant{
		{Permission: ManageInfrastructure, Cluster: a, ClusterName: "rack1"},
		{Permission: HardwareDelete, Cluster: a, ClusterName: "rack1"},
		{Permission: HardwareDelete, Cluster: b, ClusterName: "rack2"}, // without manage there: nothing
	}}
	global := &Identity{Name: "admin", Permissions: []Permission{ManageInfrastructure}}
	for _, c := range []struct {
		id      *Identity
		p       Permission
		cluster int64
		want    bool
	}{
		{scoped, ManageInfrastructure, a, true},
		{scoped, ManageInfrastructure, b, false},
		{scoped, HardwareDelete, a, true},
		{scoped, HardwareDelete, b, false},
		{scoped, ViewInfrastructure, b, true},
		{global, ManageInfrastructure, b, true},
		{global, HardwareDelete, a, false},
	} {
		if got := c.id.HasIn(c.p, c.cluster); got != c.want {
			t.Errorf("%s HasIn(%s, %d) = %v, want %v", c.id.Name, c.p, c.cluster, got, c.want)
		}
	}
	if scoped.Has(ManageInfrastructure) || !scoped.Has(ViewInfrastructure) {
		t.Errorf("scoped identity: unscoped manage %v (want false), view %v (want true)", scoped.Has(ManageInfrastructure), scoped.Has(ViewInfrastructure))
	}

	err := scoped.RequireIn(ManageInfrastructure, Where{Cluster: b, Name: "rack2", Why: "m1 is in rack2"})
	if apperr.CodeOf(err) != apperr.Forbidden || !strings.Contains(err.Error(), "may manage rack1 only; m1 is in rack2") ||
		!strings.Contains(err.Error(), "manage-infrastructure@rack2") {
		t.Errorf("refusal in another cluster: %v", err)
	}
	err = scoped.RequireIn(ManageInfrastructure, Where{Why: "registerCluster is about no cluster"})
	if apperr.CodeOf(err) != apperr.Forbidden || !strings.Contains(err.Error(), "may manage rack1 only; registerCluster is about no cluster") {
		t.Errorf("refusal of an unscoped call: %v", err)
	}
	if err := scoped.RequireIn(ManageInfrastructure, Where{Cluster: a, Name: "rack1"}); err != nil {
		t.Errorf("allowed in its cluster: %v", err)
	}
	viewer := &Identity{Name: "eve", Permissions: []Permission{ViewInfrastructure}}
	if err := viewer.RequireIn(ManageInfrastructure, Where{Cluster: a, Name: "rack1"}); err == nil || !strings.Contains(err.Error(), "lacks the manage-infrastructure permission") {
		t.Errorf("a viewer's refusal names the permission: %v", err)
	}

	now := time.Now()
	sso := &Identity{Name: "sso", Grants: scoped.Grants[:1], SSO: &SSOAccount{Subject: "s", ConfirmedUntil: now.Add(-time.Minute)}}
	if sso.HasIn(ManageInfrastructure, a) || !sso.Has(ViewInfrastructure) || len(sso.Scoped(now)) != 0 {
		t.Errorf("unconfirmed SSO identity: manage@rack1 %v (want false), view %v (want true)", sso.HasIn(ManageInfrastructure, a), sso.Has(ViewInfrastructure))
	}
}

func TestParseGrant(t *testing.T) {
	for in, want := range map[string]GrantText{
		"manage-infrastructure":         {Permission: ManageInfrastructure},
		" manage-infrastructure@rack1 ": {Permission: ManageInfrastructure, Cluster: "rack1"},
		"hardware.delete@rack-2":        {Permission: HardwareDelete, Cluster: "rack-2"},
	} {
		if got, err := ParseGrant(in); err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for in, want := range map[string]string{
		"root@rack1":                   "unknown permission",
		"manage-infrastructure@":       "names no cluster",
		"manage-infrastructure@Rack 1": "names no cluster",
		"manage-infrastructure@a\x00b": "names no cluster",
	} {
		if _, err := ParseGrant(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	if _, err := checkGrants(nil, []GrantText{{Permission: HardwareDelete, Cluster: "rack1"}}); err == nil || !strings.Contains(err.Error(), "manage-infrastructure@rack1") {
		t.Errorf("hardware.delete@rack1 alone: %v", err)
	}
	if _, err := checkGrants([]Permission{ManageInfrastructure}, []GrantText{{Permission: HardwareDelete, Cluster: "rack1"}}); err != nil {
		t.Errorf("hardware.delete@rack1 beside unscoped manage: %v", err)
	}
}

// SSO groups map to grants in one cluster as well: permission@cluster.
func TestGroupGrantsInClusters(t *testing.T) {
	m, err := ParseGroupPermissions("rack1-ops=manage-infrastructure@rack1,hardware.delete@rack1;noc=view-infrastructure;ops=manage-infrastructure")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "noc=view-infrastructure;ops=manage-infrastructure;rack1-ops=hardware.delete@rack1,manage-infrastructure@rack1" {
		t.Fatalf("mapping read as %s", got)
	}
	perms, err := m.Grant([]string{"rack1-ops"})
	if err != nil || len(perms) != 0 {
		t.Fatalf("rack1-ops alone: unscoped %v %v, want none and no refusal", perms, err)
	}
	want := []GrantText{{HardwareDelete, "rack1"}, {ManageInfrastructure, "rack1"}}
	if got := m.GrantIn([]string{"rack1-ops", "noc", "rack1-ops"}); !slices.Equal(got, want) {
		t.Fatalf("grants in clusters %v, want %v", got, want)
	}
	if perms, _ := m.Grant([]string{"rack1-ops", "noc"}); !slices.Equal(perms, []Permission{ViewInfrastructure}) {
		t.Fatalf("rack1-ops and noc: %v", perms)
	}
	// view-infrastructure@rack1 scopes a group's reads to rack1 (ReadScope).
	if r, err := ParseGroupPermissions("rack1-noc=view-infrastructure@rack1"); err != nil || !slices.Equal(r.GrantIn([]string{"rack1-noc"}), []GrantText{{ViewInfrastructure, "rack1"}}) {
		t.Fatalf("rack1-noc=view-infrastructure@rack1: %v %v", r, err)
	}
	if got, err := ParseGrant("view-infrastructure@rack1"); err != nil || got != (GrantText{ViewInfrastructure, "rack1"}) {
		t.Fatalf("view-infrastructure@rack1: %+v %v", got, err)
	}
	for in, want := range map[string]string{
		"ops=hardware.delete@rack1":  "hardware.delete@rack1 only widens manage-infrastructure there",
		"ops=manage-infrastructure@": "names no cluster",
	} {
		if _, err := ParseGroupPermissions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
