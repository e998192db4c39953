package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/internal/server/graphqlws"
)

// Config is Apelora's configuration, read from APELORA_* environment variables.
type Config struct {
	Listen            string        // APELORA_LISTEN
	DatabaseURL       string        // APELORA_DATABASE_URL; empty: local PostgreSQL in StateDir
	StateDir          string        // APELORA_STATE_DIR
	LogLevel          string        // APELORA_LOG_LEVEL
	AccessLog         string        // APELORA_ACCESS_LOG: the level of the per-request log line
	PingInterval      time.Duration // APELORA_WS_PING_INTERVAL
	ShutdownGrace     time.Duration // APELORA_SHUTDOWN_GRACE
	AllowedOrigins    []string      // APELORA_ALLOWED_ORIGINS
	PublicURL         string        // APELORA_PUBLIC_URL
	ConsoleSessionTTL time.Duration // APELORA_CONSOLE_SESSION_TTL
	// RequestTimeout bounds every call to Incus or MAAS, retries included
	// (APELORA_REQUEST_TIMEOUT); see EnvRequestTimeout.
	RequestTimeout time.Duration
	// DriftInterval is how often the drift watcher re-checks every admitted member
	// (APELORA_DRIFT_INTERVAL); zero: this replica never watches (a Config built in code,
	// or APELORA_DRIFT_INTERVAL=off). DriftOfflineAfter is APELORA_DRIFT_OFFLINE_AFTER.
	DriftInterval     time.Duration
	DriftOfflineAfter time.Duration
	// LeaderLease is the length of the leader leases (drift's here, the fence worker's in
	// apelora-worker): APELORA_LEADER_LEASE; zero: postgres.DefaultLeaderLease.
	LeaderLease time.Duration
	// FleetRefreshInterval is how often the fleet stream reads the fleet while anyone
	// subscribes (APELORA_FLEET_REFRESH_INTERVAL); zero: fleet.DefaultRefreshInterval.
	FleetRefreshInterval time.Duration
	// StepConcurrency is how many machine steps run at once (APELORA_STEP_CONCURRENCY);
	// zero: server.DefaultStepConcurrency.
	StepConcurrency int
	// IdentityLimits bound the websockets and subscriptions one identity holds open on a
	// server (APELORA_WS_SOCKETS_PER_IDENTITY, APELORA_WS_SUBSCRIPTIONS_PER_IDENTITY); a
	// zero field: server.DefaultIdentityLimits'.
	IdentityLimits server.IdentityLimits
	Incus          incus.Config // APELORA_INCUS_*; zero when not configured
	MAAS           maas.Config  // APELORA_MAAS_*; BaseURL "" when not configured
	// AuthFailureLimit is not read from the environment (zero: the server's default);
	// tests relax it.
	AuthFailureLimit server.RateLimit
	// RefusalWindow is the window of the audit events of repeated refusals; not read from
	// the environment (zero: server.RateLimitWindow); tests shorten it.
	RefusalWindow time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client the
	// per-address limits key on (APELORA_TRUSTED_PROXIES); none: the TCP peer is.
	TrustedProxies server.TrustedProxies
	// AuditKeyFile is APELORA_AUDIT_KEY_FILE ("" : the state folder's); see AuditKeyPath.
	// AuditCheckpointInterval is APELORA_AUDIT_CHECKPOINT_INTERVAL; zero: the default.
	AuditKeyFile            string
	AuditCheckpointInterval time.Duration
	// AuditExport is APELORA_AUDIT_SYSLOG_*, APELORA_AUDIT_JSONL_FILE and
	// APELORA_AUDIT_EXPORT_INTERVAL: the SIEM sinks (internal/app/auditexport.go).
	AuditExport AuditExport
	// Monitoring is the metrics listener (APELORA_METRICS_LISTEN, …); see StartMetrics.
	Monitoring metrics.Config
	// SSO is single sign-on (APELORA_OIDC_*); Issuer "" when not configured.
	SSO SSOConfig
	// Metrics is the process's registry, from StartMetrics (not the environment); nil
	// records nothing.
	Metrics *metrics.Metrics
}

