package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// What the console needed from the API: the audit trail filtered by actor and outcome, and
// which MAAS steps a machine's state allows.

func TestAuditEventsFilterByActorAndOutcome(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	reg := `mutation($n: String!) { registerMachine(input: {name: $n}) { machine { name } } }`
	e.MustGQL(admin, reg, map[string]any{"n": "node-1"})
	e.GQL(admin, reg, map[string]any{"n": "Bad_Name"})
	e.GQL(viewer, reg, map[string]any{"n": "node-2"})

	page := func(args string) []string {
		d := e.MustGQL(viewer, `{ auditEvents`+args+` { edges { node { actor action outcome machine } } } }`, nil)
		var out []string
		for _, edge := range d["auditEvents"].(map[string]any)["edges"].([]any) {
			n := edge.(map[string]any)["node"].(map[string]any)
			out = append(out, fmt.Sprintf("%s:%s:%s", n["actor"], n["machine"], n["outcome"]))
		}
		return out
	}
	for args, want := range map[string]string{
		`(first: 3)`:                           "viewer:node-2:REFUSED admin:Bad_Name:REFUSED admin:node-1:SUCCEEDED",
		`(actor: "admin")`:                     "admin:Bad_Name:REFUSED admin:node-1:SUCCEEDED",
		`(outcome: REFUSED)`:                   "viewer:node-2:REFUSED admin:Bad_Name:REFUSED",
		`(outcome: FAILED)`:                    "",
		`(actor: "admin", outcome: SUCCEEDED)`: "admin:node-1:SUCCEEDED",
		`(actor: "admin", machine: "node-2")`:  "",
		`(actor: "nobody")`:                    "",
		`(actor: "admin", first: 1)`:           "admin:Bad_Name:REFUSED",
	} {
		if got := strings.Join(page(args), " "); got != want {
			t.Errorf("auditEvents%s = %q, want %q", args, got, want)
		}
	}
	if r := e.GQL(viewer, `{ auditEvents(outcome: MAYBE) { edges { cursor } } }`, nil); len(r.Errors) == 0 {
		t.Error("an unknown outcome was accepted")
	}
}

func TestMachinesSayWhichMAASStepsTheirStateAllows(t *testing.T) {
	parallel(t)
	m := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	steps := func(name string) map[string]string {
		d := e.MustGQL(admin, `query($n: String!) { machine(name: $n) { maasSteps { step allowed reason } } }`, map[string]any{"n": name})
		out := map[string]string{}
		for _, s := range d["machine"].(map[string]any)["maasSteps"].([]any) {
			s := s.(map[string]any)
			if s["allowed"] == true {
				out[s["step"].(string)] = "allowed"
			} else {
				out[s["step"].(string)] = s["reason"].(string)
			}
		}
		return out
	}
	a := steps("node-a") // Ready, not registered: no step before a record
	for _, s := range []string{"COMMISSION", "INSTALL", "HARDWARE_TESTS", "RELEASE"} {
		if !strings.Contains(a[s], "register it first") {
			t.Fatalf("node-a (not registered): %v", a)
		}
	}
	if r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-busy", provisioner: MAAS, maasSystemId: "dddd04"}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	busy := steps("node-busy") // Deployed
	if !strings.Contains(busy["HARDWARE_TESTS"], "release it first") || !strings.Contains(busy["COMMISSION"], "commissions only") {
		t.Fatalf("node-busy: %v", busy)
	}
	// The step itself refuses with the same words.
	r := e.GQL(admin, `mutation { runHardwareTests(input: {systemId: "dddd04", hostname: "node-busy"}) { maas { status } } }`, nil)
	if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, busy["HARDWARE_TESTS"]) {
		t.Fatalf("runHardwareTests on node-busy: %+v, the fleet said %q", r.Errors, busy["HARDWARE_TESTS"])
	}
	reg := e.MustGQL(admin, `{ machine(name: "node-a") { record { name } } }`, nil)
	if reg["machine"].(map[string]any)["record"] != nil {
		t.Fatal("node-a has a record")
	}
	manual := e.MustGQL(admin, `mutation { registerMachine(input: {name: "manual-1"}) { machine { maasSteps { step } } } }`, nil)
	if s := manual["registerMachine"].(map[string]any)["machine"].(map[string]any)["maasSteps"].([]any); len(s) != 0 {
		t.Fatalf("a machine MAAS does not report has MAAS steps: %v", s)
	}
}

