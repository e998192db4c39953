package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/oidcprovider"
	"github.com/apelora/fabric/testkit/producttest"
)

// Permissions scoped to clusters (issue 27.4), on two real Incus clusters on loopback: the
// one of APELORA_INCUS_* ("default") and rack2, registered through the API. An identity
// created through the API with manage-infrastructure in default only approves a machine
// of default (a real join token from default's incusd); the same step about rack2's
// machine is refused FORBIDDEN naming both clusters, audited once, in a dry run too, and
// issues nothing in rack2; moving a record to rack2 needs rack2 as well; registering a
// cluster needs the unscoped grant; every mutation about rack2 or about no cluster is
// refused (the gate walk, e2e/gate_test.go's, for this identity). In Chromium, the rack2
// machine's actions are disabled with the reason, default's are not.
func TestScopedIdentities(t *testing.T) {
	parallel(t, lasts(8), browser)
	node, dir := consoleTools(t)
	ctx := t.Context()
	lab := incuslab.Start(t, 1)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity()})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if r := e.RegisterCluster(admin, "rack2", rack2); len(r.Errors) > 0 {
		t.Fatalf("register rack2: %+v", r.Errors)
	}
	for name, cluster := range map[string]string{"a-node": "default", "a-two": "default", "b-node": "rack2", walkTarget: "rack2"} {
		e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": name, "provisioner": "MANUAL"}})
		e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = $2) WHERE name = $1 RETURNING name`, name, cluster)
	}

	// once checks r was refused with code saying says, with exactly one audit event, REFUSED.
	once := func(what string, r *producttest.Response, code, says string) {
		t.Helper()
		if r.Code() != code || !strings.Contains(r.Errors[0].Message, says) {
			t.Fatalf("%s: %+v, want %s saying %q", what, r.Errors, code, says)
		}
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1 AND outcome = 'REFUSED'`, r.Header.Get("X-Request-Id")); n != int64(1) {
			t.Fatalf("%s: %v REFUSED audit events, want 1 (all: %v)", what, n, e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1`, r.Header.Get("X-Request-Id")))
		}
	}

	const create = `mutation($in: CreateIdentityInput!) { createIdentity(input: $in) { token identity { name permissions grants { permission cluster } } } }`
	grant := func(p, c string) map[string]any { return map[string]any{"permission": p, "cluster": c} }
	once("a grant in a cluster not registered", e.GQL(admin, create, map[string]any{"in": map[string]any{"name": "typo", "permissions": []any{},
		"grants": []any{grant("MANAGE_INFRASTRUCTURE", "rack9")}}}), "NOT_FOUND", "manage-infrastructure@rack9")
	for _, bad := range []string{"", "rack\x00two", strings.Repeat("r", 300)} {
		once(fmt.Sprintf("a grant in cluster %q", bad), e.GQL(admin, create, map[string]any{"in": map[string]any{"name": "bad", "permissions": []any{},
			"grants": []any{grant("MANAGE_INFRASTRUCTURE", bad)}}}), "INVALID_INPUT", "names no cluster")
	}
	c := e.MustGQL(admin, create, map[string]any{"in": map[string]any{"name": "default-ops", "permissions": []any{},
		"grants": []any{grant("MANAGE_INFRASTRUCTURE", "default")}}})["createIdentity"].(map[string]any)
	scoped := c["token"].(string)
	if got := fmt.Sprint(c["identity"]); got != "map[grants:[map[cluster:default permission:MANAGE_INFRASTRUCTURE]] name:default-ops permissions:[]]" {
		t.Fatalf("created: %s", got)
	}
	// Its viewer says so (what the console reads), and it reads the whole fleet.
	v := e.MustGQL(scoped, `{ viewer { permissions grants { permission cluster } } fleet { machines { name } } }`, nil)
	if got := fmt.Sprint(v["viewer"]); got != "map[grants:[map[cluster:default permission:MANAGE_INFRASTRUCTURE]] permissions:[]]" {
		t.Fatalf("viewer: %s", got)
	}
	if got := fmt.Sprint(v["fleet"]); !strings.Contains(got, "b-node") || !strings.Contains(got, "a-node") {
		t.Fatalf("a scoped identity reads the whole fleet: %s", got)
	}

	// Allowed in default: a real join token from default's incusd.
	a := e.MustGQL(scoped, approveInClusterQuery, map[string]any{"in": map[string]any{"name": "a-node"}})["approveEnrolment"].(map[string]any)
	if tok, _ := a["joinToken"].(string); tok == "" {
		t.Fatalf("approving a-node in default: %v", a)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'approveEnrolment' AND machine = 'a-node' AND outcome = 'SUCCEEDED' AND actor = 'default-ops'`); n != int64(1) {
		t.Fatalf("%v successful approvals of a-node audited, want 1", n)
	}

	// The same step about rack2's machine: refused, audited once, nothing issued in rack2.
	before := e.Snapshot()
	once("approve b-node", e.GQL(scoped, approveInClusterQuery, map[string]any{"in": map[string]any{"name": "b-node"}}),
		"FORBIDDEN", "may manage default only; b-node is in rack2: ask an administrator to grant manage-infrastructure@rack2")
	dry := e.GQL(scoped, approveInClusterQuery, map[string]any{"in": map[string]any{"name": "b-node", "dryRun": true}})
	p, _ := dry.Data["approveEnrolment"].(map[string]any)["plan"].(map[string]any)
	if len(dry.Errors) > 0 || p["refused"] != true || !strings.Contains(fmt.Sprint(p["refusals"]), "code:FORBIDDEN message:you (identity \"default-ops\") may manage default only; b-node is in rack2") {
		t.Fatalf("the plan of approving b-node: %+v %v", dry.Errors, p)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1 AND outcome = 'REFUSED'`, dry.Header.Get("X-Request-Id")); n != int64(1) {
		t.Fatalf("the refused plan: %v REFUSED audit events, want 1", n)
	}
	// Moving a record of default to rack2 acts in both: refused for want of rack2.
	move := e.GQL(scoped, approveInClusterQuery, map[string]any{"in": map[string]any{"name": "a-two", "cluster": "rack2"}})
	once("move a-two to rack2", move, "FORBIDDEN", "may manage default only; a-two would move from default to rack2")
	if got := e.Scalar(`SELECT details->>'clusters' FROM audit_events WHERE request_id = $1`, move.Header.Get("X-Request-Id")); got != `["default", "rack2"]` {
		t.Fatalf("the refused move's event checked clusters %v, want default and rack2", got)
	}
	once("register a cluster", e.GQL(scoped, registerClusterQuery, map[string]any{"in": map[string]any{"name": "rack3", "url": rack2.URL, "clusterCertificate": rack2.ClusterCertificatePEM()}}),
		"FORBIDDEN", "may manage default only; registerCluster is about no cluster")
	if after := e.Snapshot(); after != before {
		t.Fatalf("refused steps changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if pending, err := rack2.Client(t, rack2.Members[0]).PendingJoinTokens(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("rack2's pending join tokens: %+v %v", pending, err)
	}

	// Every mutation, as the gate walk calls it (its machine, walk-target, is rack2's; its
	// system id and rolling reboot name no record): refused FORBIDDEN, once, nothing changed.
	for _, call := range everyMutation(t) {
		before := e.Snapshot()
		r := e.GQL(scoped, call.query, nil)
		once(call.field, r, "FORBIDDEN", "may manage default only")
		if e.Snapshot() != before {
			t.Fatalf("%s: a refused call changed the database", call.field)
		}
	}

	runScript(t, node, dir, "scopes.e2e.mjs", map[string]string{
		"BASE": e.Base, "TOKEN": scoped, "SHOTS": shotsDir(t, "scopes"),
	})
}

// SSO group mappings grant in one cluster too (permission@cluster): a user of rack1-ops
// signs in through a real OpenID provider with manage-infrastructure in rack1 only (the
// grant naming rack9, not registered, skipped with a warning); it changes rack1's machine
// and is refused FORBIDDEN, once audited, for a machine of another cluster.
func TestSSOGroupGrantsInClusters(t *testing.T) {
	parallel(t)
	groups, err := identity.ParseGroupPermissions("rack1-ops=manage-infrastructure@rack1,manage-infrastructure@rack9;ops-viewers=view-infrastructure")
	if err != nil {
		t.Fatal(err)
	}
	idp := oidcprovider.Start(t)
	e := producttest.Start(t, producttest.WithSSO(idp.Issuer, "apelora", "apelora-secret", groups))
	idp.AddClient("apelora", "apelora-secret", e.Base+server.SSOCallbackPath)
	idp.AddUser("rosa", "rack1-ops")
	s := &ssoEnv{Env: e, idp: idp}
	admin := e.Identity("admin", identity.ManageInfrastructure)
	// Two cluster records, reached through sockets that do not exist: a permission's check
	// reads the records only (TestScopedIdentities has real clusters).
	for _, c := range []string{"rack1", "rack2"} {
		e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ($1, '/nonexistent/apelora-test/' || $1, true, 'test') RETURNING id`, c)
	}
	for name, cluster := range map[string]string{"r1-node": "rack1", "r2-node": "rack2"} {
		e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": name, "provisioner": "MANUAL"}})
		e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = $2) WHERE name = $1 RETURNING name`, name, cluster)
	}

	_, rosa := s.signInSSO(t, "rosa", "127.0.0.131")
	gql := func(query string) (map[string]any, []map[string]any, string) {
		t.Helper()
		resp, body := consoleRequest(t, http.MethodPost, e.Base+"/graphql", rosa, "application/json", query, nil)
		var out struct {
			Data   map[string]any
			Errors []map[string]any
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return out.Data, out.Errors, resp.Header.Get("X-Request-Id")
	}
	d, errs, _ := gql(`{"query":"{ viewer { name permissions grants { permission cluster } } }"}`)
	if got := fmt.Sprint(d["viewer"]); len(errs) > 0 || got != "map[grants:[map[cluster:rack1 permission:MANAGE_INFRASTRUCTURE]] name:rosa permissions:[]]" {
		t.Fatalf("rosa's viewer: %s %v", got, errs)
	}
	if !strings.Contains(e.Logs.String(), "manage-infrastructure@rack9") {
		t.Errorf("no warning names the skipped grant in rack9")
	}
	const assign = `{"query":"mutation($m: String!) { clearHardwareProfile(input: {machine: $m}) { machine { name } } }","variables":{"m":%q}}`
	if _, errs, _ := gql(fmt.Sprintf(assign, "r1-node")); len(errs) > 0 {
		t.Fatalf("a change to rack1's machine: %v", errs)
	}
	_, errs, rid := gql(fmt.Sprintf(assign, "r2-node"))
	if len(errs) != 1 || errs[0]["extensions"].(map[string]any)["code"] != "FORBIDDEN" || !strings.Contains(errs[0]["message"].(string), "may manage rack1 only; r2-node is in rack2") {
		t.Fatalf("a change to rack2's machine: %v", errs)
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1 AND outcome = 'REFUSED' AND actor = 'rosa'`, rid); n != int64(1) {
		t.Fatalf("%v REFUSED events for the refused change, want 1", n)
	}
}