// Variable documents one environment variable: `apelora env` and `apelora-worker env` print
// them, and docs/configuration.md is generated from them (internal/app/configdoc).
type Variable struct {
	Name, Default, Meaning string
}

// The defaults Variables shows and ConfigFromEnv applies, each from one source: these, the
// server's (DefaultConsoleSessionTTL), the websocket transport's (DefaultPingInterval) and the
// policies' below.
const (
	defaultListen        = "127.0.0.1:8080"
	defaultLogLevel      = "info"
	defaultAccessLog     = "info"
	defaultShutdownGrace = 15 * time.Second
)

// durationText writes a default as an administrator would type it: 12h, 1m, 25s (not
// Go's 12h0m0s).
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Variables lists every APELORA_* variable the server reads.
func Variables() []Variable {
	return append([]Variable{
		{"APELORA_LISTEN", defaultListen, "address of the console (/), the API (/graphql), GraphiQL (/graphiql/), /healthz and /readyz"},
		{"APELORA_DATABASE_URL", "(none: local PostgreSQL)", "PostgreSQL connection string; when unset, a local PostgreSQL runs from the system's binaries in APELORA_STATE_DIR/postgres, started on demand"},
		{"APELORA_STATE_DIR", defaultStateDir(), "folder for the local PostgreSQL and other state"},
		{"APELORA_LOG_LEVEL", defaultLogLevel, "debug, info, warn or error; logs are JSON (log/slog) with the request id"},
		{"APELORA_ACCESS_LOG", defaultAccessLog, "level of the one log line per request: info, or debug to keep requests out of an info log (scripts/run.sh sets debug, so requests do not bury what it prints)"},
		{"APELORA_WS_PING_INTERVAL", durationText(graphqlws.DefaultPingInterval), "websocket keep-alive: the server pings each period; a client that answers none of the pings of two periods is dropped (close 1013)"},
		{server.EnvSocketsPerIdentity, strconv.Itoa(server.DefaultIdentityLimits.Sockets), fmt.Sprintf("websockets one identity may hold open on this server (1 to %d); one more is closed with 4429 and the reason", maxSocketsPerIdentity)},
		{server.EnvSubscriptionsPerIdentity, strconv.Itoa(server.DefaultIdentityLimits.Subscriptions), fmt.Sprintf("subscriptions one identity may hold on this server, over all its websockets (1 to %d); one more is refused alone with RATE_LIMITED", maxSubscriptionsPerIdentity)},
		{"APELORA_SHUTDOWN_GRACE", durationText(defaultShutdownGrace), "how long a SIGTERM waits for requests in flight (websocket streams end at once)"},
		{"APELORA_ALLOWED_ORIGINS", "(none)", "comma-separated extra browser origins (host patterns) allowed to open websockets"},
		{EnvTrustedProxies, "(none)", "comma-separated addresses or CIDRs of the reverse proxies (HAProxy) in front of this server: from them, and only them, X-Forwarded-For names the client that per-address limits (sign-in, requests without a valid token) key on"},
		{"APELORA_PUBLIC_URL", "(the request's host)", "URL new servers fetch enrol-member.sh from, e.g. https://apelora.example:8080; an https URL makes the console's cookie Secure when TLS ends in front of Apelora"},
		{"APELORA_CONSOLE_SESSION_TTL", durationText(server.DefaultConsoleSessionTTL), "how long a Fabric Console sign-in lasts (1m to 720h); the console then asks for the token again, saying why"},
		{EnvRequestTimeout, durationText(DefaultRequestTimeout), "bound on every call to Incus or MAAS, retries included (1s to 2m); a hung upstream answers UNAVAILABLE after it"},
		{EnvDriftInterval, durationText(DefaultDriftInterval), "how often the drift watcher (one replica at a time) re-checks every admitted member, besides at once after Incus events (1s to 24h); off: this replica never watches"},
		{EnvLeaderLease, durationText(postgres.DefaultLeaderLease), "how long a leader (the fencing worker, the drift watcher) leads without renewing its lease (3s to 5m): it renews every third of it and stops acting once it could not; a standby takes over once it has expired"},
		{EnvDriftOfflineAfter, durationText(DefaultDriftOfflineAfter), "how long an admitted member must be seen offline, or missing from the cluster, before that is drift (1s to 24h)"},
		{EnvFleetRefreshInterval, durationText(fleet.DefaultRefreshInterval), "how often fleetUpdates reads MAAS and Incus while anyone subscribes, besides within 200 ms after mutations, drift, fence and Incus events (1s to 24h); MAAS has no push, so its own changes arrive by this interval"},
		{EnvStepConcurrency, strconv.Itoa(server.DefaultStepConcurrency), "how many machine steps (register, commission, hardware tests, install, admit, release, … and their dry runs) run at once on this server, against MAAS and Incus (1 to 256); more, such as a bulk step's, wait their turn"},
		{"APELORA_INCUS_URL", "(none)", "HTTPS URL of a member of the Incus cluster Apelora adopts at start as a record (the first cluster; others are registered with registerCluster), e.g. https://10.0.0.5:8443, or several, comma-separated (asked in turn at start): Apelora learns every member's URL from the cluster and reaches it through any of them. A start refuses when it names another cluster than the one adopted before"},
		{"APELORA_INCUS_CLIENT_CERT", "(none)", "PEM file: Apelora's Incus admin identity, one client certificate every cluster trusts (incus config trust add-certificate; the incusClientCertificate query shows it). Alone with its key (no URL), it reaches the clusters registered through the API"},
		{"APELORA_INCUS_CLIENT_KEY", "(none)", "PEM file: the key of that certificate; it never leaves the process (never in the database)"},
		{"APELORA_INCUS_SERVER_CERT", "(none)", "PEM file: the certificate of the cluster of APELORA_INCUS_URL ($INCUS_DIR/cluster.crt), pinned by fingerprint (members' SANs may not name their addresses)"},
		{"APELORA_INCUS_SOCKET", "(none)", "instead of APELORA_INCUS_URL and _SERVER_CERT: the local daemon's unix socket ($INCUS_DIR/unix.socket), the cluster Apelora adopts at start (the client identity may be set too, for clusters registered through the API)"},
		{incus.EnvClusterName, clusters.DefaultName, "the name of the cluster of APELORA_INCUS_URL (or _SOCKET) when Apelora adopts it (the first start of this release, on an upgraded database or a new one); read only then: a cluster adopted keeps its name. The member-name rule: 1–63 lower-case letters, digits and hyphens"},
		{"APELORA_MAAS_URL", "(none: no MAAS)", "MAAS URL up to /MAAS, e.g. https://maas.example:5240/MAAS (plain http only to loopback)"},
		{"APELORA_MAAS_API_KEY", "(none)", "MAAS API key consumer:token:secret, read once at start; never logged, stored, returned or put in an error"},
		{"APELORA_MAAS_CA_FILE", "(system trust store)", "PEM file with the CA (or the pinned leaf) MAAS's certificate must chain to; a served certificate marked as a CA is refused. Re-read when it changes (and when MAAS's certificate is refused), so a rotated certificate needs no restart"},
	}, append(append(append(AuditVariables(), AuditExportVariables()...), MetricsVariables()...), SSOVariables()...)...)
}