// Signing out of a console session closes that session's websockets at once, with 4403
// and the reason, and no other: the identity's other session, and its bearer token's
// sockets, go on.
func TestConsoleSignOutClosesTheSessionsWebsockets(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	ws := strings.Replace(e.Base, "http", "ws", 1) + "/graphql"
	open := func(hdr http.Header, payload map[string]any) *websocket.Conn {
		t.Helper()
		d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		conn, _, err := d.Dial(ws, hdr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": payload}); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, msg, err := conn.ReadMessage(); err != nil || !bytes.Contains(msg, []byte("connection_ack")) {
			t.Fatalf("connection_init: %s %v", msg, err)
		}
		return conn
	}
	// alive: the socket still answers a ping.
	alive := func(conn *websocket.Conn) bool {
		if err := conn.WriteJSON(map[string]any{"type": "ping"}); err != nil {
			return false
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, msg, err := conn.ReadMessage()
		return err == nil && bytes.Contains(msg, []byte("pong"))
	}
	cookie := func(c *http.Cookie) http.Header {
		return http.Header{"Cookie": {"apelora_session=" + c.Value}, "Origin": {e.Base}}
	}
	a, b := signIn(t, e, admin), signIn(t, e, admin)
	sockA1, sockA2 := open(cookie(a), map[string]any{}), open(cookie(a), map[string]any{})
	sockB := open(cookie(b), map[string]any{})
	sockToken := open(http.Header{"Origin": {e.Base}}, map[string]any{"Authorization": "Bearer " + admin})

	resp, _ := consoleRequest(t, http.MethodDelete, e.Base+"/api/v1/session", a.Value, "", "", map[string]string{"Origin": e.Base})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	for _, conn := range []*websocket.Conn{sockA1, sockA2} {
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, _, err := conn.ReadMessage()
		ce, ok := err.(*websocket.CloseError)
		if !ok || ce.Code != 4403 || !strings.Contains(ce.Text, "session has ended") {
			t.Fatalf("a signed-out session's socket ended with %v, want 4403 and the reason", err)
		}
	}
	if !alive(sockB) || !alive(sockToken) {
		t.Fatal("signing out of one session closed another session's socket, or a token's")
	}
	if n := e.Scalar(`SELECT count(*) FROM console_sessions`).(int64); n != 1 {
		t.Fatalf("%d sessions stored after one of two signed out", n)
	}
}

// Identity.revokeRefusal is the refusal revokeIdentity would answer with, so the console
// shows the server's reason beside a disabled Revoke.
func TestIdentitiesSayWhyTheyCannotBeRevoked(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.Identity("viewer", identity.ViewInfrastructure)
	refusals := func() map[string]any {
		d := e.MustGQL(admin, `{ identities { name revokeRefusal } viewer { revokeRefusal } }`, nil)
		out := map[string]any{"(viewer)": d["viewer"].(map[string]any)["revokeRefusal"]}
		for _, i := range d["identities"].([]any) {
			i := i.(map[string]any)
			out[i["name"].(string)] = i["revokeRefusal"]
		}
		return out
	}
	r := refusals()
	last, _ := r["admin"].(string)
	if !strings.Contains(last, `"admin" is the last active one with manage-infrastructure`) || r["(viewer)"] != last || r["viewer"] != nil {
		t.Fatalf("refusals: %v", r)
	}
	// The refusal is the one revoking meets.
	if res := e.GQL(admin, `mutation { revokeIdentity(input: {name: "admin"}) { identity { name } } }`, nil); len(res.Errors) == 0 || res.Errors[0].Message != last {
		t.Fatalf("revoking the last manager: %+v, the list said %q", res.Errors, last)
	}
	// With a second manager both may go; once revoked, the refusal says so.
	e.MustGQL(admin, `mutation { createIdentity(input: {name: "ops", permissions: [MANAGE_INFRASTRUCTURE]}) { token } }`, nil)
	if r := refusals(); r["admin"] != nil || r["ops"] != nil {
		t.Fatalf("with two managers: %v", r)
	}
	e.MustGQL(admin, `mutation { revokeIdentity(input: {name: "viewer"}) { identity { name } } }`, nil)
	if s, _ := refusals()["viewer"].(string); !strings.Contains(s, "already revoked") {
		t.Fatalf("a revoked identity's refusal: %q", s)
	}
}

// maasImages lists the OS images MAAS holds (boot-resources/, which MAAS lets any user
// read), so the console offers the series an install may name. The key here belongs to a
// MAAS user without admin rights, as the README asks.
func TestMAASImagesAreListedForAReadOnlyKey(t *testing.T) {
	parallel(t)
	key := sim.NewAPIKey()
	fx := maasFleet()
	fx.Config["synced_series"] = []any{"jammy", "noble"}
	s, err := sim.New(sim.Options{Users: []sim.User{{Username: "apelora", APIKey: key}}, Fixture: fx})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.ListenTLS("127.0.0.1:0", sim.TLSSelfSignedLeaf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	ca := filepath.Join(t.TempDir(), "maas.pem")
	if err := os.WriteFile(ca, ep.Certs.LeafPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	e := producttest.Start(t, producttest.WithMAAS(maas.Config{BaseURL: ep.BaseURL, APIKey: key, CAFile: ca}))
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	d := e.MustGQL(viewer, `{ maasImages { name os release kind architectures } }`, nil)
	got := fmt.Sprint(d["maasImages"])
	want := "[map[architectures:[amd64/ga-22.04] kind:SYNCED name:ubuntu/jammy os:ubuntu release:jammy] " +
		"map[architectures:[amd64/ga-24.04] kind:SYNCED name:ubuntu/noble os:ubuntu release:noble]]"
	if got != want {
		t.Fatalf("maasImages = %s\nwant          %s (bootloaders left out)", got, want)
	}
	ep.Close()
	if r := e.GQL(viewer, `{ maasImages { name } }`, nil); r.Code() != "UNAVAILABLE" {
		t.Fatalf("maasImages with MAAS stopped: %+v", r.Errors)
	}
	without := producttest.Start(t)
	if r := without.GQL(without.Identity("viewer", identity.ViewInfrastructure), `{ maasImages { name } }`, nil); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("maasImages without MAAS: %+v", r.Errors)
	}
}