// Erasing disks on release needs hardware.delete in the machine's cluster (with the
// simulated MAAS over real HTTP): an identity that may manage default and rack2 but erase
// in rack2 only is refused erasing default's machine (in a dry run as its plan, and for
// real), audited once each, and MAAS is asked nothing; one with hardware.delete in default
// releases it with erase.
func TestScopedEraseOnRelease(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "node-busy", "provisioner": "MAAS", "maasSystemId": "dddd04"}})
	e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = 'default') WHERE name = 'node-busy' RETURNING name`)
	// rack2's record only (a permission's check reads records, not the cluster).
	e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack2', '/nonexistent/apelora-test/rack2', true, 'test') RETURNING id`)

	const create = `mutation($in: CreateIdentityInput!) { createIdentity(input: $in) { token } }`
	grant := func(p, c string) map[string]any { return map[string]any{"permission": p, "cluster": c} }
	token := func(name string, grants ...any) string {
		return e.MustGQL(admin, create, map[string]any{"in": map[string]any{"name": name, "permissions": []any{}, "grants": grants}})["createIdentity"].(map[string]any)["token"].(string)
	}
	elsewhere := token("rack2-eraser", grant("MANAGE_INFRASTRUCTURE", "default"), grant("MANAGE_INFRASTRUCTURE", "rack2"), grant("HARDWARE_DELETE", "rack2"))
	here := token("default-eraser", grant("MANAGE_INFRASTRUCTURE", "default"), grant("HARDWARE_DELETE", "default"))

	const release = `mutation($in: ReleaseMachineInput!) { releaseMachine(input: $in) { erase { requested effective } plan { refused refusals { code message } } } }`
	const says = `may erase disks (hardware.delete) in rack2 only; node-busy is in default: ask an administrator to grant hardware.delete@default`
	dry := e.GQL(elsewhere, release, map[string]any{"in": map[string]any{"systemId": "dddd04", "erase": true, "dryRun": true}})
	p, _ := dry.Data["releaseMachine"].(map[string]any)["plan"].(map[string]any)
	if len(dry.Errors) > 0 || p["refused"] != true || !strings.Contains(fmt.Sprint(p["refusals"]), says) {
		t.Fatalf("the plan of erasing default's machine with hardware.delete in rack2 only: %+v %v", dry.Errors, p)
	}
	real := e.GQL(elsewhere, release, map[string]any{"in": map[string]any{"systemId": "dddd04", "erase": true}})
	if real.Code() != "FORBIDDEN" || !strings.Contains(real.Errors[0].Message, says) {
		t.Fatalf("erasing default's machine with hardware.delete in rack2 only: %+v", real.Errors)
	}
	for _, r := range []*producttest.Response{dry, real} {
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1 AND outcome = 'REFUSED'`, r.Header.Get("X-Request-Id")); n != int64(1) {
			t.Fatalf("%v REFUSED events for a refused erase, want 1", n)
		}
	}
	for _, req := range m.Requests() {
		if req.Op == "release" {
			t.Fatalf("MAAS was asked to release: %+v", req)
		}
	}
	ok := e.GQL(here, release, map[string]any{"in": map[string]any{"systemId": "dddd04", "erase": true}})
	if len(ok.Errors) > 0 || fmt.Sprint(ok.Data["releaseMachine"].(map[string]any)["erase"]) != "map[effective:true requested:true]" {
		t.Fatalf("release with erase by hardware.delete in default: %+v %v", ok.Errors, ok.Data)
	}
	if s, _ := m.Machine("dddd04"); !s.LastRelease.Erase {
		t.Fatalf("MAAS was asked %+v", s.LastRelease)
	}
}

// A fence mapping powers off the MAAS machine it names: mapping a member of a cluster an
// identity manages to the hardware of another cluster's machine would let it power that
// machine off (the worker's fence, a rolling reboot's POWER_OFF). setFenceMapping
// therefore acts in the cluster of the system id's machine record too: an identity that
// may manage default only is refused mapping a default member to rack2's machine, however
// the system id is spelled (surrounding blanks too), audited once each, and no mapping
// is written; a system id with no record stays mappable in default (with the simulated MAAS
// over real HTTP; rack2 is a record only: mapping asks no Incus).
func TestScopedFenceMappingNamesTheMachinesCluster(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	// rack2's record only (a permission's check reads records, not the cluster).
	e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack2', '/nonexistent/apelora-test/rack2', true, 'test') RETURNING id`)
	e.MustGQL(admin, registerQuery, map[string]any{"input": map[string]any{"name": "node-busy", "provisioner": "MAAS", "maasSystemId": "dddd04"}})
	e.Scalar(`UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE name = 'rack2') WHERE name = 'node-busy' RETURNING name`)

	const create = `mutation($in: CreateIdentityInput!) { createIdentity(input: $in) { token } }`
	scoped := e.MustGQL(admin, create, map[string]any{"in": map[string]any{"name": "default-ops", "permissions": []any{},
		"grants": []any{map[string]any{"permission": "MANAGE_INFRASTRUCTURE", "cluster": "default"}}}})["createIdentity"].(map[string]any)["token"].(string)

	const set = `mutation($in: SetFenceMappingInput!) { setFenceMapping(input: $in) { mapping { member cluster maasSystemId } plan { refused } } }`
	for _, sid := range []string{"dddd04", " dddd04", "dddd04\t"} {
		for _, dry := range []bool{true, false} {
			r := e.GQL(scoped, set, map[string]any{"in": map[string]any{"member": "intruder", "cluster": "default", "maasSystemId": sid,
				"hardwareUuid": "4c4c4544-0042-3510-8052-b7c04f4e0004", "dryRun": dry}})
			if sid == "dddd04" {
				// The refusal says why rack2: the machine it would power off is there.
				says := fmt.Sprint(r.Errors) + fmt.Sprint(r.Data)
				if dry {
					says = fmt.Sprint(e.Scalar(`SELECT error FROM audit_events WHERE request_id = $1`, r.Header.Get("X-Request-Id")))
				}
				if !strings.Contains(says, "may manage default only; MAAS machine dddd04 is in rack2") {
					t.Fatalf("the refusal of mapping to rack2's machine (dry run %t) says: %s", dry, says)
				}
			}
			refused := len(r.Errors) > 0 && (r.Code() == "FORBIDDEN" || r.Code() == "INVALID_INPUT")
			if !refused && dry {
				p, _ := r.Data["setFenceMapping"].(map[string]any)["plan"].(map[string]any)
				refused = p != nil && p["refused"] == true
			}
			if !refused {
				t.Fatalf("mapping a default member to rack2's machine %q (dry run %t) by an identity of default: %+v %v", sid, dry, r.Errors, r.Data)
			}
			// Refused for permission (REFUSED) or, spelled with blanks, as invalid input
			// (FAILED; a plan of a caller the gate allowed is not an event): never a mapping.
			want := int64(1)
			if dry && r.Code() == "INVALID_INPUT" {
				want = 0
			}
			if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE request_id = $1 AND outcome IN ('REFUSED', 'FAILED')`, r.Header.Get("X-Request-Id")); n != want {
				t.Fatalf("%v refusals audited for system id %q (dry run %t), want %d: %v", n, sid, dry, want, e.Scalar(`SELECT string_agg(outcome, ',') FROM audit_events WHERE request_id = $1`, r.Header.Get("X-Request-Id")))
			}
		}
	}
	if n := e.Scalar(`SELECT count(*) FROM fence_mappings`); n != int64(0) {
		t.Fatalf("%v fence mappings written", n)
	}
	ok := e.GQL(scoped, set, map[string]any{"in": map[string]any{"member": "a-member", "cluster": "default", "maasSystemId": "aaaa01",
		"hardwareUuid": uuidA}})
	if len(ok.Errors) > 0 || fmt.Sprint(ok.Data["setFenceMapping"]) != "map[mapping:map[cluster:default maasSystemId:aaaa01 member:a-member] plan:<nil>]" {
		t.Fatalf("mapping a default member to a machine with no record: %+v %v", ok.Errors, ok.Data)
	}
}
