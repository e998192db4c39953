package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// Reads scoped to clusters (issue 27 item 4, design §6 and D5), on two real Incus
// clusters on loopback (one member each) and the simulated MAAS: an identity granted
// view-infrastructure@default only reads default's rows in fleet, machine, machines,
// clusters and fleetUpdates (hiddenrack's record and member, and the MAAS machines no
// record or member claims, are not there), and in rollingReboot, maintenanceTasks,
// admissionReport, drift(machine:), fenceMappings, fenceEvents(cluster:) and
// fenceProgress; it is refused FORBIDDEN identities, hardware profiles, MAAS images and
// the audit checkpoint and proofs. Then every Query and Subscription field of the
// schema, asked for every field of its answer: each is either refused FORBIDDEN or
// answers nothing of hiddenrack.
func TestReadScopedIdentity(t *testing.T) {
	parallel(t, lasts(4))
	lab := incuslab.Start(t, 1)
	hidden := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity()})
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if r := e.RegisterCluster(admin, "hiddenrack", hidden); len(r.Errors) > 0 {
		t.Fatalf("register hiddenrack: %+v", r.Errors)
	}
	for name, cluster := range map[string]string{"seen-node": "default", "hidden-node": "hiddenrack"} {
		e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": name, "provisioner": "MANUAL"}})
		e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = $2) WHERE name = $1 RETURNING name`, name, cluster)
	}
	// A fence mapping and a fence event in each cluster (hiddenrack's event first, so a
	// replay that leaked it would send it first).
	for _, f := range []struct{ cluster, member, systemID, uuid string }{
		{"hiddenrack", hidden.Members[0].Name, "nnnn03", "4c4c4544-0042-3510-8052-b7c04f4e0003"},
		{"default", lab.Members[0].Name, "aaaa01", uuidA},
	} {
		e.Scalar(`INSERT INTO fence_mappings (cluster_id, member, maas_system_id, hardware_uuid, set_by, set_at)
			SELECT id, $2, $3, $4, 'test', now() FROM clusters WHERE name = $1 RETURNING member`, f.cluster, f.member, f.systemID, f.uuid)
		e.Scalar(`INSERT INTO fence_events (cluster_id, at, member, kind, message, worker)
			SELECT id, now(), $2, 'OFFLINE', 'offline in ' || $1, 'test' FROM clusters WHERE name = $1 RETURNING id`, f.cluster, f.member)
	}
	// A finished rolling reboot in each cluster, hiddenrack's the latest.
	for _, cl := range []string{"default", "hiddenrack"} {
		e.Scalar(`INSERT INTO rolling_operations (cluster_id, members, state, reason, started_by, finished_at)
			SELECT id, ARRAY['m1'], 'CANCELLED', 'cancelled in ' || $1, 'test', now() FROM clusters WHERE name = $1 RETURNING id`, cl)
	}
	// A finished evacuation of each cluster's member (both named as the lab names them).
	for _, f := range []struct{ cluster, member string }{{"hiddenrack", hidden.Members[0].Name}, {"default", lab.Members[0].Name}} {
		e.Scalar(`INSERT INTO member_operations (cluster_id, machine, action, incus_operation, started_by, finished_at, outcome, message)
			SELECT id, $2, 'evacuate', 'op-' || $1, 'test', now(), 'SUCCEEDED', 'evacuated in ' || $1 FROM clusters WHERE name = $1 RETURNING id`, f.cluster, f.member)
	}
	const create = `mutation($in: CreateIdentityInput!) { createIdentity(input: $in) { token identity { permissions grants { permission cluster } } } }`
	c := e.MustGQL(admin, create, map[string]any{"in": map[string]any{"name": "default-viewer", "permissions": []any{},
		"grants": []any{map[string]any{"permission": "VIEW_INFRASTRUCTURE", "cluster": "default"}}}})["createIdentity"].(map[string]any)
	viewer := c["token"].(string)
	if got := fmt.Sprint(c["identity"]); got != "map[grants:[map[cluster:default permission:VIEW_INFRASTRUCTURE]] permissions:[]]" {
		t.Fatalf("created: %s", got)
	}
	// What an administrator reading everything sees, for contrast.
	all := e.MustGQL(admin, `{ fleet { machines { name } } }`, nil)
	if got := fmt.Sprint(all); !strings.Contains(got, "hidden-node") || !strings.Contains(got, "node-new") {
		t.Fatalf("the whole fleet: %s", got)
	}

	// fleet: default's rows only, each naming default; sources of default only.
	f := e.MustGQL(viewer, `{ fleet { machines { name cluster { name } } sources { incus { available } clusters { cluster { name } } } } }`, nil)["fleet"].(map[string]any)
	var names []string
	for _, r := range f["machines"].([]any) {
		row := r.(map[string]any)
		names = append(names, row["name"].(string))
		if fmt.Sprint(row["cluster"]) != "map[name:default]" {
			t.Fatalf("a row of the read-scoped fleet is not default's: %v", row)
		}
	}
	if !slices.Contains(names, "seen-node") || slices.Contains(names, "hidden-node") || slices.Contains(names, "node-new") {
		t.Fatalf("the read-scoped fleet has %v: want seen-node and default's member, without hiddenrack's or MAAS's unclaimed machines", names)
	}
	if got := fmt.Sprint(f["sources"]); got != "map[clusters:[map[cluster:map[name:default]]] incus:map[available:true]]" {
		t.Fatalf("sources: %s", got)
	}
	if got := e.MustGQL(viewer, `{ fleet(cluster: "hiddenrack") { machines { name } } }`, nil); fmt.Sprint(got) != "map[fleet:map[machines:[]]]" {
		t.Fatalf("fleet(cluster: hiddenrack): %v", got)
	}
	// machine: default's is read; hiddenrack's is no machine.
	if got := e.MustGQL(viewer, `{ a: machine(name: "seen-node") { name } b: machine(name: "hidden-node") { name } }`, nil); fmt.Sprint(got) != "map[a:map[name:seen-node] b:<nil>]" {
		t.Fatalf("machine: %v", got)
	}
	// clusters: default only; naming hiddenrack is NOT_FOUND.
	if got := e.MustGQL(viewer, `{ clusters { name members { name } } }`, nil); !strings.HasPrefix(fmt.Sprint(got), "map[clusters:[map[members:[") || strings.Contains(fmt.Sprint(got), "hiddenrack") {
		t.Fatalf("clusters: %v", got)
	}
	if r := e.GQL(viewer, `{ clusters(names: ["hiddenrack"]) { name } }`, nil); r.Code() != "NOT_FOUND" {
		t.Fatalf("clusters(names: [hiddenrack]): %+v", r)
	}
	// machines as fleet; rollingReboot: default's by cluster, hiddenrack's (the latest) none.
	if got := fmt.Sprint(e.MustGQL(viewer, `{ machines { name } }`, nil)); !strings.Contains(got, "seen-node") || strings.Contains(got, "hidden") || strings.Contains(got, "node-new") {
		t.Fatalf("machines: %s", got)
	}
	if got := fmt.Sprint(e.MustGQL(viewer, `{ a: rollingReboot(cluster: "default") { state } latest: rollingReboot { state } b: rollingReboot(cluster: "hiddenrack") { state } }`, nil)); got != "map[a:map[state:CANCELLED] b:<nil> latest:<nil>]" {
		t.Fatalf("rollingReboot: %s", got)
	}
	if got := fmt.Sprint(e.MustGQL(admin, `{ rollingReboot { state } }`, nil)); got != "map[rollingReboot:map[state:CANCELLED]]" {
		t.Fatalf("the latest rolling reboot, for an administrator: %s", got)
	}
	// One machine's admission report and drift: of default's machine only, and the refusal
	// does not tell hiddenrack's machine from none.
	for _, q := range []string{`{ admissionReport(name: "hidden-node") { verdict } }`, `{ admissionReport(name: "no-such-node") { verdict } }`,
		`{ drift(machine: "hidden-node") { check } }`, `{ drift { check } }`} {
		if r := e.GQL(viewer, q, nil); r.Code() != "FORBIDDEN" || !strings.Contains(r.Errors[0].Message, "clusters you read") && !strings.Contains(r.Errors[0].Message, "give drift the machine") {
			t.Fatalf("%s: %+v, want FORBIDDEN", q, r.Errors)
		}
	}
	if got := fmt.Sprint(e.MustGQL(viewer, `{ drift(machine: "seen-node") { check } }`, nil)); got != "map[drift:[]]" {
		t.Fatalf("drift of seen-node: %s", got)
	}
	if r := e.GQL(viewer, `{ admissionReport(name: "seen-node") { machine } }`, nil); r.Code() == "FORBIDDEN" {
		t.Fatalf("admissionReport of default's seen-node: %+v", r.Errors)
	}
	// Maintenance tasks: default's only (an administrator sees hiddenrack's too, when the
	// members share their name).
	tasks := `query($n: String!) { maintenanceTasks(name: $n) { message } }`
	if got := fmt.Sprint(e.MustGQL(viewer, tasks, map[string]any{"n": lab.Members[0].Name})); got != "map[maintenanceTasks:[map[message:evacuated in default]]]" {
		t.Fatalf("maintenanceTasks of default's %s: %s", lab.Members[0].Name, got)
	}
	if hidden.Members[0].Name == lab.Members[0].Name {
		if got := fmt.Sprint(e.MustGQL(admin, tasks, map[string]any{"n": lab.Members[0].Name})); !strings.Contains(got, "evacuated in hiddenrack") {
			t.Fatalf("maintenanceTasks for an administrator: %s", got)
		}
	}
	// Fencing: default's mappings and events only; fenceEvents names one of its clusters.
	if got := e.MustGQL(viewer, `{ fenceMappings { maasSystemId } fenceEvents(cluster: "default") { edges { node { message } } } }`, nil); fmt.Sprint(got) !=
		"map[fenceEvents:map[edges:[map[node:map[message:offline in default]]]] fenceMappings:[map[maasSystemId:aaaa01]]]" {
		t.Fatalf("fencing as a reader of default: %v", got)
	}
	for _, q := range []string{`{ fenceEvents { edges { node { message } } } }`, `{ fenceEvents(cluster: "hiddenrack") { edges { node { message } } } }`} {
		if r := e.GQL(viewer, q, nil); r.Code() != "FORBIDDEN" || !strings.Contains(r.Errors[0].Message, "give fenceEvents the cluster of yours") {
			t.Fatalf("%s: %+v, want FORBIDDEN", q, r)
		}
	}
	if data, code := firstMessage(t, e.Base, viewer, `subscription { fenceProgress(after: "0") { message } }`, nil); code != "" || fmt.Sprint(data) != "map[fenceProgress:map[message:offline in default]]" {
		t.Fatalf("fenceProgress replayed %v %s first, want default's event", data, code)
	}
	// D5: refused, with what to ask for.
	for _, q := range []string{`{ identities { name } }`, `{ hardwareProfiles { name } }`, `{ maasImages { name } }`, `{ auditCheckpoint { treeSize } }`, `{ auditProof(id: "1") { leafIndex } }`} {
		if r := e.GQL(viewer, q, nil); r.Code() != "FORBIDDEN" || !strings.Contains(r.Errors[0].Message, "reads clusters default only") || len(r.Data) != 0 {
			t.Fatalf("%s: %+v, want FORBIDDEN", q, r)
		}
	}
	// The REST read of the fleet is refused (it is not scoped).
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.Base+"/api/v1/provisioners/maas/machines", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET the fleet: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Every Query field, every field of its answer.
	s := loadSchema(t)
	x := newSelector(s)
	required := map[string]any{"name": "hidden-node", "id": "1"}
	leaks := func(what string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		for _, secret := range []string{"hiddenrack", "hidden-node", "node-new", "node-busy", hidden.Members[0].Address} {
			if strings.Contains(string(b), secret) {
				t.Fatalf("%s answered %q to a reader of default only: %s", what, secret, b)
			}
		}
	}
	for _, kind := range []string{"Query", "Subscription"} {
		for _, fd := range schemaRootFields(s.Types[kind]) {
			in := map[string]any{}
			for _, a := range fd.Arguments {
				if a.Type.NonNull && a.DefaultValue == nil {
					in[a.Name] = required[a.Name]
				}
			}
			if fd.Name == "fenceProgress" {
				in["after"] = "0" // replayed at once, oldest (hiddenrack's) first
			}
			q, vars, err := x.call(kind, fd, in)
			if err != nil {
				t.Fatal(err)
			}
			var data any
			var code string
			if kind == "Query" {
				r := e.GQL(viewer, q, vars)
				data, code = r.Data, r.Code()
			} else {
				data, code = firstMessage(t, e.Base, viewer, q, vars)
			}
			switch {
			case code == "FORBIDDEN":
				if got := fmt.Sprint(data); got != "<nil>" && got != "map[]" && got != "map["+fd.Name+":<nil>]" {
					t.Fatalf("%s.%s: refused, yet answered %v", kind, fd.Name, data)
				}
			case code == "":
				leaks(kind+"."+fd.Name, data)
				if b, _ := json.Marshal(data); (fd.Name == "fleet" || fd.Name == "fleetUpdates" || fd.Name == "machines") && !strings.Contains(string(b), "seen-node") ||
					(fd.Name == "fenceMappings" || fd.Name == "fenceProgress") && !strings.Contains(string(b), "default") {
					t.Fatalf("%s.%s: default's rows are missing: %s", kind, fd.Name, b)
				}
			default:
				t.Fatalf("%s.%s: %s (want FORBIDDEN or a filtered answer)", kind, fd.Name, code)
			}
			t.Logf("%s.%s: %s", kind, fd.Name, map[bool]string{true: "refused", false: "filtered"}[code == "FORBIDDEN"])
		}
	}
}

// firstMessage subscribes with query over graphql-transport-ws and returns the first
// message's data and error code.
func firstMessage(t *testing.T, base, token, query string, vars map[string]any) (any, string) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second}
	conn, _, err := d.Dial(strings.Replace(base, "http", "ws", 1)+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatal(err)
	}
	var ack struct{ Type string }
	if err := conn.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %v %v", ack, err)
	}
	if err := conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		t.Fatal(err)
	}
	for {
		var msg struct {
			Type    string
			Payload json.RawMessage
		}
		if err := conn.ReadJSON(&msg); err != nil {
			t.Fatalf("%s: no message (%v)", query, err)
		}
		switch msg.Type {
		case "next":
			var p producttest.Response
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				t.Fatal(err)
			}
			var data any
			if p.Data != nil {
				data = p.Data
			}
			return data, p.Code()
		case "error":
			var errs []producttest.GQLError
			if err := json.Unmarshal(msg.Payload, &errs); err != nil || len(errs) == 0 {
				t.Fatalf("%s: error %s", query, msg.Payload)
			}
			c, _ := errs[0].Extensions["code"].(string)
			return nil, c
		case "ping":
			_ = conn.WriteJSON(map[string]any{"type": "pong"})
		}
	}
}
