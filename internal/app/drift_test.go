package app

import (
	"testing"

	"github.com/apelora/fabric/adapters/incus"
)

func TestWhichIncusEventsDriftLooksAt(t *testing.T) {
	for _, c := range []struct {
		action, source string
		member         string
		concerns       bool
	}{
		{incus.ActionMemberUpdated, "/1.0/cluster/members/node-4", "node-4", true},
		{incus.ActionMemberRemoved, "/1.0/cluster/members/node-4", "node-4", true},
		{incus.ActionMemberAdded, "/1.0/cluster/members/node-9", "node-9", true},
		{incus.ActionMemberUpdated, "/1.0/cluster/members", "", true},
		{"storage-pool-created", "/1.0/storage-pools/fast", "", true},
		{"network-deleted", "/1.0/networks/br1", "", true},
		{incus.ActionTokenCreated, "/1.0/cluster/members", "", false},
		{"instance-created", "/1.0/instances/c1", "", false},
		{"operation-cancelled", "/1.0/operations/x", "", false},
	} {
		m, ok := driftConcerns(incus.LifecycleEvent{Action: c.action, Source: c.source})
		if m != c.member || ok != c.concerns {
			t.Errorf("%s %s: %q %v, want %q %v", c.action, c.source, m, ok, c.member, c.concerns)
		}
	}
}
