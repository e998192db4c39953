package clusters

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Bounds of a registration's input.
const (
	// MaxCertificateBytes bounds the PEM of a cluster certificate (a few blocks for a
	// rotation fit in a fraction of it).
	MaxCertificateBytes = 64 << 10
	// MaxCertificates bounds its CERTIFICATE blocks.
	MaxCertificates = 8
	// MaxSeeds bounds the member URLs a cluster's record keeps (clusters.seed_urls).
	MaxSeeds    = 64
	maxURLBytes = 512
)

// Registration is a registerCluster input, checked: the cluster's name, the member URL to
// start from and the cluster certificate to pin (its CERTIFICATE blocks only, re-encoded).
type Registration struct {
	Name           string
	URL            string
	CertificatePEM string
	// Fingerprints are every block's SHA-256 (lower-case hex), the first one the record's.
	Fingerprints []string
}

// ParseRegistration checks a registration's input: INVALID_INPUT on the field at fault.
// The name follows the member-name rule; the URL is https://host[:port] of one member and
// nothing else; the certificate is PEM of at most MaxCertificateBytes with 1 to
// MaxCertificates CERTIFICATE blocks that each parse.
func ParseRegistration(name, rawURL, certificate string) (Registration, error) {
	if err := ValidateName("name", name); err != nil {
		return Registration{}, err
	}
	u, err := ParseMemberURL("url", rawURL)
	if err != nil {
		return Registration{}, err
	}
	pemText, fps, err := ParseCertificates("clusterCertificate", certificate)
	if err != nil {
		return Registration{}, err
	}
	return Registration{Name: name, URL: u, CertificatePEM: pemText, Fingerprints: fps}, nil
}

// ValidateName checks a cluster's name (the member-name rule: a cluster's name may stand
// where a member's does, as in m1.rack2): INVALID_INPUT on field.
func ValidateName(field, name string) error {
	return machines.ValidateMemberName(field, "cluster name", name)
}

// ParseMemberURL checks the URL of one member: https, a host, an optional port, nothing
// else (no user, path, query or fragment); it returns it without a trailing slash, with the
// port Incus listens on by default (8443) when none is given.
func ParseMemberURL(field, raw string) (string, error) {
	bad := func(why string) error {
		return apperr.Invalid(field, "%s is not the URL of a member: %s; give https://host:8443 of one member (its core.https_address)", apperr.Quote(raw), why)
	}
	switch {
	case raw == "":
		return "", apperr.Invalid(field, "the member URL is empty: give https://host:8443 of one member (its core.https_address)")
	case len(raw) > maxURLBytes:
		return "", apperr.Invalid(field, "the member URL is %d bytes long, more than the %d allowed", len(raw), maxURLBytes)
	case !utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }):
		return "", bad("it holds spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("it does not parse")
	}
	switch {
	case u.Scheme != "https":
		return "", bad("Apelora talks to Incus over HTTPS only (a unix socket only for the cluster of APELORA_INCUS_SOCKET)")
	case u.Host == "" || u.Hostname() == "":
		return "", bad("it names no host")
	case u.User != nil:
		return "", bad("it holds a user")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		return "", bad("it holds a path, query or fragment")
	}
	port := u.Port()
	if port == "" {
		port = "8443"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", bad("its port is not 1–65535")
	}
	return "https://" + net.JoinHostPort(u.Hostname(), port), nil
}

// ParseCertificates reads a cluster certificate (PEM): every CERTIFICATE block must parse
// as X.509; other blocks are refused (a private key pasted by mistake must not be kept). It
// returns the blocks re-encoded (nothing else of the text is kept) and their fingerprints.
func ParseCertificates(field, text string) (string, []string, error) {
	switch {
	case strings.TrimSpace(text) == "":
		return "", nil, apperr.Invalid(field, "the cluster certificate is empty: paste $INCUS_DIR/cluster.crt of any member (PEM), or `incus info | sed -n '/BEGIN/,/END/p'` run on a member")
	case len(text) > MaxCertificateBytes:
		return "", nil, apperr.Invalid(field, "the cluster certificate is %d bytes long, more than the %d allowed: paste $INCUS_DIR/cluster.crt of a member", len(text), MaxCertificateBytes)
	case !utf8.ValidString(text) || strings.ContainsRune(text, 0):
		return "", nil, apperr.Invalid(field, "the cluster certificate is not PEM text (it holds NUL or invalid UTF-8): paste $INCUS_DIR/cluster.crt of a member")
	}
	var out strings.Builder
	var fps []string
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return "", nil, apperr.Invalid(field, "the cluster certificate holds a %s block: give only the certificate (PEM CERTIFICATE blocks), never a key", apperr.Quote(block.Type))
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return "", nil, apperr.Invalid(field, "CERTIFICATE block %d of the cluster certificate is not an X.509 certificate: paste $INCUS_DIR/cluster.crt of a member", len(fps)+1)
		}
		if len(fps) == MaxCertificates {
			return "", nil, apperr.Invalid(field, "the cluster certificate holds more than %d CERTIFICATE blocks", MaxCertificates)
		}
		fp := Fingerprint(block.Bytes)
		if !contains(fps, fp) {
			fps = append(fps, fp)
			out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}))
		}
	}
	if len(fps) == 0 {
		return "", nil, apperr.Invalid(field, "the cluster certificate holds no PEM CERTIFICATE block: paste $INCUS_DIR/cluster.crt of a member, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----")
	}
	return out.String(), fps, nil
}

// Fingerprint is the SHA-256 of a DER certificate in lower-case hex: Incus's form.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Fingerprints are the fingerprints of every CERTIFICATE block of a stored certificate.
func Fingerprints(certificatePEM string) []string {
	var fps []string
	rest := []byte(certificatePEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return fps
		}
		if block.Type == "CERTIFICATE" {
			fps = append(fps, Fingerprint(block.Bytes))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
