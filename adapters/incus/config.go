package incus

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/plan"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvURL        = "APELORA_INCUS_URL"         // https://host:port of a cluster member (or several, comma-separated)
	EnvClientCert = "APELORA_INCUS_CLIENT_CERT" // PEM file: Apelora's admin client certificate
	EnvClientKey  = "APELORA_INCUS_CLIENT_KEY"  // PEM file: its private key
	EnvServerCert = "APELORA_INCUS_SERVER_CERT" // PEM file: the cluster certificate to pin
	EnvSocket     = "APELORA_INCUS_SOCKET"      // path of a local daemon's unix.socket
	// EnvClusterName names the cluster APELORA_INCUS_URL (or _SOCKET) reaches when Apelora
	// adopts it as a record (domain/clusters.Adopt); clusters.DefaultName when unset.
	EnvClusterName = "APELORA_INCUS_CLUSTER_NAME"
)

// DefaultTimeout bounds every call whose Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Config is APELORA_INCUS_*: Apelora's client identity (ClientCertFile and ClientKeyFile,
// the one certificate every HTTPS cluster trusts) and the environment's cluster (URL with
// the ServerCertFile to pin, or SocketPath), which Apelora adopts as a record at start. Valid:
// nothing; the identity alone (every cluster registered through the API); the identity with
// URL and ServerCertFile; SocketPath, alone or with the identity. The client options
// (Timeout, Logger, WrapTransport, Writes) serve every client made from it (NewClient).
type Config struct {
	// URL of one cluster member, for example "https://10.0.0.5:8443": the client's first
	// address. It learns the others from the cluster's member list (endpoints.go).
	URL string
	// FallbackURLs are further members to try, in order, while the client has learned no
	// member list yet (at start, when the member at URL does not answer). Same certificates.
	FallbackURLs []string
	// ClientCertFile and ClientKeyFile hold Apelora's admin identity (PEM), which the
	// cluster trusts.
	ClientCertFile string
	ClientKeyFile  string
	// ServerCertFile holds the cluster certificate (PEM, $INCUS_DIR/cluster.crt on any
	// member). The client pins its SHA-256 fingerprint; every CERTIFICATE block in the file
	// is accepted, which allows a rotation.
	ServerCertFile string

	// SocketPath of a local daemon ($INCUS_DIR/unix.socket); everyone on it is an admin.
	SocketPath string

	// Timeout bounds each call; zero means DefaultTimeout. Operation waits get their own
	// bound plus a margin.
	Timeout time.Duration

	// Logger receives one debug line per request (method, path, status, duration); never
	// bodies or headers. Nil means no logging.
	Logger *slog.Logger

	// WrapTransport, when set, wraps the client's transport (metrics count calls there;
	// OperationName names them).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Writes is the seam every request that changes something goes through (plan.Writes:
	// made or planned, then forgotten by shared reads and counted); nil: one of the
	// client's own.
	Writes *plan.Writes

	// ClusterName is APELORA_INCUS_CLUSTER_NAME ("" when unset): what the environment's
	// cluster is called when Apelora adopts it.
	ClusterName string
}

// HasCluster reports whether the configuration names a cluster (URL or socket).
func (c Config) HasCluster() bool { return c.URL != "" || c.SocketPath != "" }

// HasIdentity reports whether the configuration holds Apelora's client identity.
func (c Config) HasIdentity() bool { return c.ClientCertFile != "" && c.ClientKeyFile != "" }

// Configured reports whether any endpoint is set. A zero Config is "not configured".
func (c Config) Configured() bool {
	return c.URL != "" || c.SocketPath != "" || c.ClientCertFile != "" || c.ClientKeyFile != "" || c.ServerCertFile != ""
}

// UsesSocket reports whether the configuration points at a unix socket.
func (c Config) UsesSocket() bool { return c.SocketPath != "" }

// Validate checks that the configuration is complete and unambiguous. It returns an error
// matching ErrNotConfigured when nothing is set.
func (c Config) Validate() error {
	if !c.Configured() {
		return ErrNotConfigured
	}
	if c.SocketPath != "" {
		var both []string
		if c.URL != "" {
			both = append(both, EnvURL)
		}
		if c.ServerCertFile != "" {
			both = append(both, EnvServerCert)
		}
		if len(both) > 0 {
			return fmt.Errorf("ambiguous Incus configuration: %s and %s are both set; "+
				"use either the unix socket or HTTPS for the environment's cluster, not both", EnvSocket, strings.Join(both, ", "))
		}
	}
	var set, missing []string
	need := func(v, name string) {
		if v != "" {
			set = append(set, name)
		} else {
			missing = append(missing, name)
		}
	}
	if c.URL != "" || c.ServerCertFile != "" {
		need(c.URL, EnvURL)
		need(c.ClientCertFile, EnvClientCert)
		need(c.ClientKeyFile, EnvClientKey)
		need(c.ServerCertFile, EnvServerCert)
	} else if (c.ClientCertFile != "") != (c.ClientKeyFile != "") {
		need(c.ClientCertFile, EnvClientCert)
		need(c.ClientKeyFile, EnvClientKey)
	}
	if len(missing) > 0 {
		return fmt.Errorf("incomplete Incus configuration: %s set but %s missing; "+
			"Apelora's client identity is %s with %s (one certificate every cluster trusts), and the cluster it adopts at start "+
			"%s (a member's URL) with %s (the cluster certificate to pin), or %s",
			strings.Join(set, ", "), strings.Join(missing, ", "), EnvClientCert, EnvClientKey, EnvURL, EnvServerCert, EnvSocket)
	}
	if c.URL != "" {
		for _, s := range append([]string{c.URL}, c.FallbackURLs...) {
			if err := validURL(s); err != nil {
				return err
			}
		}
	}
	if c.Timeout < 0 {
		return errors.New("Incus timeout must not be negative")
	}
	return nil
}

// validURL checks one member URL.
func validURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s is not a URL: %w", EnvURL, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s must look like https://host:8443, got %q", EnvURL, s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return errors.New(EnvURL + " must hold only scheme, host and port (no path, query or user)")
	}
	return nil
}

// ConfigFromEnv reads the APELORA_INCUS_* variables through getenv (pass os.Getenv).
// Nothing set gives an error matching ErrNotConfigured; a half-given HTTPS configuration
// or both HTTPS and socket give an error that names the variables.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	urls := splitURLs(get(EnvURL))
	c := Config{
		ClientCertFile: get(EnvClientCert),
		ClientKeyFile:  get(EnvClientKey),
		ServerCertFile: get(EnvServerCert),
		SocketPath:     get(EnvSocket),
		ClusterName:    get(EnvClusterName),
	}
	if len(urls) > 0 {
		c.URL, c.FallbackURLs = urls[0], urls[1:]
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// splitURLs reads a comma-separated list of member URLs (blank entries skipped, trailing
// slashes dropped).
func splitURLs(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// SplitURLs is splitURLs for callers that read another variable of member URLs (the
// worker's deprecated APELORA_FENCE_INCUS_URLS).
func SplitURLs(v string) []string { return splitURLs(v) }
