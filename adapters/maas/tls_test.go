package maas_test

import (
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestTLSPinnedLeafIsAccepted(t *testing.T) {
	// CA file = the served leaf itself.
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf))
	if !strings.HasPrefix(e.ep.BaseURL, "https://127.0.0.1:") {
		t.Fatalf("base URL %s", e.ep.BaseURL)
	}
	if _, err := e.client.WhoAmI(ctx); err != nil {
		t.Fatalf("pinned leaf refused: %v", err)
	}
}

func TestTLSLeafSignedByTrustedCAIsAccepted(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSCASignedLeaf))
	if string(e.ep.Certs.CAPEM) == string(e.ep.Certs.LeafPEM) {
		t.Fatal("CA-signed mode served its own CA")
	}
	if _, err := e.client.WhoAmI(ctx); err != nil {
		t.Fatalf("leaf signed by the configured CA refused: %v", err)
	}
}

func TestTLSUntrustedCertificateIsRefused(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf))
	// No CA file: the system trust store does not know the simulator.
	c, err := e.clientWith(t, func(c *maas.Config) { c.CAFile = "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WhoAmI(ctx)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("error %v, want x509.UnknownAuthorityError", err)
	}
	var re *maas.RequestError
	if !errors.As(err, &re) || re.Path != "/MAAS/api/2.0/users/" {
		t.Fatalf("error %v does not name the path", err)
	}
	if !strings.Contains(err.Error(), "CA file") {
		t.Fatalf("error %q does not say what to do", err)
	}
	if n := len(e.sim.Requests()); n != 0 {
		t.Fatalf("simulator recorded %d requests through an untrusted connection", n)
	}
}

func TestTLSCertificateForAnotherCAIsRefused(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSCASignedLeaf))
	other, err := sim.GenerateCertificates(sim.TLSCASignedLeaf, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.clientWith(t, func(c *maas.Config) { c.CAFile = writePEM(t, other.CAPEM) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); err == nil {
		t.Fatal("a certificate from an unconfigured CA was accepted")
	}
}

func TestTLSCAMarkedLeafIsRefusedEvenWhenTrusted(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSCAMarked)) // CA file = that very certificate
	_, err := e.client.WhoAmI(ctx)
	if !errors.Is(err, maas.ErrCACertificateServed) {
		t.Fatalf("error %v, want ErrCACertificateServed", err)
	}
	if n := len(e.sim.Requests()); n != 0 {
		t.Fatalf("simulator recorded %d requests over a refused connection", n)
	}
}

func TestPlainHTTPOnlyToLoopbackIPs(t *testing.T) {
	key := sim.NewAPIKey()
	for _, u := range []string{
		"http://10.0.0.1:5240/MAAS", "http://maas.example/MAAS", "http://localhost:5240/MAAS",
		"http://[2001:db8::1]:5240/MAAS", "http://128.0.0.1/MAAS",
	} {
		_, err := maas.New(maas.Config{BaseURL: u, APIKey: key})
		if !errors.Is(err, maas.ErrInvalidConfig) || !strings.Contains(err.Error(), "https://") {
			t.Errorf("%s: error %v, want a configuration error pointing at https", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:5240/MAAS", "http://127.0.0.2/MAAS/", "http://[::1]:5240/MAAS", "https://maas.example:5240/MAAS"} {
		if _, err := maas.New(maas.Config{BaseURL: u, APIKey: key}); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
}

func TestHTTPSClientAgainstPlainServerFailsClearly(t *testing.T) {
	e := newEnv(t) // plain HTTP
	_, port, _ := net.SplitHostPort(e.ep.Addr)
	c, err := e.clientWith(t, func(c *maas.Config) { c.BaseURL = "https://127.0.0.1:" + port + "/MAAS" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WhoAmI(ctx)
	var re *maas.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v, want RequestError", err)
	}
}
