package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// The fleet stream is tested with an hour's refresh interval: whatever arrives, arrives
// because something said the fleet changed (an Incus event, a mutation's NOTIFY).
var noFleetInterval = producttest.WithFleetRefresh(time.Hour)

// fleetStream follows fleetUpdates on a server through the generated client.
type fleetStream struct {
	t       *testing.T
	ws      graphql.WebSocketClient
	updates chan client.FleetUpdatesFleetUpdatesFleetUpdate
	cancel  context.CancelFunc
}

func watchFleet(t *testing.T, base, token string, after *int) *fleetStream {
	t.Helper()
	return watchFleetOf(t, base, token, after, nil)
}

// watchFleetOf follows the rows of one cluster (nil: every row).
func watchFleetOf(t *testing.T, base, token string, after *int, cluster *string) *fleetStream {
	t.Helper()
	ws, err := client.NewWebSocket(base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := ws.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	raw, _, err := client.FleetUpdates(ctx, ws, after, cluster)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &fleetStream{t: t, ws: ws, updates: make(chan client.FleetUpdatesFleetUpdatesFleetUpdate, 256), cancel: cancel}
	t.Cleanup(s.close)
	go func() {
		for r := range raw {
			if r.Errors != nil {
				t.Errorf("fleetUpdates: %v", r.Errors)
				return
			}
			s.updates <- r.Data.FleetUpdates
		}
	}()
	return s
}

func (s *fleetStream) close() {
	s.cancel()
	s.ws.Close()
}

// next waits for the next message, failing after wait.
func (s *fleetStream) next(what string, wait time.Duration) client.FleetUpdatesFleetUpdatesFleetUpdate {
	s.t.Helper()
	select {
	case u := <-s.updates:
		return u
	case <-time.After(wait):
		s.t.Fatalf("no fleet update within %s: waited for %s", wait, what)
		return client.FleetUpdatesFleetUpdatesFleetUpdate{}
	}
}

// snapshot waits for the first message, which must be the whole fleet.
func (s *fleetStream) snapshot() client.FleetUpdatesFleetUpdatesFleetUpdate {
	s.t.Helper()
	u := s.next("the snapshot", 30*time.Second)
	if !u.Snapshot || u.Sources == nil || len(u.Changed) != 0 || len(u.Removed) != 0 {
		s.t.Fatalf("first message %+v, want a snapshot with the sources", u)
	}
	return u
}

// until reads changes until one shows the row name (added or changed) satisfying ok,
// checking that each comes with the next revision; it returns the last revision.
func (s *fleetStream) until(rev int, what string, ok func(m client.MachineFields) bool, wait time.Duration) int {
	s.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		u := s.next(what, time.Until(deadline))
		if u.Snapshot || u.Revision != rev+1 {
			s.t.Fatalf("after revision %d came %+v, want a change numbered %d", rev, u, rev+1)
		}
		rev = u.Revision
		for _, m := range u.Added {
			if ok(m.MachineFields) {
				return rev
			}
		}
		for _, m := range u.Changed {
			if ok(m.MachineFields) {
				return rev
			}
		}
	}
}

func rowNames(u client.FleetUpdatesFleetUpdatesFleetUpdate) []string {
	var out []string
	for _, m := range u.Added {
		out = append(out, m.Name)
	}
	return out
}

