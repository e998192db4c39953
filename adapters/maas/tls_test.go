package maas_test

import (
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
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

// restartWithNewCertificate closes the simulator's endpoint and serves the same simulator
// on the same address with a new self-signed leaf, as a MAAS whose certificate was rotated.
func restartWithNewCertificate(t *testing.T, e *env) *sim.Certificates {
	t.Helper()
	addr := e.ep.Addr
	if err := e.ep.Close(); err != nil {
		t.Fatal(err)
	}
	certs, err := sim.GenerateCertificates(sim.TLSSelfSignedLeaf, time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if e.ep, err = e.sim.ListenWithCertificates(addr, certs); err != nil {
		t.Fatal(err)
	}
	return certs
}

func TestRotatedCertificateIsTrustedOnceTheCAFileIsRewritten(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf))
	var logs strings.Builder
	caFile := writePEM(t, e.ep.Certs.LeafPEM)
	c, err := e.clientWith(t, func(c *maas.Config) {
		c.CAFile = caFile
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) // logged on the calling goroutine
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatal(err)
	}
	certs := restartWithNewCertificate(t, e)

	// Before the file is rewritten: a clear certificate error, and no request reaches MAAS.
	e.sim.ResetRequests()
	_, err = c.WhoAmI(ctx)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "CA file") {
		t.Fatalf("rotated certificate before the CA file changed: %v", err)
	}
	if n := len(e.sim.Requests()); n != 0 {
		t.Fatalf("%d requests reached MAAS over an untrusted connection", n)
	}

	// A half-written file is not trusted and does not drop the certificates read before.
	if err := os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); !errors.As(err, &unknown) {
		t.Fatalf("with a broken CA file: %v", err)
	}
	if _, err := c.WhoAmI(ctx); !errors.As(err, &unknown) {
		t.Fatalf("with a broken CA file, again: %v", err)
	}
	if n := strings.Count(logs.String(), "could not be re-read"); n != 1 {
		t.Fatalf("a broken CA file was logged %d times, want once:\n%s", n, logs.String())
	}

	// Rewritten: the next call succeeds, without a new client.
	if err := os.WriteFile(caFile, certs.LeafPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatalf("after the CA file was rewritten: %v", err)
	}
	if !strings.Contains(logs.String(), "MAAS CA file changed") {
		t.Fatalf("the reload was not logged:\n%s", logs.String())
	}
}

func TestRefusedCertificateRereadsTheCAFileEvenWhenItLooksUnchanged(t *testing.T) {
	// A file replaced with the same size and modification time (a copy that keeps times):
	// only the refused handshake can tell, and the client re-reads it then.
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf))
	old := e.ep.Certs.LeafPEM
	caFile := writePEM(t, old)
	c, err := e.clientWith(t, func(c *maas.Config) { c.CAFile = caFile })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(caFile)
	if err != nil {
		t.Fatal(err)
	}
	certs := restartWithNewCertificate(t, e)
	next := certs.LeafPEM
	for len(next) < len(old) {
		next = append(next, '\n') // text outside PEM blocks is ignored
	}
	if len(next) != len(old) {
		t.Skipf("new certificate PEM is longer (%d) than the old (%d)", len(next), len(old))
	}
	if err := os.WriteFile(caFile, next, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(caFile, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); err != nil {
		t.Fatalf("refused handshake did not re-read the CA file: %v", err)
	}
}

func TestCAMarkedCertificateStaysRefusedAfterAReload(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf))
	caFile := writePEM(t, e.ep.Certs.LeafPEM)
	c, err := e.clientWith(t, func(c *maas.Config) { c.CAFile = caFile })
	if err != nil {
		t.Fatal(err)
	}
	addr := e.ep.Addr
	e.ep.Close()
	marked, err := sim.GenerateCertificates(sim.TLSCAMarked, time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if e.ep, err = e.sim.ListenWithCertificates(addr, marked); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, marked.LeafPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(ctx); !errors.Is(err, maas.ErrCACertificateServed) {
		t.Fatalf("a CA-marked certificate, trusted through a reloaded CA file: %v", err)
	}
}
