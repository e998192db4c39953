package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// fenceWatcher is one websocket subscribed to fenceProgress with the generated client.
type fenceWatcher struct {
	t      *testing.T
	events chan client.FenceProgressWsResponse
	errs   <-chan error
}

func watchFences(t *testing.T, e *producttest.Env, token string, after *string) *fenceWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := client.NewWebSocket(e.Base+"/graphql", token)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); ws.Close() })
	ch, _, err := client.FenceProgress(ctx, ws, nil, after)
	if err != nil {
		t.Fatal(err)
	}
	return &fenceWatcher{t: t, events: ch, errs: errs}
}

// next returns the ids of the next n events.
func (w *fenceWatcher) next(n int) []string {
	w.t.Helper()
	var ids []string
	for len(ids) < n {
		select {
		case r, ok := <-w.events:
			if !ok {
				w.t.Fatalf("stream ended after %v", ids)
			}
			if r.Errors != nil {
				w.t.Fatalf("fenceProgress: %v", r.Errors)
			}
			ids = append(ids, r.Data.FenceProgress.Id)
		case err := <-w.errs:
			w.t.Fatalf("websocket: %v", err)
		case <-time.After(20 * time.Second):
			w.t.Fatalf("got %v, waiting for %d events", ids, n)
		}
	}
	return ids
}

// poll returns the next event's id, or false when none comes within d.
func (w *fenceWatcher) poll(d time.Duration) (string, bool) {
	w.t.Helper()
	select {
	case r, ok := <-w.events:
		if !ok {
			w.t.Fatal("stream ended")
		}
		if r.Errors != nil {
			w.t.Fatalf("fenceProgress: %v", r.Errors)
		}
		return r.Data.FenceProgress.Id, true
	case err := <-w.errs:
		w.t.Fatalf("websocket: %v", err)
	case <-time.After(d):
	}
	return "", false
}

// quiet fails if an event arrives within d.
func (w *fenceWatcher) quiet(d time.Duration) {
	w.t.Helper()
	select {
	case r := <-w.events:
		w.t.Fatalf("unexpected event %+v", r.Data.FenceProgress)
	case <-time.After(d):
	}
}

// Each subscriber with `after` gets its own replay, however many share the query and
// variables (the websocket transport shares only streams that are the same for every
// subscriber), then the live events once, with no gap and no repeat; subscribers without
// `after` share one live stream.
func TestFenceProgressReplaysForEachSubscriberThenGoesLive(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	token := e.Identity("console", identity.ViewInfrastructure)
	record := func() string {
		t.Helper()
		return fmt.Sprint(e.Scalar(`INSERT INTO fence_events (at, member, kind, worker) VALUES (now(), 'm1', 'OFFLINE', 'w1') RETURNING id`))
	}
	ids := []string{record(), record(), record()}

	early := watchFences(t, e, token, &ids[0])
	if got := early.next(2); !slices.Equal(got, ids[1:3]) {
		t.Fatalf("early replay %v, want %v", got, ids[1:3])
	}
	liveA, liveB := watchFences(t, e, token, nil), watchFences(t, e, token, nil)
	// A live subscriber has what is recorded once its subscription is in place, and only an
	// event can tell when that is (on a loaded machine it takes a while; a sleep was not
	// enough): events are recorded until each has one recorded after it subscribed. Before
	// it, it may get some of those recorded earlier (their notifications may still be on
	// their way); after it, every later one, in order.
	before := len(ids)
	had := map[*fenceWatcher]int{} // the index in ids of the last event each live one had
	for _, w := range []*fenceWatcher{liveA, liveB} {
		for {
			got, ok := w.poll(2 * time.Second)
			if !ok {
				ids = append(ids, record())
				continue
			}
			if i := slices.Index(ids, got); i >= before {
				had[w] = i
				break
			} else if i < 0 {
				t.Fatalf("live-only subscriber got %s, not one of %v", got, ids)
			}
		}
	}
	for _, w := range []*fenceWatcher{liveA, liveB} {
		if rest := w.next(len(ids) - 1 - had[w]); !slices.Equal(rest, ids[had[w]+1:]) {
			t.Fatalf("live subscriber got %s then %v, want %v", ids[had[w]], rest, ids[had[w]+1:])
		}
	}
	if got := early.next(len(ids) - before); !slices.Equal(got, ids[before:]) {
		t.Fatalf("early live %v, want %v", got, ids[before:])
	}

	// The same query and variables later: a replay of its own, from the same point.
	late := watchFences(t, e, token, &ids[0])
	if got := late.next(len(ids) - 1); !slices.Equal(got, ids[1:]) {
		t.Fatalf("late replay %v, want %v", got, ids[1:])
	}
	ids = append(ids, record())
	for _, w := range []*fenceWatcher{early, late, liveA, liveB} {
		if got := w.next(1); got[0] != ids[len(ids)-1] {
			t.Fatalf("got %v, want %s", got, ids[len(ids)-1])
		}
	}
	for _, w := range []*fenceWatcher{early, late, liveA, liveB} {
		w.quiet(200 * time.Millisecond)
	}
}
