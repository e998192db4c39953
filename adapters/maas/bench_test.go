package maas_test

import (
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

// BenchmarkMachines300 lists 300 machines over real HTTP on loopback. The
// allocation count includes the simulator's side of the request, which runs
// in the same process.
func BenchmarkMachines300(b *testing.B) {
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
	defer ep.Close()
	c, err := maas.New(maas.Config{BaseURL: ep.BaseURL, APIKey: key})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ms, err := c.Machines(ctx, maas.MachineFilter{})
		if err != nil || len(ms) != 300 {
			b.Fatalf("%d machines, %v", len(ms), err)
		}
	}
}
