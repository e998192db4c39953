package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// A member name is unique within its cluster only (issue 27.2): machine m1 of default and
// a member m1 of rack2 (no record: its fleet row is m1.rack2) each have their own
// maintenance tasks. maintenanceTasks takes a fleet row's name: "m1" lists the tasks of
// the record's member in the record's cluster only, "m1.rack2" those of rack2's m1; a
// name that is no row's and no registered cluster's stays INVALID_INPUT. The tasks are
// rows as maintenance records them (cluster_id), on a real PostgreSQL behind the API.
func TestMaintenanceTasksOfSameNamedMembers(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack2', '/nonexistent/apelora-test/rack2', true, 'test') RETURNING id`)
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "m1", "provisioner": "MANUAL"}})
	e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = 'default') WHERE name = 'm1' RETURNING name`)
	for _, c := range []string{"default", "rack2"} {
		e.Scalar(`INSERT INTO member_operations (machine, action, incus_operation, started_by, cluster_id, finished_at, outcome)
			VALUES ('m1', 'evacuate', 'op-' || $1, 'admin', (SELECT id FROM clusters WHERE name = $1), clock_timestamp(), 'SUCCEEDED') RETURNING id`, c)
	}
	// The API learns of rack2 from NOTIFY clusters.
	waitFor(t, "the API to list rack2", func() bool {
		return strings.Contains(fmt.Sprint(e.MustGQL(admin, `{ clusters { name } }`, nil)["clusters"]), "rack2")
	})
	const q = `query($n: String!) { maintenanceTasks(name: $n) { incusOperation } }`
	for name, want := range map[string]string{"m1": "[map[incusOperation:op-default]]", "m1.rack2": "[map[incusOperation:op-rack2]]", "m1.default": "[map[incusOperation:op-default]]"} {
		r := e.GQL(admin, q, map[string]any{"n": name})
		if got := fmt.Sprint(r.Data["maintenanceTasks"]); len(r.Errors) > 0 || got != want {
			t.Fatalf("maintenanceTasks(%q): %+v %s, want %s", name, r.Errors, got, want)
		}
	}
	for _, bad := range []string{"m1.rack9", "m1.", ".rack2", "m1.rack2.x"} {
		if r := e.GQL(admin, q, map[string]any{"n": bad}); r.Code() != "INVALID_INPUT" {
			t.Fatalf("maintenanceTasks(%q): %+v %v, want INVALID_INPUT", bad, r.Errors, r.Data)
		}
	}
}
