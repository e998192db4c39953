package maas

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/apelora/fabric/adapters/maas/sim"
)

// BenchmarkMachines300ClientOnly isolates the client's cost (signing,
// transport, decoding 300 machines): the server replays a body captured from
// the simulator, so server-side allocations stay out of allocs/op as far as
// net/http allows.
func BenchmarkMachines300ClientOnly(b *testing.B) {
	key := sim.NewAPIKey()
	s, err := sim.New(sim.Options{
		Users:   []sim.User{{Username: "apelora", APIKey: key, Admin: true}},
		Fixture: sim.Fixture{Machines: sim.GenerateMachines(300, 1)},
		Clock:   sim.NewFakeClock(sim.RealClock().Now()),
	})
	if err != nil {
		b.Fatal(err)
	}
	ep, err := s.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{BaseURL: ep.BaseURL, APIKey: key})
	if err != nil {
		b.Fatal(err)
	}
	// Capture the simulator's exact answer once.
	var raw []byte
	signed := c.hc.Transport
	capture := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := signed.RoundTrip(r)
		if err == nil {
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(raw))
		}
		return resp, err
	})}
	c.hc = capture
	if _, err := c.Machines(context.Background(), MachineFilter{}); err != nil {
		b.Fatal(err)
	}
	ep.Close()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(raw)
	}))
	defer srv.Close()
	c, err = New(Config{BaseURL: srv.URL + "/MAAS", APIKey: key})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		ms, err := c.Machines(context.Background(), MachineFilter{})
		if err != nil || len(ms) != 300 {
			b.Fatalf("%d machines, %v", len(ms), err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
