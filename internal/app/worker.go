package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/rolling"
)

// WorkerConfig is apelora-worker's configuration: the server's (database, Incus, MAAS,
// log level) plus the fence limits. The MAAS key here is the worker's own, with power
// rights; it is read once and kept only inside the MAAS client.
type WorkerConfig struct {
	Config
	// DeprecatedFenceURLs are the members APELORA_FENCE_INCUS_URLS listed (deprecated: the
	// Incus client reaches the cluster through any member and learns them itself); they
	// were added to the Incus client's fallback addresses, and the worker warns at start.
	DeprecatedFenceURLs []string
	Limits              fencing.Limits
	Poll                time.Duration
	DrillInterval       time.Duration
	// Name identifies this worker in events and logs (APELORA_WORKER_NAME).
	Name string
	// RollingOnlineTimeout bounds a rolling reboot's wait for a member to go down after
	// its power-off and to come back after its power-on.
	RollingOnlineTimeout time.Duration
}

// WorkerVariables lists the variables apelora-worker reads beyond the server's database,
// Incus and MAAS ones.
func WorkerVariables() []Variable {
	var out []Variable
	for _, d := range workerDurations {
		out = append(out, Variable{d.name, durationText(d.def), d.meaning})
	}
	return append(out,
		Variable{EnvDeprecatedFenceURLs, "(none)", "deprecated: read as more addresses of APELORA_INCUS_URL's list (the worker warns at start); the worker, like the API, reaches the cluster through any member it learns from the cluster"},
		Variable{"APELORA_WORKER_NAME", "(host name and process id)", "this worker's name in fence events and logs"},
	)
}

// WorkerReads says whether apelora-worker reads one of the server's variables (Variables):
// the database, the state folder and the audit key, the log level, the request timeout, the
// leader lease, Incus, MAAS and the metrics listener. `apelora-worker env` lists those and
// WorkerVariables.
func WorkerReads(name string) bool {
	switch name {
	case "APELORA_DATABASE_URL", "APELORA_STATE_DIR", "APELORA_LOG_LEVEL", EnvRequestTimeout, EnvLeaderLease, EnvAuditKeyFile,
		metrics.EnvListen, metrics.EnvAllowRemote, metrics.EnvPprof:
		return true
	}
	return strings.HasPrefix(name, "APELORA_INCUS_") || strings.HasPrefix(name, "APELORA_MAAS_")
}

// workerDurations are the worker's duration settings: WorkerVariables lists them and
// WorkerConfigFromEnv reads them, so each default is written once.
var workerDurations = []struct {
	name    string
	def     time.Duration
	least   time.Duration
	into    func(w *WorkerConfig) *time.Duration
	meaning string
}{
	{"APELORA_FENCE_OFFLINE_AFTER", 60 * time.Second, time.Second, func(w *WorkerConfig) *time.Duration { return &w.Limits.OfflineAfter },
		"how long a member must have been seen offline before it is powered off"},
	{"APELORA_FENCE_COOLDOWN", 15 * time.Minute, time.Second, func(w *WorkerConfig) *time.Duration { return &w.Limits.Cooldown },
		"no second power-off of a member within this time of the last request"},
	{"APELORA_FENCE_POLL_INTERVAL", 5 * time.Second, 100 * time.Millisecond, func(w *WorkerConfig) *time.Duration { return &w.Poll },
		"how often the worker reads the members (and a standby tries for the lock)"},
	{"APELORA_FENCE_DRILL_INTERVAL", time.Hour, time.Second, func(w *WorkerConfig) *time.Duration { return &w.DrillInterval },
		"how often each mapping gets a readiness drill (UUID check and a live power read, no action)"},
	{"APELORA_FENCE_CONFIRM_TIMEOUT", 3 * time.Minute, time.Second, func(w *WorkerConfig) *time.Duration { return &w.Limits.ConfirmTimeout },
		"how long after a request a power-state read may say off before the fence is reported not confirmed"},
	{"APELORA_ROLLING_ONLINE_TIMEOUT", 10 * time.Minute, time.Second, func(w *WorkerConfig) *time.Duration { return &w.RollingOnlineTimeout },
		"how long a rolling reboot waits for a member to be seen down after its power-off, and back after its power-on, before it stops (the member stays evacuated)"},
	{"APELORA_FENCE_SETTLE", 20 * time.Second, 0, func(w *WorkerConfig) *time.Duration { return &w.Limits.Settle },
		"after Incus could not be read (or had no quorum), how long it must answer before a member it lists Offline counts"},
}

