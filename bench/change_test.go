package bench

import (
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// BenchmarkUpstreamStep is the latency of a step that changes Incus, over loopback HTTP:
// setPlacementGuard turned on and off in turn on a real 1-member lab (each call one
// PATCH /1.0, its reads, and its audit: since issue 25.7 an intent committed before the
// PATCH and an outcome after, under the lease, with no transaction open across the call),
// after 20 to warm up. It uses only what main has too, so the intent's cost is this
// benchmark run on main and on a branch, back to back:
//
//	go test ./bench -run '^$' -bench UpstreamStep -benchtime 400x
func BenchmarkUpstreamStep(b *testing.B) {
	lab := incuslab.Start(b, 1)
	e := producttest.Start(b, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	const q = `mutation($on: Boolean!) { setPlacementGuard(input: {enabled: $on}) { placementGuard { state } } }`
	on := false
	step := func() time.Duration {
		on = !on
		t0 := time.Now()
		if r := e.GQL(admin, q, map[string]any{"on": on}); len(r.Errors) > 0 {
			b.Fatalf("setPlacementGuard: %+v", r.Errors)
		}
		return time.Since(t0)
	}
	for range 20 {
		step()
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, step())
	}
	b.StopTimer()
	reportLatency(b, ds)
}
