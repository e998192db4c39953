package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// auditWatch is one auditEventRecorded subscription over the generated client.
type auditWatch struct {
	events chan client.AuditEventRecordedWsResponse
	errs   <-chan error
	close  func()
}

func watchAudit(t *testing.T, base, token string, machine, after *string) *auditWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ws, err := client.NewWebSocket(base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events, _, err := client.AuditEventRecorded(ctx, ws, machine, after)
	if err != nil {
		t.Fatal(err)
	}
	w := &auditWatch{events: events, errs: errs, close: func() { cancel(); ws.Close() }}
	t.Cleanup(w.close)
	return w
}

// ids reads n events and returns their ids, in the order received.
func (w *auditWatch) ids(t *testing.T, n int) []int64 {
	t.Helper()
	var out []int64
	deadline := time.After(60 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("subscription ended after %v, want %d events", out, n)
			}
			if ev.Errors != nil {
				t.Fatalf("auditEventRecorded: %v", ev.Errors)
			}
			id, err := strconv.ParseInt(ev.Data.AuditEventRecorded.Id, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		case err := <-w.errs:
			t.Fatalf("websocket ended after %v: %v", out, err)
		case <-deadline:
			t.Fatalf("got %v, want %d events", out, n)
		}
	}
	return out
}

// nothingMore fails if an event arrives within a short wait (a repeat).
func (w *auditWatch) nothingMore(t *testing.T) {
	t.Helper()
	select {
	case ev := <-w.events:
		t.Fatalf("one more event than the trail has: %+v", ev.Data.AuditEventRecorded)
	case <-time.After(500 * time.Millisecond):
	}
}

// trail returns the ids of the audit trail after id after (about machine, when given),
// oldest first: what a subscriber must receive.
func trail(t *testing.T, e *producttest.Env, after int64, machine string) []int64 {
	t.Helper()
	rows, err := e.DB.Store.Pool().Query(t.Context(), `SELECT id FROM audit_events
		WHERE id > $1 AND ($2 = '' OR machine = $2) ORDER BY id`, after, machine)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// register records one audit event (a successful registerMachine about name).
func register(t *testing.T, e *producttest.Env, token, name string) {
	t.Helper()
	e.MustGQL(token, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": name})
}

func lastID(t *testing.T, e *producttest.Env) int64 {
	t.Helper()
	return e.Scalar(`SELECT coalesce(max(id), 0) FROM audit_events`).(int64)
}

// auditEventRecorded with after replays the trail after that event, then follows it live,
// without gaps or repeats, whichever API replica recorded the events and whichever the
// subscriber is on; a subscriber that reconnects with the last id it has misses nothing
// recorded while it was away.
func TestAuditStreamReplaysAfterAnIDAndResumesAcrossReplicas(t *testing.T) {
	parallel(t)
	a := producttest.Start(t)
	otherStore, err := postgres.Open(context.Background(), a.DB.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(otherStore.Close)
	b := producttest.StartOn(t, a.DB, otherStore)
	admin := a.Identity("admin", identity.ManageInfrastructure)

	for i := range 5 {
		register(t, a, admin, fmt.Sprintf("node-%d", i))
	}
	from := trail(t, a, 0, "")[1] // the second event of the trail
	after := strconv.FormatInt(from, 10)

	// On replica b, from an id: the rest of the trail first, then what either replica
	// records, while both record at once.
	all := watchAudit(t, b.Base, admin, nil, &after)
	machine := "node-1"
	one := watchAudit(t, b.Base, admin, &machine, &after)
	replayed := trail(t, a, from, "")
	if got := all.ids(t, len(replayed)); !slices.Equal(got, replayed) {
		t.Fatalf("replayed %v, want the trail after %d: %v", got, from, replayed)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := a
			if i%2 == 1 {
				e = b
			}
			for j := range 10 {
				name := fmt.Sprintf("w%d-%d", i, j)
				if j%5 == 0 {
					name = machine // some about the machine one watches
				}
				e.GQL(admin, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": name})
			}
		}()
	}
	wg.Wait()
	want := trail(t, a, from, "")
	if got := append(slices.Clone(replayed), all.ids(t, len(want)-len(replayed))...); !slices.Equal(got, want) {
		t.Fatalf("received %v,\nthe trail after %d is %v (a gap or a repeat)", got, from, want)
	}
	all.nothingMore(t)
	wantOne := trail(t, a, from, machine)
	if got := one.ids(t, len(wantOne)); !slices.Equal(got, wantOne) {
		t.Fatalf("for %s received %v, want %v", machine, got, wantOne)
	}
	one.nothingMore(t)

	// Away: the subscriber keeps its last id, events are recorded meanwhile, and it comes
	// back on the other replica with that id.
	last := want[len(want)-1]
	all.close()
	for i := range 3 {
		register(t, b, admin, fmt.Sprintf("away-%d", i))
	}
	resumed := strconv.FormatInt(last, 10)
	back := watchAudit(t, a.Base, admin, nil, &resumed)
	missed := trail(t, a, last, "")
	if len(missed) != 3 {
		t.Fatalf("the trail after %d holds %v, want the 3 events recorded while away", last, missed)
	}
	if got := back.ids(t, 3); !slices.Equal(got, missed) {
		t.Fatalf("after reconnecting with %d: %v, want %v", last, got, missed)
	}
	register(t, b, admin, "live-1")
	if got, end := back.ids(t, 1), lastID(t, a); got[0] != end {
		t.Fatalf("live after the replay: %v, want %d", got, end)
	}
	back.nothingMore(t)

	// An id that is not one refuses the subscription with INVALID_INPUT on after.
	r := a.GQL(admin, `subscription { auditEventRecorded(after: "x1") { id } }`, nil)
	if r.Code() != "INVALID_INPUT" {
		t.Fatalf("after \"x1\": %+v", r.Errors)
	}
}