// WorkerConfigFromEnv reads the worker's configuration, naming any variable with a bad
// value. Incus and MAAS (with a key) are required: a worker without them cannot fence.
func WorkerConfigFromEnv(getenv func(string) string) (WorkerConfig, error) {
	base, err := ConfigFromEnv(getenv)
	if err != nil {
		return WorkerConfig{}, err
	}
	w := WorkerConfig{Config: base}
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	for _, d := range workerDurations {
		if *d.into(&w), err = duration(get, d.name, d.def, d.least); err != nil {
			return w, err
		}
	}
	// An outage counts as continuous only while someone looked at least this often. A
	// take-over leaves a gap of up to a lease and a poll (the dead leader's lease expires
	// first; a leader that lost its own stands aside as long): twice the lease covers it.
	w.Limits.MaxObservationGap = max(3*w.Poll, 30*time.Second, 2*w.leaderLease())
	if err := w.Limits.Validate(); err != nil {
		return w, fmt.Errorf("fence limits: %w (APELORA_FENCE_COOLDOWN, APELORA_FENCE_CONFIRM_TIMEOUT)", err)
	}
	if !w.Incus.HasCluster() {
		return w, errors.New("apelora-worker needs Incus to watch the members: set APELORA_INCUS_URL, APELORA_INCUS_CLIENT_CERT, APELORA_INCUS_CLIENT_KEY and APELORA_INCUS_SERVER_CERT (or APELORA_INCUS_SOCKET)")
	}
	if w.MAAS.BaseURL == "" {
		return w, errors.New("apelora-worker needs MAAS to power members off: set APELORA_MAAS_URL and APELORA_MAAS_API_KEY (the key of a MAAS user that may read and power the fenced machines), and APELORA_MAAS_CA_FILE unless MAAS's certificate is in the system trust store")
	}
	if v := strings.TrimSpace(getenv(EnvDeprecatedFenceURLs)); v != "" {
		if w.Incus.UsesSocket() {
			return w, errors.New(EnvDeprecatedFenceURLs + " needs HTTPS Incus (APELORA_INCUS_URL), not the socket; it is deprecated: unset it")
		}
		w.DeprecatedFenceURLs = incus.SplitURLs(v)
		c := w.Incus
		c.FallbackURLs = append(c.FallbackURLs, w.DeprecatedFenceURLs...)
		if err := c.Validate(); err != nil {
			return w, fmt.Errorf("%s: %w", EnvDeprecatedFenceURLs, err)
		}
		w.Incus = c
	}
	w.Name = get("APELORA_WORKER_NAME", "")
	if w.Name == "" {
		host, _ := os.Hostname()
		w.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return w, nil
}

// EnvDeprecatedFenceURLs is the worker's former list of fallback members, replaced by the
// Incus client's own discovery (one rule for the API and the worker).
const EnvDeprecatedFenceURLs = "APELORA_FENCE_INCUS_URLS"

// RunWorker runs apelora-worker on an open database until ctx ends: it stands by while
// another worker holds the fence lease, and leads when none does.
func RunWorker(ctx context.Context, cfg WorkerConfig, store *postgres.Store, log *slog.Logger) error {
	writes := store.Writes() // the process's one seam for changes (plan.Writes)
	store.SetChangeLease(cfg.leaderLease())
	if cfg.Metrics != nil {
		writes.AfterEach(cfg.Metrics.Write)
	}
	if len(cfg.DeprecatedFenceURLs) > 0 {
		log.Warn(EnvDeprecatedFenceURLs+" is deprecated: the worker reaches the cluster through any member it learns from the cluster's member list, as the API does; its addresses are read as more addresses of APELORA_INCUS_URL for now: list them there (comma-separated) and unset it",
			"addresses", cfg.DeprecatedFenceURLs)
	}
	// The cluster of APELORA_INCUS_*, adopted as the API adopts it (the worker refuses to
	// start when those settings name another cluster than the one adopted before: it must
	// never fence through another cluster's records), reached through the pool's client.
	ic := cfg.incusClient(log)
	ic.Writes = writes
	ics, err := startClusters(ctx, cfg.Config, store, ic, log)
	if err != nil {
		return err
	}
	defer ics.pool.Close()
	if ics.env == nil {
		return errors.New("apelora-worker needs the Incus cluster of APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) to watch its members")
	}
	ic2, err := ics.pool.Client(ctx, ics.env.ID)
	if err != nil {
		return err
	}
	learnMembers(ctx, ic2, log)
	// Each MAAS read and power command is bounded by the request timeout; a live
	// power-state read by max(75 s, it), as MAAS itself waits up to 60 s for the BMC.
	mc := cfg.maasClient(log)
	mc.MaxRetries = -1 // the worker retries every round itself; a round must not stall on retries
	mc.Writes = writes
	client, err := maas.New(mc)
	if err != nil {
		return err
	}
	cluster := incus.NewFencePorts(ic2)
	threshold, err := checkOfflineThreshold(ctx, cfg, cluster, log)
	if err != nil {
		return err
	}
	// The leader watches every adopted cluster, each in its own loop (a cluster registered
	// or removed while it runs is picked up at the next poll); the environment's cluster
	// was checked above, the others are at their first answer (one too short pauses
	// itself only).
	w := &fencing.Worker{
		ID: cfg.Name, Limits: cfg.Limits, Poll: cfg.Poll, DrillInterval: cfg.DrillInterval,
		Clusters: workerClusters{ics}, MAAS: maas.NewFencePorts(client),
		Leadership: store.FenceLeadership("apelora-worker "+cfg.Name, cfg.leaderLease()), Drills: store.FenceDrills(),
		Lease: cfg.leaderLease(),
		Log:   log, Observer: cfg.fenceObserver(),
	}
	// The same leader's process drives rolling reboots: it holds the power credential. Each
	// step is an audit event, sealed with the audit key: a worker without it drives none
	// (a worker with the key takes the rolling lease), so no step happens unrecorded.
	if store.SealsAudit() {
		go newRollingDriver(cfg, store, ics, client, threshold, log).Run(ctx)
	} else {
		log.Error("this worker holds no audit key, so it drives no rolling reboot (each step is a sealed audit event): give it the servers' key file (APELORA_AUDIT_KEY_FILE); it fences as before")
	}
	log.Info("apelora-worker starting", "worker", cfg.Name, "limits", cfg.Limits.Describe(), "poll", cfg.Poll.String(),
		"drill_interval", cfg.DrillInterval.String(), "request_timeout", cfg.upstreamTimeout().String(), "incus", ic2.Endpoint(), "incus_addresses", len(ic.FallbackURLs)+1, "maas", client)
	return w.Run(ctx)
}

// workerClusters lists the clusters the fence worker watches: every adopted cluster of
// the registry (read again at each call, so registrations and removals on any replica are
// seen), each reached through its pool client.
type workerClusters struct{ ics *incusClusters }

func (w workerClusters) Watched(ctx context.Context) ([]fencing.Watched, error) {
	if err := w.ics.registry.Refresh(ctx); err != nil {
		return nil, err
	}
	var out []fencing.Watched
	for _, c := range w.ics.registry.Adopted() {
		p := poolFence{pool: w.ics.pool, cluster: c.ID}
		out = append(out, fencing.Watched{ID: c.ID, Name: c.Name, Members: p, Config: p})
	}
	return out, nil
}

// poolFence is one cluster's fence ports through the pool: a cluster whose client cannot
// be made reads as unreadable, which pauses that cluster only.
type poolFence struct {
	pool    *incus.Pool
	cluster int64
}

func (p poolFence) Observe(ctx context.Context) ([]fencing.Observation, error) {
	f, err := p.pool.Fence(ctx, p.cluster)
	if err != nil {
		return nil, err
	}
	return f.Observe(ctx)
}

func (p poolFence) ServerConfig(ctx context.Context) (map[string]string, error) {
	f, err := p.pool.Fence(ctx, p.cluster)
	if err != nil {
		return nil, err
	}
	return f.ServerConfig(ctx)
}

// checkOfflineThreshold refuses an APELORA_FENCE_OFFLINE_AFTER that Incus's own
// cluster.offline_threshold could outlast (fencing.Limits.CheckOfflineThreshold). When
// Incus cannot be asked at start, its default threshold is assumed, and the cluster view
// warns later if the real one is higher. It returns the threshold (a rolling reboot's
// settle period follows from it).
func checkOfflineThreshold(ctx context.Context, cfg WorkerConfig, cluster fencing.ClusterConfig, log *slog.Logger) (time.Duration, error) {
	threshold := fencing.DefaultOfflineThreshold
	rctx, cancel := context.WithTimeout(ctx, cfg.upstreamTimeout())
	defer cancel()
	if sc, err := cluster.ServerConfig(rctx); err != nil {
		log.Warn("cannot read Incus's cluster.offline_threshold at start: checking APELORA_FENCE_OFFLINE_AFTER against its default", "default", threshold.String(), "error", err)
	} else {
		threshold = fencing.OfflineThreshold(sc)
	}
	if err := cfg.Limits.CheckOfflineThreshold(threshold); err != nil {
		return 0, fmt.Errorf("APELORA_FENCE_OFFLINE_AFTER: %w", err)
	}
	return threshold, nil
}

// newRollingDriver builds the rolling reboot driver on the worker's clients: every
// cluster's through the pool (each task in its own cluster), evacuate and restore through
// package maintenance (restore's admission checks included), the power cycle through the
// worker's MAAS client.
func newRollingDriver(cfg WorkerConfig, store *postgres.Store, ics *incusClusters, mc *maas.Client, offlineThreshold time.Duration, log *slog.Logger) *rolling.Driver {
	maasSide := maas.NewPorts(mc)
	// Restore's admission checks compare each member with its record's cluster.
	checker := &admission.Checker{Publish: cfg.Metrics.Admissions(store.AdmissionPublisher()), Profiles: store.HardwareProfiles(),
		Ports: incus.As[admission.Incus](ics.pool), Clusters: ics.registry, MAAS: maasSide, MAASInventory: maasSide}
	mnt := &maintenance.Service{Store: store.Maintenance(), Checker: checker, Ports: incus.As[maintenance.Incus](ics.pool), Clusters: ics.registry}
	d := &rolling.Driver{
		Store: store.Rolling(), Ports: incus.As[rolling.Incus](ics.pool), Clusters: ics.registry, Power: maas.NewFencePorts(mc), Maintenance: mnt, Tasks: store.Maintenance(),
		Auditor: store, Leadership: store.RollingLeadership("apelora-worker rolling "+cfg.Name, cfg.leaderLease()), Lease: cfg.leaderLease(),
		Actor: "apelora-worker " + cfg.Name, Poll: rollingPoll, Log: log,
		Limits: rolling.Limits{OnlineTimeout: cfg.RollingOnlineTimeout,
			// Incus's members heartbeat each other every half offline threshold.
			Settle: offlineThreshold/2 + 2*time.Second},
	}
	if cfg.Metrics != nil {
		d.Observer = cfg.Metrics
	}
	return d
}

// rollingPoll is how often the driver looks at the running rolling reboot: each step
// waits on Incus or MAAS, so a second is plenty and costs one read of each.
const rollingPoll = time.Second