// StateDirDefault says in words what defaultStateDir chooses, for the documentation (which
// must not depend on who generates it); Variables shows the folder itself.
const StateDirDefault = "/var/lib/apelora as root; else $XDG_STATE_HOME/apelora or ~/.local/state/apelora"

func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/apelora"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "apelora")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "apelora")
}

// ConfigFromEnv reads the configuration, naming any variable with a bad value.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		Listen:      get("APELORA_LISTEN", defaultListen),
		DatabaseURL: getenv("APELORA_DATABASE_URL"),
		StateDir:    get("APELORA_STATE_DIR", defaultStateDir()),
		LogLevel:    get("APELORA_LOG_LEVEL", defaultLogLevel),
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return c, fmt.Errorf("APELORA_LOG_LEVEL=%q: use debug, info, warn or error", c.LogLevel)
	}
	switch c.AccessLog = get("APELORA_ACCESS_LOG", defaultAccessLog); c.AccessLog {
	case "debug", "info":
	default:
		return c, fmt.Errorf("APELORA_ACCESS_LOG=%q: use info or debug", c.AccessLog)
	}
	var err error
	if c.PingInterval, err = duration(get, "APELORA_WS_PING_INTERVAL", graphqlws.DefaultPingInterval, time.Second); err != nil {
		return c, err
	}
	if c.ShutdownGrace, err = duration(get, "APELORA_SHUTDOWN_GRACE", defaultShutdownGrace, 0); err != nil {
		return c, err
	}
	if c.ConsoleSessionTTL, err = duration(get, "APELORA_CONSOLE_SESSION_TTL", server.DefaultConsoleSessionTTL, time.Minute); err != nil {
		return c, err
	}
	if c.ConsoleSessionTTL > 720*time.Hour {
		return c, fmt.Errorf("APELORA_CONSOLE_SESSION_TTL=%s: at most 720h (30 days)", c.ConsoleSessionTTL)
	}
	if c.RequestTimeout, err = requestTimeout(get); err != nil {
		return c, err
	}
	if c.DriftInterval, c.DriftOfflineAfter, err = driftSettings(get); err != nil {
		return c, err
	}
	if c.LeaderLease, err = boundedDuration(EnvLeaderLease, get(EnvLeaderLease, postgres.DefaultLeaderLease.String()),
		3*time.Second, 5*time.Minute, postgres.DefaultLeaderLease, "how long a leader may go without renewing its lease"); err != nil {
		return c, err
	}
	if c.FleetRefreshInterval, err = fleetRefreshInterval(get); err != nil {
		return c, err
	}
	if err = auditSettings(get, &c); err != nil {
		return c, err
	}
	if err = auditExportSettings(get, &c); err != nil {
		return c, err
	}
	if c.StepConcurrency, err = stepConcurrency(get); err != nil {
		return c, err
	}
	if c.IdentityLimits, err = identityLimits(get); err != nil {
		return c, err
	}
	if c.Monitoring, err = monitoringConfig(get); err != nil {
		return c, err
	}
	if u := strings.TrimSpace(getenv("APELORA_PUBLIC_URL")); u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c, fmt.Errorf("APELORA_PUBLIC_URL=%q: give the URL servers reach Apelora at, such as https://apelora.example:8080", u)
		}
		c.PublicURL = strings.TrimSuffix(u, "/")
	}
	if c.SSO, err = ssoConfig(get, c.PublicURL); err != nil {
		return c, err
	}
	inc, err := incus.ConfigFromEnv(getenv)
	if err != nil && !errors.Is(err, incus.ErrNotConfigured) {
		return c, err
	}
	if name := strings.TrimSpace(getenv(incus.EnvClusterName)); name != "" {
		if err := clusters.ValidateName(incus.EnvClusterName, name); err != nil {
			return c, fmt.Errorf("%s: %s", incus.EnvClusterName, apperr.PublicMessage(err))
		}
	}
	c.Incus = inc
	if c.MAAS, err = maasConfig(getenv); err != nil {
		return c, err
	}
	if c.TrustedProxies, err = server.ParseTrustedProxies(getenv(EnvTrustedProxies)); err != nil {
		return c, fmt.Errorf("%s: %w: give the addresses of the proxies in front of this server, comma-separated", EnvTrustedProxies, err)
	}
	if o := getenv("APELORA_ALLOWED_ORIGINS"); o != "" {
		for _, p := range strings.Split(o, ",") {
			if p = strings.TrimSpace(p); p != "" {
				c.AllowedOrigins = append(c.AllowedOrigins, p)
			}
		}
	}
	return c, nil
}

