package incus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/internal/apperr"
)

// Probe reads a cluster once before it is registered (clusters.Probe): a throw-away client
// with Apelora's client identity, pinned to the certificate given, that asks the one member
// at the URL (GET /1.0, then the member list when trusted) and nothing else. It sends no
// write.
type Probe struct {
	ID   *Identity // nil: no client identity
	Opts Config    // the client's options (Timeout, Logger, WrapTransport)
}

var _ clusters.Probe = Probe{}

// Identity is Apelora's client certificate and its fingerprint.
func (p Probe) Identity() (string, string, bool) {
	if p.ID == nil {
		return "", "", false
	}
	return p.ID.CertificatePEM(), p.ID.Fingerprint(), true
}

// Read connects to url, pinned to certificatePEM.
func (p Probe) Read(ctx context.Context, url, certificatePEM string) (clusters.Reading, error) {
	if p.ID == nil {
		return clusters.Reading{}, apperr.New(apperr.FailedPrecondition, "Apelora has no Incus client identity: set APELORA_INCUS_CLIENT_CERT and APELORA_INCUS_CLIENT_KEY")
	}
	opts := p.Opts
	opts.Writes = nil // it sends no write; a write would fail loudly through a seam of its own
	c, err := NewClient(p.ID, Endpoint{Seeds: []string{url}, CertificatePEM: certificatePEM, Name: url}, opts)
	if err != nil {
		return clusters.Reading{}, apperr.Wrap(err, apperr.InvalidInput, "cannot connect to %s: %v", url, err)
	}
	defer c.Close()
	info, err := c.ServerInfo(ctx, "")
	var pe *PinError
	switch {
	case errors.As(err, &pe):
		return clusters.Reading{}, &clusters.CertificateMismatch{URL: url, Presented: pe.Presented}
	case errors.Is(err, ErrUntrusted):
		return clusters.Reading{Fingerprint: c.PinnedFingerprint(), Trusted: false}, nil
	case err != nil:
		return clusters.Reading{}, probeErr(err, url)
	}
	presented := info.CertificateFingerprint
	if presented == "" {
		presented = c.PinnedFingerprint()
	}
	rd := clusters.Reading{Fingerprint: presented, Trusted: true, Clustered: info.ServerClustered,
		ServerName: info.ServerName, Version: info.ServerVersion}
	if !info.ServerClustered {
		return rd, nil
	}
	ms, err := c.Members(ctx)
	if err != nil {
		return clusters.Reading{}, probeErr(err, url)
	}
	for _, m := range ms {
		rd.Members = append(rd.Members, toMember(m))
	}
	return rd, nil
}

// probeErr says what reaching the member at url met.
func probeErr(err error, url string) error {
	var ie *Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &ie):
		return apperr.Wrap(err, apperr.Unavailable, "the member at %s did not answer %s: check the URL (its core.https_address) and that the member is up, then plan again", url, within(err))
	case errors.As(err, &ie):
		return apperr.Wrap(err, apperr.FailedPrecondition, "the member at %s answered %s: check the URL (a member's core.https_address)", url, strings.TrimSpace(ie.Message))
	}
	return apperr.Wrap(err, apperr.Unavailable, "the member at %s could not be reached (%s): check the URL (its core.https_address) and that the member is up, then plan again", url, reason(err))
}

// reason is the cause of a connection failure, short.
func reason(err error) string {
	var ce *connectError
	if errors.As(err, &ce) && ce.err != nil {
		return fmt.Sprint(unwrapURLError(ce.err))
	}
	return "no connection"
}