func TestFleetStreamCarriesChangesMadeWithIncusAtOnce(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), noFleetInterval)
	viewer := e.Identity("dashboard", identity.ViewInfrastructure)
	s := watchFleet(t, e.Base, viewer, nil)
	first := s.snapshot()
	if !slices.Contains(rowNames(first), lab.Members[0].Name) || !first.Sources.Incus.Available {
		t.Fatalf("snapshot %v (incus %+v), want the lab's member", rowNames(first), first.Sources.Incus)
	}
	// Joined outside Apelora, with incus itself: only Incus's events can tell the stream.
	// (The read made when the event stream connects is over well within a second.)
	time.Sleep(time.Second)
	host := lab.StartUnjoined(t, "node-9")
	start := time.Now()
	lab.Join(t, host)
	rev := s.until(first.Revision, "node-9 as a member", func(m client.MachineFields) bool {
		return m.Name == "node-9" && m.Member != nil
	}, 2*time.Minute)
	t.Logf("node-9 reached the subscriber %s after the join began, at revision %d (interval: 1h)", time.Since(start).Round(time.Millisecond), rev)

	// A join token created and revoked with incus itself (Incus's token-created lifecycle
	// event, then the cancelled operation) moves a registered row on and back.
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-5", provisioner: MANUAL}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	rev = s.until(rev, "node-5 registered", func(m client.MachineFields) bool { return m.Name == "node-5" && m.Record != nil }, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // the audit events of the identity and the registration have settled
	if out, err := lab.CLI(lab.Members[0], "cluster", "add", "node-5"); err != nil {
		t.Fatalf("incus cluster add: %v: %s", err, out)
	}
	rev = s.until(rev, "node-5 awaiting its join", func(m client.MachineFields) bool {
		return m.Name == "node-5" && m.Phase == client.PhaseAwaitingJoin
	}, 30*time.Second)
	if out, err := lab.CLI(lab.Members[0], "cluster", "revoke-token", "node-5"); err != nil {
		t.Fatalf("incus cluster revoke-token: %v: %s", err, out)
	}
	s.until(rev, "node-5 registered again once its token was revoked", func(m client.MachineFields) bool {
		return m.Name == "node-5" && m.Phase == client.PhaseRegistered
	}, 30*time.Second)
}