// EnvStepConcurrency bounds the machine steps running at once (server.Config.StepConcurrency).
const (
	EnvStepConcurrency = "APELORA_STEP_CONCURRENCY"
	maxStepConcurrency = 256
)

func stepConcurrency(get func(string, string) string) (int, error) {
	v := get(EnvStepConcurrency, strconv.Itoa(server.DefaultStepConcurrency))
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxStepConcurrency {
		return 0, fmt.Errorf("%s=%q: give a whole number from 1 to %d, such as %d", EnvStepConcurrency, v, maxStepConcurrency, server.DefaultStepConcurrency)
	}
	return n, nil
}

// The bounds of the per-identity websocket limits.
const (
	maxSocketsPerIdentity       = 100000
	maxSubscriptionsPerIdentity = 1000000
)

func identityLimits(get func(string, string) string) (server.IdentityLimits, error) {
	var l server.IdentityLimits
	for _, s := range []struct {
		name      string
		def, most int
		into      *int
	}{
		{server.EnvSocketsPerIdentity, server.DefaultIdentityLimits.Sockets, maxSocketsPerIdentity, &l.Sockets},
		{server.EnvSubscriptionsPerIdentity, server.DefaultIdentityLimits.Subscriptions, maxSubscriptionsPerIdentity, &l.Subscriptions},
	} {
		v := get(s.name, strconv.Itoa(s.def))
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > s.most {
			return l, fmt.Errorf("%s=%q: give a whole number from 1 to %d, such as %d", s.name, v, s.most, s.def)
		}
		*s.into = n
	}
	return l, nil
}

