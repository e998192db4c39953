package producttest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/internal/app"
)

// MAASSim is a MAAS simulator served over HTTPS on loopback, with the configuration that
// reaches it (its self-signed leaf pinned through the CA file).
type MAASSim struct {
	*sim.Server
	Endpoint *sim.Endpoint
	Clock    *sim.FakeClock
	Config   maas.Config
	Key      string
}

// StartMAAS serves a simulator with the fixture until the test ends. Timed transitions
// move only with Clock.Advance.
func StartMAAS(t testing.TB, fixture sim.Fixture) *MAASSim {
	t.Helper()
	key := sim.NewAPIKey()
	clock := sim.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s, err := sim.New(sim.Options{
		Users:   []sim.User{{Username: "apelora", APIKey: key, Admin: true}},
		Fixture: fixture,
		Clock:   clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.ListenTLS("127.0.0.1:0", sim.TLSSelfSignedLeaf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	ca := filepath.Join(t.TempDir(), "maas-leaf.pem")
	if err := os.WriteFile(ca, ep.Certs.LeafPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return &MAASSim{Server: s, Endpoint: ep, Clock: clock, Key: key,
		Config: maas.Config{BaseURL: ep.BaseURL, APIKey: key, CAFile: ca}}
}

// WithMAAS points the product at a MAAS (the simulator).
func WithMAAS(c maas.Config) Option { return func(cfg *app.Config) { cfg.MAAS = c } }
