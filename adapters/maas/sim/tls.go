package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// TLSMode chooses the certificate the simulator serves.
type TLSMode int

const (
	// TLSSelfSignedLeaf serves a self-signed leaf (CA:FALSE). Clients trust
	// it by pinning: CA file = the leaf itself.
	TLSSelfSignedLeaf TLSMode = iota
	// TLSCASignedLeaf serves a leaf signed by a generated CA; clients trust
	// the CA (Endpoint.CAPEM), the usual production set-up.
	TLSCASignedLeaf
	// TLSCAMarked serves a self-signed certificate marked as a CA
	// (BasicConstraints CA:TRUE), which clients must refuse even if trusted.
	TLSCAMarked
)

// Certificates are PEM blocks generated for one endpoint.
type Certificates struct {
	// LeafPEM is the served certificate.
	LeafPEM []byte
	// CAPEM is the issuing CA for TLSCASignedLeaf, else the same as LeafPEM.
	CAPEM []byte
	// KeyPEM is the served certificate's private key (for cmd/maas-sim users
	// who want to serve it elsewhere); never needed by clients.
	KeyPEM []byte
	cert   tls.Certificate
}

// GenerateCertificates makes an ECDSA P-256 certificate for 127.0.0.1, ::1
// and localhost (plus extra host names or IPs), valid for validFor.
func GenerateCertificates(mode TLSMode, validFor time.Duration, extraHosts ...string) (*Certificates, error) {
	now := time.Now()
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "maas-sim", Organization: []string{"Apelora MAAS simulator"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	for _, h := range extraHosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else if h != "" {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	issuer, issuerKey := leaf, leafKey
	var caDER []byte
	switch mode {
	case TLSSelfSignedLeaf:
	case TLSCAMarked:
		leaf.IsCA = true
		leaf.KeyUsage |= x509.KeyUsageCertSign
	case TLSCASignedLeaf:
		caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		ca := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "maas-sim test CA", Organization: []string{"Apelora MAAS simulator"}},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(validFor),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
			BasicConstraintsValid: true,
			IsCA:                  true,
			MaxPathLenZero:        true,
		}
		caDER, err = x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		if issuer, err = x509.ParseCertificate(caDER); err != nil {
			return nil, err
		}
		issuerKey = caKey
	default:
		return nil, fmt.Errorf("unknown TLS mode %d", mode)
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, issuer, &leafKey.PublicKey, issuerKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return nil, err
	}
	c := &Certificates{
		LeafPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	c.CAPEM = c.LeafPEM
	if caDER != nil {
		c.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	}
	c.cert, err = tls.X509KeyPair(c.LeafPEM, c.KeyPEM)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// Endpoint is a running listener serving the simulator.
type Endpoint struct {
	// BaseURL is what a client's Config.BaseURL takes, e.g.
	// https://127.0.0.1:41234/MAAS.
	BaseURL string
	// Addr is the listening address.
	Addr string
	// Certs is nil for plain HTTP.
	Certs *Certificates
	srv   *http.Server
	done  chan error

	closeOnce sync.Once
	closeErr  error
}

// Close stops the listener and open connections. Closing again does nothing.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		e.closeErr = e.srv.Shutdown(ctx)
		if errors.Is(e.closeErr, context.DeadlineExceeded) {
			e.closeErr = e.srv.Close()
		}
		<-e.done
	})
	return e.closeErr
}

// Listen serves plain HTTP on addr (use 127.0.0.1:0 in tests).
func (s *Server) Listen(addr string) (*Endpoint, error) {
	return s.listen(addr, nil)
}

// ListenTLS serves HTTPS on addr with freshly generated certificates.
func (s *Server) ListenTLS(addr string, mode TLSMode) (*Endpoint, error) {
	host, _, _ := net.SplitHostPort(addr)
	certs, err := GenerateCertificates(mode, 30*24*time.Hour, host)
	if err != nil {
		return nil, fmt.Errorf("generate simulator certificate: %w", err)
	}
	return s.listen(addr, certs)
}

// ListenWithCertificates serves HTTPS with the given certificates.
func (s *Server) ListenWithCertificates(addr string, certs *Certificates) (*Endpoint, error) {
	if certs == nil {
		return nil, errors.New("no certificates")
	}
	return s.listen(addr, certs)
}

func (s *Server) listen(addr string, certs *Certificates) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("MAAS simulator listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	scheme := "http"
	e := &Endpoint{Addr: ln.Addr().String(), Certs: certs, srv: srv, done: make(chan error, 1)}
	if certs != nil {
		scheme = "https"
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{certs.cert}, MinVersion: tls.VersionTLS12}
		go func() { e.done <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { e.done <- srv.Serve(ln) }()
	}
	e.BaseURL = scheme + "://" + e.Addr + "/MAAS"
	return e, nil
}
