package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// A member name is unique within its cluster only (issue 27.2): machine m1 of default and
// a member m1 of rack2 (no record: its fleet row is m1.rack2) each have their own
// maintenance tasks. maintenanceTasks and the maintenanceTask subscription take a fleet
// row's name: "m1" is the record's member in the record's cluster only, "m1.rack2" rack2's
// m1 (events stored and live alike); a name that is no row's and no registered cluster's
// stays INVALID_INPUT. The tasks and events are rows as maintenance records them
// (cluster_id), on a real PostgreSQL behind the API, its feed pushing them over a websocket.
func TestMaintenanceTasksOfSameNamedMembers(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack2', '/nonexistent/apelora-test/rack2', true, 'test') RETURNING id`)
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "m1", "provisioner": "MANUAL"}})
	e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = 'default') WHERE name = 'm1' RETURNING name`)
	task := map[string]any{}
	event := func(c, message string) {
		e.Scalar(`INSERT INTO member_operation_events (operation_id, machine, kind, message) VALUES ($1, 'm1', 'PROGRESS', $2) RETURNING id`, task[c], message)
	}
	for _, c := range []string{"default", "rack2"} {
		task[c] = e.Scalar(`INSERT INTO member_operations (machine, action, incus_operation, started_by, cluster_id, finished_at, outcome)
			VALUES ('m1', 'evacuate', 'op-' || $1, 'admin', (SELECT id FROM clusters WHERE name = $1), clock_timestamp(), 'SUCCEEDED') RETURNING id`, c)
		event(c, "stored in "+c)
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
	const sub = `subscription($n: String!, $a: ID) { maintenanceTask(name: $n, after: $a) { message } }`
	subs := map[string]*oldSubscriber{}
	for name, c := range map[string]string{"m1": "default", "m1.rack2": "rack2"} {
		subs[c] = subscribeAsAnOldClient(t, e.Base, admin, sub, map[string]any{"n": name, "a": "0"})
		if got := fmt.Sprint(subs[c].next(30 * time.Second)); got != "map[maintenanceTask:map[message:stored in "+c+"]]" {
			t.Fatalf("maintenanceTask(%q) replayed first %s", name, got)
		}
	}
	// Live: each hears its own member's next event only (the other's comes first).
	event("rack2", "live in rack2")
	event("default", "live in default")
	for _, c := range []string{"default", "rack2"} {
		if got := fmt.Sprint(subs[c].next(30 * time.Second)); got != "map[maintenanceTask:map[message:live in "+c+"]]" {
			t.Fatalf("the subscriber of %s's m1 heard %s", c, got)
		}
	}
	for _, bad := range []string{"m1.rack9", "m1.", ".rack2", "m1.rack2.x"} {
		if r := e.GQL(admin, q, map[string]any{"n": bad}); r.Code() != "INVALID_INPUT" {
			t.Fatalf("maintenanceTasks(%q): %+v %v, want INVALID_INPUT", bad, r.Errors, r.Data)
		}
	}
}
