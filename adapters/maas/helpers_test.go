package maas_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

// Durations used with the fake clock; distinct so an Advance that is too
// short is caught.
var testDurations = sim.Durations{
	Commissioning: 10 * time.Minute,
	Testing:       20 * time.Minute,
	Deploying:     15 * time.Minute,
	Releasing:     2 * time.Minute,
	DiskErasing:   30 * time.Minute,
	PowerOff:      5 * time.Second,
}

type env struct {
	t      *testing.T
	sim    *sim.Server
	clock  *sim.FakeClock
	ep     *sim.Endpoint
	key    string
	client *maas.Client
	// powerOffs records the power-off hook's calls.
	powerOffs []string
}

type envOpt func(*envConfig)

type envConfig struct {
	machines []sim.MachineSpec
	users    []sim.User
	tlsMode  *sim.TLSMode
	mutate   func(*maas.Config)
}

func withMachines(ms ...sim.MachineSpec) envOpt {
	return func(c *envConfig) { c.machines = append(c.machines, ms...) }
}
func withTLS(mode sim.TLSMode) envOpt        { return func(c *envConfig) { c.tlsMode = &mode } }
func withConfig(f func(*maas.Config)) envOpt { return func(c *envConfig) { c.mutate = f } }
func withUsers(us ...sim.User) envOpt        { return func(c *envConfig) { c.users = us } }

// newEnv starts a simulator on 127.0.0.1 (plain HTTP unless withTLS) and a
// client signed with the admin key.
func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, clock: sim.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), key: sim.NewAPIKey()}
	users := cfg.users
	if users == nil {
		users = []sim.User{{Username: "apelora", APIKey: e.key, Admin: true}}
	}
	s, err := sim.New(sim.Options{
		Users:      users,
		Fixture:    sim.Fixture{Machines: cfg.machines},
		Clock:      e.clock,
		Durations:  testDurations,
		OnPowerOff: func(id string) { e.powerOffs = append(e.powerOffs, id) },
	})
	if err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	e.sim = s
	if cfg.tlsMode != nil {
		e.ep, err = s.ListenTLS("127.0.0.1:0", *cfg.tlsMode)
	} else {
		e.ep, err = s.Listen("127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = e.ep.Close() })
	c := maas.Config{BaseURL: e.ep.BaseURL, APIKey: e.key, MaxRetryWait: time.Millisecond}
	if e.ep.Certs != nil {
		c.CAFile = writePEM(t, e.ep.Certs.CAPEM)
	}
	if cfg.mutate != nil {
		cfg.mutate(&c)
	}
	if c.APIKey != "" {
		e.client, err = maas.New(c)
		if err != nil {
			t.Fatalf("new client: %v", err)
		}
	}
	return e
}

// clientWith builds another client against the same simulator.
func (e *env) clientWith(t *testing.T, f func(*maas.Config)) (*maas.Client, error) {
	t.Helper()
	c := maas.Config{BaseURL: e.ep.BaseURL, APIKey: e.key, MaxRetryWait: time.Millisecond}
	if e.ep.Certs != nil {
		c.CAFile = writePEM(t, e.ep.Certs.CAPEM)
	}
	f(&c)
	return maas.New(c)
}

func writePEM(t *testing.T, pem []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "maas-ca.pem")
	if err := os.WriteFile(p, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) snapshot(id string) sim.Snapshot {
	e.t.Helper()
	s, ok := e.sim.Machine(id)
	if !ok {
		e.t.Fatalf("simulator has no machine %s", id)
	}
	return s
}

func (e *env) wantStatus(id string, want int) {
	e.t.Helper()
	m, err := e.client.Machine(context.Background(), id)
	if err != nil {
		e.t.Fatalf("read %s: %v", id, err)
	}
	if int(m.Status) != want {
		e.t.Fatalf("%s: status %d %q, want %d %q", id, m.Status, m.StatusName, want, sim.StatusLabel(want))
	}
	if m.StatusName != sim.StatusLabel(want) {
		e.t.Fatalf("%s: status_name %q, want %q", id, m.StatusName, sim.StatusLabel(want))
	}
}

// lastRequest returns the last recorded request with this op.
func (e *env) lastRequest(op string) sim.Request {
	e.t.Helper()
	rs := e.sim.Requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Op == op {
			return rs[i]
		}
	}
	e.t.Fatalf("no request with op=%q recorded", op)
	return sim.Request{}
}

// spec builds a machine with known hardware.
func spec(id string, status int, powerType string) sim.MachineSpec {
	return sim.MachineSpec{
		SystemID: id, Hostname: "host-" + id, Domain: "lab", Status: status, PowerType: powerType,
		HardwareUUID: "4c4c4544-0042-3510-8052-" + fmt.Sprintf("%012x", len(id)*7919),
		CPUCount:     16, CPUSpeed: 2400, Memory: 65536, StorageBytes: 960197124000,
		Zone: "az1", Pool: "compute", Tags: []string{"incus"}, IPAddresses: []string{"10.0.0.7"},
		HardwareInfo: map[string]string{"system_vendor": "Dell Inc.", "system_serial": "ABC123", "cpu_model": "EPYC"},
	}
}

func owned(sp sim.MachineSpec, owner string) sim.MachineSpec { sp.Owner = owner; return sp }

func neverCommissioned(sp sim.MachineSpec) sim.MachineSpec {
	f := false
	sp.Commissioned = &f
	return sp
}

// apiError asserts err is an *maas.APIError with this status.
func apiError(t *testing.T, err error, status int) *maas.APIError {
	t.Helper()
	var ae *maas.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an APIError", err, err)
	}
	if ae.StatusCode != status {
		t.Fatalf("status %d, want %d (%v)", ae.StatusCode, status, err)
	}
	return ae
}

func wantMessage(t *testing.T, err error, status int, sentinel error, msg string) {
	t.Helper()
	ae := apiError(t, err, status)
	if !errors.Is(err, sentinel) {
		t.Fatalf("errors.Is(%v, %v) = false", err, sentinel)
	}
	if ae.Message != msg {
		t.Fatalf("message %q, want %q", ae.Message, msg)
	}
	if !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), ae.Path) {
		t.Fatalf("error text %q lacks MAAS's message or the path", err.Error())
	}
}

var ctx = context.Background()

// rawGet sends a hand-signed GET, for the OAuth tests that need control over
// nonce and timestamp.
func rawGet(t *testing.T, url, authHeader string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authHeader != "" {
		req.Header.Set("Authorization", authHeader)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func plaintextHeader(consumer, token, signature, nonce string, ts int64) string {
	return fmt.Sprintf(`OAuth realm="", oauth_version="1.0", oauth_signature_method="PLAINTEXT", `+
		`oauth_consumer_key=%q, oauth_token=%q, oauth_signature=%q, oauth_nonce=%q, oauth_timestamp="%d"`,
		consumer, token, signature, nonce, ts)
}

func splitKey(k string) (string, string, string) {
	p := strings.Split(k, ":")
	return p[0], p[1], p[2]
}