func duration(get func(string, string) string, name string, def, least time.Duration) (time.Duration, error) {
	v := get(name, durationText(def))
	d, err := time.ParseDuration(v)
	if err != nil || d < least {
		return 0, fmt.Errorf("%s=%q: give a duration of at least %v such as %s", name, v, least, durationText(def))
	}
	return d, nil
}

// The request-timeout policy: one bound, from one variable, on every call to Incus or
// MAAS that a request (or a change, or a fence round) waits on. The adapters enforce it per
// call, retries included, so a hung upstream fails the first call that reaches it.
const (
	EnvRequestTimeout     = "APELORA_REQUEST_TIMEOUT"
	DefaultRequestTimeout = 10 * time.Second
	minRequestTimeout     = time.Second
	// A change (detached from its client) is bounded at three minutes in all; a single call
	// must leave room for the rest of it.
	maxRequestTimeout = 2 * time.Minute
)

// upstreamTimeout is the policy's bound (a Config built in code may leave it zero).
func (c Config) upstreamTimeout() time.Duration {
	if c.RequestTimeout <= 0 {
		return DefaultRequestTimeout
	}
	return c.RequestTimeout
}

// incusClient and maasClient are the adapters' configurations with the policy applied:
// every client the server or the worker builds goes through them.
func (c Config) incusClient(log *slog.Logger) incus.Config {
	ic := c.Incus
	ic.Timeout, ic.Logger = c.upstreamTimeout(), log
	ic.WrapTransport = chain(c.Incus.WrapTransport, c.Metrics.Transport(metrics.Incus, incus.OperationName))
	return ic
}

func (c Config) maasClient(log *slog.Logger) maas.Config {
	mc := c.MAAS
	mc.RequestTimeout, mc.Logger = c.upstreamTimeout(), log
	mc.WrapTransport = chain(c.MAAS.WrapTransport, c.Metrics.Transport(metrics.MAAS, maas.OperationName))
	return mc
}

