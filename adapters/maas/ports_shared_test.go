package maas

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/provisioning"
)

// gate holds the first whole machine list until released, and counts the lists.
type gate struct {
	next    http.RoundTripper
	lists   atomic.Int32
	release chan struct{}
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Path == "/MAAS/api/2.0/machines/" && r.URL.Query().Get("op") == "" &&
		!r.URL.Query().Has("hostname") && !r.URL.Query().Has("id") {
		if g.lists.Add(1) == 1 {
			<-g.release
		}
	}
	return g.next.RoundTrip(r)
}

// TestMAASListIsSharedAndAWriteForgetsIt: concurrent readers of the MAAS list cost one
// call (counted at the simulator too), and a MAAS step through the same port makes the
// next reader start a new list rather than share one that began before the step.
func TestMAASListIsSharedAndAWriteForgetsIt(t *testing.T) {
	key := sim.NewAPIKey()
	s, err := sim.New(sim.Options{
		Users:   []sim.User{{Username: "apelora", APIKey: key, Admin: true}},
		Fixture: sim.Fixture{Machines: sim.GenerateMachines(20, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	g := &gate{release: make(chan struct{})}
	c, err := New(Config{BaseURL: ep.BaseURL, APIKey: key, RequestTimeout: 30 * time.Second,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g }})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPorts(c)

	const readers = 10
	var wg sync.WaitGroup
	counts := make(chan int, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms, err := p.Machines(context.Background())
			if err != nil {
				t.Error(err)
			}
			counts <- len(ms)
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); p.list.Waiting() != readers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d readers never all waited on the shared list call", readers)
		}
	}

	// A step on a machine while that list is in flight: the next list is a new call.
	var ready string
	for _, m := range sim.GenerateMachines(20, 1) {
		if m.Status == sim.StatusReady {
			ready = m.SystemID
			break
		}
	}
	if _, err := p.Commission(context.Background(), ready, provisioning.CommissionOptions{Tests: []string{}}); err != nil {
		t.Fatal(err)
	}
	after, err := p.Machines(context.Background())
	if err != nil || len(after) != 20 {
		t.Fatalf("list after the step: %d machines, %v", len(after), err)
	}
	close(g.release)
	wg.Wait()
	close(counts)
	for n := range counts {
		if n != 20 {
			t.Fatalf("a reader got %d machines, want the shared list's 20", n)
		}
	}
	if got := g.lists.Load(); got != 2 {
		t.Fatalf("%d MAAS lists for %d concurrent readers and one reader after a step, want 2", got, readers)
	}
	simLists := 0
	for _, r := range s.Requests() {
		if r.Method == http.MethodGet && r.Path == "/MAAS/api/2.0/machines/" && r.Op == "" {
			simLists++
		}
	}
	if simLists != 2 {
		t.Fatalf("the simulator answered %d lists, want 2", simLists)
	}
}