func TestFleetStreamCarriesAMutationToSubscribersOfAnotherReplicaAndResumesWithASnapshot(t *testing.T) {
	parallel(t)
	db := pgtest.New(t)
	a := producttest.StartOn(t, db, db.Store, noFleetInterval)
	other, err := postgres.Open(context.Background(), db.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	b := producttest.StartOn(t, db, other, noFleetInterval)
	admin := a.Identity("admin", identity.ManageInfrastructure)
	viewer := a.Identity("dashboard", identity.ViewInfrastructure)

	s := watchFleet(t, b.Base, viewer, nil)
	first := s.snapshot()
	if len(first.Added) != 0 || first.Sources.Incus.Available {
		t.Fatalf("snapshot of an empty fleet without Incus: %+v", first)
	}
	register := func(name string) {
		t.Helper()
		r := a.GQL(admin, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": name})
		if len(r.Errors) > 0 {
			t.Fatal(r.Errors)
		}
	}
	register("node-1") // on replica a; the subscriber is on b
	rev := s.until(first.Revision, "node-1 registered on the other replica", func(m client.MachineFields) bool {
		return m.Name == "node-1" && m.Record != nil
	}, 30*time.Second)

	// The dashboard goes away; the fleet changes meanwhile; it comes back with its last
	// revision and starts from a fresh snapshot, then continues.
	s.close()
	register("node-2")
	again := watchFleet(t, b.Base, viewer, &rev)
	snap := again.snapshot()
	if snap.Revision <= rev || !slices.Equal(rowNames(snap), []string{"node-1", "node-2"}) {
		t.Fatalf("after reconnecting with revision %d: revision %d rows %v, want a later revision with node-1 and node-2", rev, snap.Revision, rowNames(snap))
	}
	register("node-3")
	again.until(snap.Revision, "node-3 after resuming", func(m client.MachineFields) bool { return m.Name == "node-3" }, 30*time.Second)

	// A hostile revision is refused, naming the argument.
	ws, err := client.NewWebSocket(b.Base+"/graphql", viewer)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	bad := -4
	raw, _, err := client.FleetUpdates(t.Context(), ws, &bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-raw:
		if r.Errors == nil || !strings.Contains(r.Errors.Error(), "not a revision") {
			t.Fatalf("after: -4 answered %+v, want it refused", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("after: -4 was neither refused nor answered")
	}
}

// MAAS has no push: the stream polls it on the interval. When MAAS goes away the next
// refresh says so in a change of sources, and sets the availability metric, with no
// query asked.
func TestFleetStreamPollsMAASAndFeedsTheAvailabilityMetric(t *testing.T) {
	parallel(t)
	sm := producttest.StartMAAS(t, maasFleet())
	m := metrics.New(metrics.Server)
	e := producttest.Start(t, withMetrics(m), producttest.WithMAAS(sm.Config), producttest.WithFleetRefresh(time.Second))
	s := watchFleet(t, e.Base, e.Identity("dashboard", identity.ViewInfrastructure), nil)
	first := s.snapshot()
	if !first.Sources.Maas.Available || len(first.Added) == 0 {
		t.Fatalf("snapshot: MAAS %+v with %d rows, want MAAS's machines", first.Sources.Maas, len(first.Added))
	}
	if v, ok := gathered(t, m).sum("apelora_source_available", map[string]string{"source": "maas"}); !ok || v != 1 {
		t.Errorf("maas available = %v (exported %v) after the stream's first read, want 1", v, ok)
	}
	sm.Endpoint.Close()
	rev := first.Revision
	for {
		u := s.next("MAAS reported unavailable", 60*time.Second)
		if u.Revision != rev+1 {
			t.Fatalf("revision %d after %d", u.Revision, rev)
		}
		rev = u.Revision
		if u.Sources != nil && !u.Sources.Maas.Available {
			if u.Sources.Maas.Message == "" || u.Sources.Maas.Message == "ok" {
				t.Errorf("MAAS unavailable without saying why: %+v", u.Sources.Maas)
			}
			break
		}
	}
	if v, _ := gathered(t, m).sum("apelora_source_available", map[string]string{"source": "maas"}); v != 0 {
		t.Errorf("maas available = %v after the stream saw MAAS gone, want 0", v)
	}
}

// fleetUpdates needs view-infrastructure, as `fleet` does: an identity without it is
// refused before any fleet is read.
func TestFleetStreamNeedsViewInfrastructure(t *testing.T) {
	parallel(t)
	e := producttest.Start(t, noFleetInterval)
	eraser := e.UncheckedIdentity("eraser", identity.HardwareDelete)
	ws, err := client.NewWebSocket(e.Base+"/graphql", eraser)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	errs, err := ws.Start(t.Context())
	if err != nil {
		if !strings.Contains(err.Error(), "4403") && !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("a socket without view-infrastructure: %v", err)
		}
		return
	}
	raw, _, err := client.FleetUpdates(t.Context(), ws, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-raw:
		if r.Errors == nil || r.Data != nil && r.Data.FleetUpdates.Revision != 0 {
			t.Fatalf("an identity without view-infrastructure was sent %+v", r)
		}
		if !strings.Contains(r.Errors.Error(), "view-infrastructure") {
			t.Fatalf("refused with %v, want the missing permission named", r.Errors)
		}
	case err := <-errs:
		if err == nil || !strings.Contains(err.Error(), "4403") {
			t.Fatalf("the socket ended with %v, want 4403", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("neither refused nor answered")
	}
}

// Refused requests change nothing and anyone can send them: their audit events must not
// make the stream read MAAS again. A mutation that succeeds does, once.
func TestFleetStreamIsNotReadAgainForRefusedRequests(t *testing.T) {
	parallel(t)
	sm := producttest.StartMAAS(t, maasFleet())
	e := producttest.Start(t, producttest.WithMAAS(sm.Config), noFleetInterval)
	viewer := e.Identity("dashboard", identity.ViewInfrastructure)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	s := watchFleet(t, e.Base, viewer, nil)
	first := s.snapshot()
	lists := func() int {
		n := 0
		for _, r := range sm.Requests() {
			if isMAASList(r) {
				n++
			}
		}
		return n
	}
	// The identities' audit events may reach the stream late on a loaded machine: a
	// registration shown to the subscriber was read after them (the stream takes the
	// events in order), so the count from there on is the refused requests' and node-7's.
	if r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-6", provisioner: MANUAL}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	rev := s.until(first.Revision, "node-6 registered", func(m client.MachineFields) bool { return m.Name == "node-6" }, 30*time.Second)
	before := lists()
	const register = `mutation { registerMachine(input: {name: "node-7", provisioner: MANUAL}) { machine { name } } }`
	for _, token := range []string{"", "apl_not-a-real-token", viewer} {
		for range 5 {
			if r := e.GQL(token, register, nil); r.Code() != "UNAUTHENTICATED" && r.Code() != "FORBIDDEN" {
				t.Fatalf("a mutation with token %.8q was not refused: %+v", token, r)
			}
		}
	}
	time.Sleep(time.Second)
	if got := lists() - before; got != 0 {
		t.Fatalf("15 refused mutations made the stream list MAAS's machines %d times, want 0", got)
	}
	if r := e.GQL(admin, register, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	s.until(rev, "node-7 registered", func(m client.MachineFields) bool { return m.Name == "node-7" }, 30*time.Second)
	// The stream's one read (the mutation's answer reads its one machine, no list).
	if got := lists() - before; got != 1 {
		t.Errorf("one registration listed MAAS's machines %d times, want the stream's one read", got)
	}
}