// chain keeps a transport wrapper the configuration already has (a test's recorder)
// inside the metrics' one.
func chain(inner, outer func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	if inner == nil {
		return outer
	}
	return func(rt http.RoundTripper) http.RoundTripper { return outer(inner(rt)) }
}

// boundedDuration parses the setting name's value v, which must lie from least to most;
// the error names the variable, the range, an example and what the setting is for.
func boundedDuration(name, v string, least, most, example time.Duration, what string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < least || d > most {
		return 0, fmt.Errorf("%s=%q: give a duration from %v to %v, such as %v (%s)", name, v, least, most, example, what)
	}
	return d, nil
}

func requestTimeout(get func(string, string) string) (time.Duration, error) {
	return boundedDuration(EnvRequestTimeout, get(EnvRequestTimeout, DefaultRequestTimeout.String()),
		minRequestTimeout, maxRequestTimeout, DefaultRequestTimeout, "how long a call to Incus or MAAS may take before it is reported unavailable")
}

// EnvTrustedProxies names the reverse proxies whose X-Forwarded-For is believed.
const EnvTrustedProxies = "APELORA_TRUSTED_PROXIES"

// EnvLeaderLease is the leader leases' length (postgres.DefaultLeaderLease by default).
const EnvLeaderLease = "APELORA_LEADER_LEASE"

// leaderLease is the leases' length (a Config built in code may leave it zero).
func (c Config) leaderLease() time.Duration {
	if c.LeaderLease <= 0 {
		return postgres.DefaultLeaderLease
	}
	return c.LeaderLease
}

// Drift's settings: the watcher's interval and the offline threshold.
const (
	EnvDriftInterval         = "APELORA_DRIFT_INTERVAL"
	EnvDriftOfflineAfter     = "APELORA_DRIFT_OFFLINE_AFTER"
	DefaultDriftInterval     = time.Minute
	DefaultDriftOfflineAfter = 2 * time.Minute
	maxDriftSetting          = 24 * time.Hour
)

func driftSettings(get func(string, string) string) (interval, offline time.Duration, err error) {
	if v := get(EnvDriftInterval, DefaultDriftInterval.String()); v != "off" {
		if interval, err = boundedDuration(EnvDriftInterval, v, time.Second, maxDriftSetting, DefaultDriftInterval,
			"how often drift re-checks the admitted members"); err != nil {
			return 0, 0, fmt.Errorf("%w, or off to keep this replica from watching", err)
		}
	}
	offline, err = boundedDuration(EnvDriftOfflineAfter, get(EnvDriftOfflineAfter, DefaultDriftOfflineAfter.String()),
		time.Second, maxDriftSetting, DefaultDriftOfflineAfter, "how long a member may be offline before drift says so")
	return interval, offline, err
}

// maasConfig reads APELORA_MAAS_*. The key is read here, once, and kept only in memory.
func maasConfig(getenv func(string) string) (maas.Config, error) {
	u := strings.TrimSpace(getenv("APELORA_MAAS_URL"))
	key := strings.TrimSpace(getenv("APELORA_MAAS_API_KEY"))
	ca := strings.TrimSpace(getenv("APELORA_MAAS_CA_FILE"))
	switch {
	case u == "" && key == "" && ca == "":
		return maas.Config{}, nil
	case u == "":
		return maas.Config{}, errors.New("APELORA_MAAS_API_KEY or APELORA_MAAS_CA_FILE is set but APELORA_MAAS_URL is not: set the MAAS URL too, or unset both")
	case key == "":
		return maas.Config{}, errors.New("APELORA_MAAS_URL is set but APELORA_MAAS_API_KEY is not: give the key of a MAAS user that can read machines (consumer:token:secret)")
	}
	c := maas.Config{BaseURL: u, APIKey: key, CAFile: ca}
	// Building a client checks the URL, the key's form and the CA file without calling MAAS.
	if _, err := maas.New(c); err != nil {
		return maas.Config{}, err
	}
	return c, nil
}
