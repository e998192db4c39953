package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// TestAMemberNamedLikeAnotherClustersMachine: a member name is unique within its cluster
// only (issue 27.2). With machine m1 recorded in default, rack2's member m1 (no record of
// its own) is still reached by naming rack2: its evacuation plans and runs in rack2 (its
// targets rack2's, default's m1 untouched), and its restore brings it back; leaving the
// cluster out means the machine m1, in default.
func TestAMemberNamedLikeAnotherClustersMachine(t *testing.T) {
	parallel(t, lasts(4))
	labA, labB := twoLabs(t, 2)
	e := producttest.Start(t, producttest.WithIncus(labA.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if r := e.RegisterCluster(admin, "rack2", labB); len(r.Errors) > 0 {
		t.Fatalf("register rack2: %+v", r.Errors)
	}
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "m1", "provisioner": "MANUAL"}})
	e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = 'default') WHERE name = 'm1' RETURNING name`)

	const evacuate = `mutation($c: String, $dry: Boolean) { evacuateMember(input: {name: "m1", cluster: $c, dryRun: $dry}) {
		task { id } plan { refused refusals { code message } facts { name value } } } }`
	plan := e.MustGQL(admin, evacuate, map[string]any{"c": "rack2", "dry": true})["evacuateMember"].(map[string]any)["plan"].(map[string]any)
	if plan["refused"] != false || !strings.Contains(fmt.Sprint(plan["facts"]), "rack2") {
		t.Fatalf("the plan of evacuating rack2's m1: %v", plan)
	}
	// Left out, the cluster is the machine m1's: default.
	plan = e.MustGQL(admin, evacuate, map[string]any{"dry": true})["evacuateMember"].(map[string]any)["plan"].(map[string]any)
	if facts := fmt.Sprint(plan["facts"]); strings.Contains(facts, "rack2") || !strings.Contains(facts, "default") {
		t.Fatalf("the plan of evacuating the machine m1: %v", plan)
	}

	e.MustGQL(admin, evacuate, map[string]any{"c": "rack2"})
	ctx := context.Background()
	b, a := labB.Client(t, labB.Members[0]), labA.Client(t, labA.Members[0])
	waitFor(t, "rack2's m1 evacuated", func() bool {
		m, _, err := b.Member(ctx, "m1")
		return err == nil && m.Status == incus.MemberEvacuated
	})
	if m, _, err := a.Member(ctx, "m1"); err != nil || m.Status != incus.MemberOnline {
		t.Fatalf("default's m1 after rack2's was evacuated: %+v %v", m.Status, err)
	}
	e.MustGQL(admin, `mutation { restoreMember(input: {name: "m1", cluster: "rack2"}) { task { id } } }`, nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, _, err := b.Member(ctx, "m1")
		if err == nil && m.Status == incus.MemberOnline {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rack2's m1 not back online after its restore: %+v %v", m.Status, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
