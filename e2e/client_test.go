package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/gorilla/websocket"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

func TestGeneratedClientQueriesAndMutates(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	token := e.Identity("automation", identity.ManageInfrastructure)
	c := client.New(e.Base+"/graphql", token, nil)
	ctx := t.Context()

	desc := "rack 1"
	reg, err := client.RegisterMachine(ctx, c, client.RegisterMachineInput{Name: "node-1", Provisioner: client.ProvisionerKindManual, Description: &desc})
	if err != nil {
		t.Fatal(err)
	}
	if m := reg.RegisterMachine.Machine; m.Name != "node-1" || m.Record == nil || m.Record.RegisteredBy != "automation" || m.Record.Description != "rack 1" {
		t.Fatalf("registered %+v", m)
	}
	list, err := client.Machines(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Machines) != 1 || list.Machines[0].Name != "node-1" {
		t.Fatalf("machines = %+v", list.Machines)
	}
	one, err := client.Machine(ctx, c, "nope")
	if err != nil || one.Machine != nil {
		t.Fatalf("unknown machine = %+v, %v; want null", one.Machine, err)
	}
	_, err = client.RegisterMachine(ctx, c, client.RegisterMachineInput{Name: "node-1", Provisioner: client.ProvisionerKindManual})
	if err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("duplicate register: %v", err)
	}
	v, err := client.Viewer(ctx, c)
	if err != nil || v.Viewer.Name != "automation" {
		t.Fatalf("viewer = %+v, %v", v, err)
	}
	first, machine := 10, "node-1"
	events, err := client.AuditEvents(ctx, c, &first, nil, &machine)
	if err != nil || len(events.AuditEvents.Edges) != 2 {
		t.Fatalf("audit events = %+v, %v", events, err)
	}
}

// The server pings every interval over graphql-transport-ws and drops clients that do not
// answer within two. genqlient v0.8.1 alone dies on the first ping; through client.Dialer
// it answers and keeps going. This runs for many intervals, then proves events still flow.
func TestGeneratedClientSubscriptionSurvivesKeepAlive(t *testing.T) {
	parallel(t)
	const interval = 100 * time.Millisecond
	e := producttest.Start(t, producttest.WithPingInterval(interval))
	token := e.Identity("dashboard", identity.ManageInfrastructure)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	ws, err := client.NewWebSocket(e.Base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	machine := "node-7"
	events, _, err := client.AuditEventRecorded(ctx, ws, &machine, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatalf("subscription ended during %v of keep-alives: %v", 20*interval, err)
	case <-time.After(20 * interval):
	}

	c := client.New(e.Base+"/graphql", token, nil)
	if _, err := client.RegisterMachine(ctx, c, client.RegisterMachineInput{Name: "node-6", Provisioner: client.ProvisionerKindManual}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RegisterMachine(ctx, c, client.RegisterMachineInput{Name: machine, Provisioner: client.ProvisionerKindManual}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Errors != nil {
			t.Fatalf("event carries errors: %v", ev.Errors)
		}
		got := ev.Data.AuditEventRecorded
		if got.Action != "registerMachine" || got.Machine == nil || *got.Machine != machine || got.Actor != "dashboard" {
			t.Fatalf("event = %+v (the filter should have skipped node-6)", got)
		}
	case err := <-errs:
		t.Fatalf("subscription failed: %v", err)
	case <-ctx.Done():
		t.Fatal("no audit event arrived")
	}
}

// plainDialer is what a genqlient user would write without client.Dialer.
type plainDialer struct{}

func (plainDialer) DialContext(ctx context.Context, url string, h http.Header) (graphql.WSConn, error) {
	c, _, err := websocket.DefaultDialer.DialContext(ctx, url, h)
	return c, err
}

// The trap the Dialer exists for, kept as a test so an upgrade that fixes it upstream is
// noticed (and the Dialer can go).
func TestPlainGenqlientDiesOnKeepAlive(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, producttest.WithPingInterval(50*time.Millisecond))
	token := e.Identity("dashboard", identity.ViewInfrastructure)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ws := graphql.NewClientUsingWebSocket(strings.Replace(e.Base, "http", "ws", 1)+"/graphql", plainDialer{},
		graphql.WithConnectionParams(map[string]any{"Authorization": "Bearer " + token}))
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	events, _, err := client.AuditEventRecorded(ctx, ws, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Take events (the creation of the identity may arrive): genqlient's reader waits for
	// each to be taken, and would then never read the ping this test is about.
	go func() {
		for range events {
		}
	}()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "unknown subscription ID") {
			t.Fatalf("died of %v", err)
		}
	case <-ctx.Done():
		t.Fatal("plain genqlient survived the keep-alive: upstream may have fixed it; revisit client.Dialer")
	}
}

// A subscription ended while an event for it waits to be taken: genqlient v0.8.1 alone
// panics (send on closed channel) and takes the whole process with it; through
// client.NewWebSocket the event is dropped and the socket goes on. The event is known to
// have been pushed when a second socket has it; the first socket's reader is then blocked
// on the untaken event (had it not read it yet, nothing is sent and the test still holds).
func TestEndingASubscriptionWithAnEventUntakenDoesNotCrash(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	watcher := e.Identity("watcher", identity.ViewInfrastructure)
	c := client.New(e.Base+"/graphql", e.Identity("admin", identity.ManageInfrastructure), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	socket := func() graphql.WebSocketClient {
		ws, err := client.NewWebSocket(e.Base+"/graphql", watcher)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	first, second := socket(), socket()
	registered := 0
	register := func() {
		registered++
		name := fmt.Sprintf("node-%d", registered)
		if _, err := client.RegisterMachine(ctx, c, client.RegisterMachineInput{Name: name, Provisioner: client.ProvisionerKindManual}); err != nil {
			t.Fatal(err)
		}
	}
	_, untaken, err := client.AuditEventRecorded(ctx, first, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen, _, err := client.AuditEventRecorded(ctx, second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Both subscriptions are live once the second has an event: register until it has one
	// (a registration made before the server started the subscription is not pushed).
	for {
		register()
		select {
		case <-seen:
		case <-time.After(time.Second):
			if ctx.Err() != nil {
				t.Fatal("the second socket never had an event")
			}
			continue
		}
		break
	}
	if err := first.Unsubscribe(untaken); err != nil {
		t.Fatal(err)
	}
	// The first socket still delivers.
	again, _, err := client.AuditEventRecorded(ctx, first, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		register()
		select {
		case ev := <-again:
			if ev.Errors != nil {
				t.Fatalf("event carries errors: %v", ev.Errors)
			}
			return
		case <-time.After(time.Second):
			if ctx.Err() != nil {
				t.Fatal("the first socket delivered nothing after the subscription with the untaken event ended")
			}
		}
	}
}
