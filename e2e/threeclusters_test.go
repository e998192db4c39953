package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// TestThreeClustersAtOnce: three real Incus clusters on loopback at once (one, one and two
// members, each with an m1), behind one Apelora: the environment's and two registered
// through the API. The fleet names each m1 by its cluster (no record claims the name), each
// row in its cluster, a cluster filter keeps its own; the placement guard turned on in one
// reads on there only; the clusters page lists the three, each with its fencing state;
// removing an empty cluster takes its rows out of the fleet and leaves the others'.
func TestThreeClustersAtOnce(t *testing.T) {
	parallel(t, lasts(3))
	labs := startLabs(t, 1, 1, 2)
	e := producttest.Start(t, producttest.WithIncus(labs[0].Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for i, name := range []string{"b", "c"} {
		if r := e.RegisterCluster(admin, name, labs[i+1]); len(r.Errors) > 0 {
			t.Fatalf("register %s: %+v", name, r.Errors)
		}
	}
	fleet := func(cluster any) string {
		t.Helper()
		var out []string
		for _, m := range e.MustGQL(admin, fleetClustersQuery, map[string]any{"c": cluster})["fleet"].(map[string]any)["machines"].([]any) {
			m := m.(map[string]any)
			out = append(out, fmt.Sprintf("%s@%s:%s", m["name"], m["cluster"].(map[string]any)["name"], m["member"].(map[string]any)["url"]))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	want := strings.Join([]string{
		"m1.b@b:" + labs[1].Members[0].URL(),
		"m1.c@c:" + labs[2].Members[0].URL(),
		"m1.default@default:" + labs[0].Members[0].URL(),
		"m2@c:" + labs[2].Members[1].URL(),
	}, " ")
	if got := fleet(nil); got != want {
		t.Fatalf("the fleet across three clusters:\n got %s\nwant %s", got, want)
	}
	if got := fleet("c"); got != "m1.c@c:"+labs[2].Members[0].URL()+" m2@c:"+labs[2].Members[1].URL() {
		t.Fatalf("the fleet of c: %s", got)
	}

	e.MustGQL(admin, `mutation { setPlacementGuard(input: {enabled: true, cluster: "c"}) { placementGuard { state } } }`, nil)
	clusters := func() string {
		var out []string
		for _, c := range e.MustGQL(admin, `{ clusters { name placementGuard { state } fencing { acting pausedCode } members { name } } }`, nil)["clusters"].([]any) {
			c := c.(map[string]any)
			f := c["fencing"].(map[string]any)
			out = append(out, fmt.Sprintf("%s %d members, guard %v, fencing acting=%v %v", c["name"], len(c["members"].([]any)),
				c["placementGuard"].(map[string]any)["state"], f["acting"], f["pausedCode"]))
		}
		return strings.Join(out, "; ")
	}
	// No worker runs here: each cluster says fencing is paused, and why.
	if got := clusters(); got != "b 1 members, guard OFF, fencing acting=false NO_FENCE_WORKER; c 2 members, guard ON, fencing acting=false NO_FENCE_WORKER; default 1 members, guard OFF, fencing acting=false NO_FENCE_WORKER" {
		t.Fatalf("the clusters: %s", got)
	}

	e.MustGQL(admin, removeClusterQuery, map[string]any{"in": map[string]any{"name": "b"}})
	if got, want := fleet(nil), strings.Join([]string{
		"m1.c@c:" + labs[2].Members[0].URL(),
		"m1.default@default:" + labs[0].Members[0].URL(),
		"m2@c:" + labs[2].Members[1].URL(),
	}, " "); got != want {
		t.Fatalf("the fleet once b is removed:\n got %s\nwant %s", got, want)
	}
}
