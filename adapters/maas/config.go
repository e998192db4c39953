package maas

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/plan"
)

// Defaults chosen for one MAAS region serving a few hundred machines.
const (
	DefaultRequestTimeout    = 30 * time.Second
	DefaultPowerQueryTimeout = 75 * time.Second // MAAS waits up to 60 s for the BMC
	DefaultMaxResponseBytes  = 64 << 20
	DefaultMaxRetries        = 3
	DefaultMaxRetryWait      = 10 * time.Second
)

// Config says how to reach MAAS. The API key is a secret: Config redacts it
// from every fmt verb, from slog and from JSON, so a Config can be logged.
type Config struct {
	// BaseURL is the MAAS URL up to and including /MAAS, for example
	// https://maas.example:5240/MAAS. The client appends api/2.0/.
	BaseURL string
	// APIKey is the MAAS API key, consumer_key:token_key:token_secret.
	APIKey string `json:"-"`
	// CAFile, when set, is a PEM file whose certificates are the only ones
	// trusted for MAAS (a private CA, or the MAAS leaf itself to pin it).
	// When empty the system trust store is used. The client re-reads it when
	// it changes, so a rotated certificate needs no restart.
	CAFile string

	// RequestTimeout bounds each call, retries included: a hung MAAS costs one
	// RequestTimeout, never one per attempt. DefaultRequestTimeout when zero.
	RequestTimeout time.Duration
	// PowerQueryTimeout bounds a query_power_state call, retries included (MAAS
	// itself waits up to 60 s for the BMC); at least RequestTimeout.
	PowerQueryTimeout time.Duration
	MaxResponseBytes  int64
	// MaxRetries bounds retries of idempotent reads; negative disables them.
	// A retry is made only when it can start before the call's bound.
	MaxRetries int
	// MaxRetryWait caps the wait between retries, including MAAS's Retry-After.
	MaxRetryWait time.Duration

	// Logger receives retry notices; nil discards them.
	Logger *slog.Logger

	// WrapTransport, when set, wraps the client's transport (metrics count each attempt
	// there; OperationName names them). It sees requests already signed: it must not log
	// their headers.
	WrapTransport func(http.RoundTripper) http.RoundTripper `json:"-"`
	// Writes is the seam every POST goes through (plan.Writes: made or planned, then
	// forgotten by shared reads and counted); nil: one of the client's own.
	Writes *plan.Writes `json:"-"`
}

// String redacts the API key.
func (c Config) String() string {
	return fmt.Sprintf("maas.Config{BaseURL:%q APIKey:%s CAFile:%q}", c.BaseURL, redactedKey(c.APIKey), c.CAFile)
}

// GoString redacts the API key for %#v.
func (c Config) GoString() string { return c.String() }

// Format makes every verb (%v, %+v, %#v, %s, %q, %x, %d …) print the
// redacted form; without it %d or %x would print the struct's fields raw.
func (c Config) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue redacts the API key in slog output.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("api_key", redactedKey(c.APIKey)),
		slog.String("ca_file", c.CAFile),
	)
}

func redactedKey(k string) string {
	if k == "" {
		return "(unset)"
	}
	return "[redacted]"
}

// credentials is the parsed API key. It prints as [redacted] whatever the verb.
type credentials struct {
	consumerKey, tokenKey, tokenSecret string
}

func (credentials) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("[redacted]")) }
func (credentials) String() string                { return "[redacted]" }
func (credentials) GoString() string              { return "[redacted]" }
func (credentials) LogValue() slog.Value          { return slog.StringValue("[redacted]") }

// errKeyForm never includes the key: the whole point is that a mistyped key
// must not end up in a log.
const keyFormHint = "the MAAS API key must have the form consumer_key:token_key:token_secret " +
	"(three non-empty parts separated by ':', as shown by `maas apikey --username=<user>`)"

// ErrInvalidConfig marks configuration errors (bad URL, bad key, bad CA file).
var ErrInvalidConfig = errors.New("invalid MAAS configuration")

