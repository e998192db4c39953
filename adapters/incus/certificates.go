package incus

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
)

// TrustedCertificate is an entry of the cluster's trust store.
type TrustedCertificate struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // "client", "metrics" or "server" (members)
	Restricted  bool   `json:"restricted"`
	Fingerprint string `json:"fingerprint"`
	Description string `json:"description"`
}

// AddTrustedCertificate adds cert to the cluster trust store as an unrestricted client
// (POST /1.0/certificates), which makes its holder a cluster administrator. The caller
// must already be trusted (for example over the unix socket). A certificate that is
// already trusted gives an error matching ErrConflict. It returns the fingerprint.
func (c *Client) AddTrustedCertificate(ctx context.Context, name string, cert *x509.Certificate, description string) (string, error) {
	body := map[string]any{
		"name":        name,
		"type":        "client",
		"certificate": base64.StdEncoding.EncodeToString(cert.Raw),
		"restricted":  false,
		"projects":    []string{},
		"description": description,
	}
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/1.0/certificates", body: body}, nil); err != nil {
		return "", fmt.Errorf("trust certificate %q: %w", name, err)
	}
	return Fingerprint(cert.Raw), nil
}

// TrustedCertificates lists the trust store (clients and member server certificates).
func (c *Client) TrustedCertificates(ctx context.Context) ([]TrustedCertificate, error) {
	var certs []TrustedCertificate
	_, err := c.get(ctx, "/1.0/certificates", map[string][]string{"recursion": {"1"}}, &certs)
	return certs, err
}

// DeleteTrustedCertificate removes a certificate from the trust store by fingerprint.
func (c *Client) DeleteTrustedCertificate(ctx context.Context, fingerprint string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: "/1.0/certificates/" + seg(fingerprint)}, nil)
	return err
}