func parseAPIKey(key string) (credentials, error) {
	key = strings.TrimSpace(key) // keys read from files often end in a newline
	if key == "" {
		return credentials{}, fmt.Errorf("%w: no MAAS API key configured; %s", ErrInvalidConfig, keyFormHint)
	}
	parts := strings.Split(key, ":")
	if len(parts) != 3 {
		return credentials{}, fmt.Errorf("%w: MAAS API key has %d part(s); %s", ErrInvalidConfig, len(parts), keyFormHint)
	}
	for i, p := range parts {
		if p == "" {
			return credentials{}, fmt.Errorf("%w: part %d of the MAAS API key is empty; %s", ErrInvalidConfig, i+1, keyFormHint)
		}
		if strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return credentials{}, fmt.Errorf("%w: part %d of the MAAS API key contains spaces or control characters; %s", ErrInvalidConfig, i+1, keyFormHint)
		}
	}
	return credentials{consumerKey: parts[0], tokenKey: parts[1], tokenSecret: parts[2]}, nil
}

// apiRoot validates BaseURL and returns it with api/2.0/ appended.
func apiRoot(base string) (*url.URL, error) {
	if strings.TrimSpace(base) == "" {
		return nil, fmt.Errorf("%w: MAAS base URL is empty; set it to https://<maas-host>:5240/MAAS", ErrInvalidConfig)
	}
	u, err := url.Parse(base)
	if err != nil {
		// url.Parse errors quote the input, which is only the URL, never the key.
		return nil, fmt.Errorf("%w: MAAS base URL does not parse: %v", ErrInvalidConfig, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: MAAS base URL must not carry user information; authentication uses the API key", ErrInvalidConfig)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: MAAS base URL must not have a query or fragment; use https://<maas-host>:5240/MAAS", ErrInvalidConfig)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: MAAS base URL %q has no host; use https://<maas-host>:5240/MAAS", ErrInvalidConfig, u.Redacted())
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackIP(u.Hostname()) {
			return nil, fmt.Errorf("%w: MAAS base URL %q uses plain http to a non-loopback host; "+
				"the API key would cross the network in clear text. Use https:// (plain http is allowed only to 127.0.0.0/8 or ::1)",
				ErrInvalidConfig, u.Redacted())
		}
	default:
		return nil, fmt.Errorf("%w: MAAS base URL %q must start with https:// (or http:// to a loopback IP for tests)", ErrInvalidConfig, u.Redacted())
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.Path += "api/2.0/"
	u.RawPath = ""
	return u, nil
}

// isLoopbackIP accepts IP literals only: a name such as "localhost" could
// resolve to anything, so it does not qualify for plain http.
func isLoopbackIP(host string) bool {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if a.Is4() {
		return a.As4()[0] == 127
	}
	return a == netip.IPv6Loopback()
}

// ErrCACertificateServed is returned (wrapped) when MAAS presents a leaf
// certificate marked as a CA. Such a certificate could sign others, so it is
// refused even when it is trusted, for example pinned through CAFile.
var ErrCACertificateServed = errors.New("MAAS served a certificate marked as a CA (BasicConstraints CA:TRUE); " +
	"issue MAAS a leaf certificate (CA:FALSE) signed by your CA and trust that CA through the CA file")

// tlsConfig trusts roots (nil: the system trust store) and refuses a served certificate
// marked as a CA.
func tlsConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		// Runs after the normal chain and host name checks have passed.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("MAAS presented no certificate")
			}
			if cs.PeerCertificates[0].IsCA {
				return ErrCACertificateServed
			}
			return nil
		},
	}
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.RequestTimeout <= 0 {
		out.RequestTimeout = DefaultRequestTimeout
	}
	if out.PowerQueryTimeout <= 0 {
		out.PowerQueryTimeout = max(DefaultPowerQueryTimeout, out.RequestTimeout)
	}
	if out.MaxResponseBytes <= 0 {
		out.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if out.MaxRetries == 0 {
		out.MaxRetries = DefaultMaxRetries
	} else if out.MaxRetries < 0 {
		out.MaxRetries = 0
	}
	if out.MaxRetryWait <= 0 {
		out.MaxRetryWait = DefaultMaxRetryWait
	}
	return out
}

// newDialer has no timeout of its own: the call's bound covers connecting, the TLS
// handshake and the answer alike, so a hung MAAS is reported one way whatever stage it
// hangs at.
func newDialer() *net.Dialer {
	return &net.Dialer{KeepAlive: 30 * time.Second}
}
