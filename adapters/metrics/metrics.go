// Package metrics is what operators watch Apelora with: Prometheus metrics of GraphQL
// operations, upstream calls (Incus, MAAS, PostgreSQL), subscriptions, audit writes,
// admission verdicts, fencing and source availability, plus the Go runtime and the
// process. Each process has one registry of its own (never the global default one),
// served by Handler on a listener of its own (see Config).
//
// Everything here is told by small observer interfaces the other packages declare
// (server.Observer, postgres.Observer, fencing.Observer, an http.RoundTripper for the
// upstream clients): those packages do not import Prometheus. Every method is safe on a
// nil *Metrics, which records nothing, so wiring without metrics needs no special case.
package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/rolling"
)

// Role says which process the registry is for: each exports its own metrics (and both
// the upstream, runtime and process ones).
type Role string

const (
	Server Role = "server" // apelora serve
	Worker Role = "worker" // apelora-worker
)

// Upstreams, as the upstream label names them.
const (
	Incus    = "incus"
	MAAS     = "maas"
	Postgres = "postgres"
)

// Metrics is one process's registry and the collectors Apelora records into.
type Metrics struct {
	role Role
	reg  *prometheus.Registry

	// rollingStep is how long the rolling reboot's current member has been in its step (worker).
	rollingStep prometheus.Gauge

	operations   *prometheus.CounterVec
	opDuration   *prometheus.HistogramVec
	subsOpen     *prometheus.GaugeVec
	subsStarted  *prometheus.CounterVec
	upstream     *prometheus.CounterVec
	upDuration   *prometheus.HistogramVec
	writes       *prometheus.CounterVec
	auditWrites  *prometheus.CounterVec
	auditLost    prometheus.Counter
	exportLag    *prometheus.GaugeVec
	trailOK      prometheus.Gauge
	trailProblem *prometheus.CounterVec
	plans        *prometheus.CounterVec
	verdicts     *prometheus.CounterVec
	checkFails   *prometheus.CounterVec
	sources      *prometheus.GaugeVec
	sourceAsked  *prometheus.GaugeVec
	fenceEvents  *prometheus.CounterVec
	fenceLeading prometheus.Gauge
	noQuorum     *prometheus.GaugeVec
	paused       *prometheus.GaugeVec
	fenceRounds  *prometheus.CounterVec
	lastRound    prometheus.Gauge
	lease        *leaseCollector
}

// Latency buckets (seconds): GraphQL answers and upstream calls from a millisecond to
// the request timeout's ceiling (2 min) and a change's (3 min).
var buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180}

// New returns a registry for a process of the given role with its collectors
// registered, the Go runtime and process collectors included.
func New(role Role) *Metrics {
	m := &Metrics{role: role, reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.upstream = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_upstream_requests_total",
		Help: "Calls to Incus, MAAS and PostgreSQL by upstream, operation (method and path template, or statement and table) and outcome (2xx, 3xx, 4xx, 5xx, ok, timeout, canceled, error).",
	}, []string{"upstream", "operation", "outcome"})
	m.upDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apelora_upstream_request_duration_seconds",
		Help:    "How long calls to Incus, MAAS and PostgreSQL took, to the end of the answer's body.",
		Buckets: buckets,
	}, []string{"upstream", "operation"})
	m.writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_writes_total",
		Help: "Changes through the one write seam (plan.Writes: Incus and MAAS requests other than reads, a change's SQL writes, NOTIFYs, join tokens) by system (INCUS, MAAS, DATABASE) and mode (made; planned: a call of a dry run's plan, not sent).",
	}, []string{"system", "mode"})
	m.reg.MustRegister(m.upstream, m.upDuration, m.writes)
	// The lease this process can lead with: the worker's fence lease, a replica's drift one.
	m.lease = &leaseCollector{role: "drift"}
	if role == Worker {
		m.lease.role = "fence"
	}
	m.reg.MustRegister(m.lease)

	switch role {
	case Server:
		m.registerServer()
	case Worker:
		m.registerWorker()
	}
	return m
}

func (m *Metrics) registerServer() {
	m.operations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_graphql_operations_total",
		Help: "GraphQL queries and mutations answered, by type, operation (its first root field: the schema bounds the set) and code (OK, or the first error's extensions.code).",
	}, []string{"type", "operation", "code"})
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apelora_graphql_operation_duration_seconds",
		Help:    "How long GraphQL queries and mutations took, from the request to the answer.",
		Buckets: buckets,
	}, []string{"type", "operation"})
	m.subsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_graphql_subscriptions_open",
		Help: "GraphQL subscriptions open now, by subscription (root field).",
	}, []string{"subscription"})
	m.subsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_graphql_subscriptions_started_total",
		Help: "GraphQL subscriptions started (refused ones included), by subscription (root field).",
	}, []string{"subscription"})
	m.auditWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_audit_writes_total",
		Help: "Attempts to write an audit event to PostgreSQL, by result (written, failed). A failed change is retried once by the gate as a FAILED event.",
	}, []string{"result"})
	m.auditLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "apelora_audit_events_lost_total",
		Help: "Audit events that could not be written at all (only the server log has them).",
	})
	m.plans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_plans_total",
		Help: "Dry runs (dryRun: true) answered to callers allowed to make the change, by mutation and result (planned, refused: the plan holds a refusal, invalid: INVALID_INPUT, failed). They change nothing and are not audit events; dry runs refused for permission are audited as REFUSED.",
	}, []string{"mutation", "result"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_admission_verdicts_total",
		Help: "Admission check runs by verdict (ADMISSIBLE, BLOCKED) and trigger (REPORT, ADMISSION).",
	}, []string{"verdict", "trigger"})
	m.checkFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_admission_check_failures_total",
		Help: "Admission checks that FAILed, by check name.",
	}, []string{"check"})
	m.sources = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_source_available",
		Help: "Whether the last read of a configured source (incus, maas) succeeded: 1 or 0. Absent until the first read.",
	}, []string{"source"})
	m.sourceAsked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_source_checked_timestamp_seconds",
		Help: "When a source was last read (Unix time), so a stale availability can be told apart.",
	}, []string{"source"})
	m.exportLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_audit_export_lag_events",
		Help: "Audit events not yet acknowledged by an export sink (syslog, jsonl), as the replica exporting to it sees them; 0 on the replicas standing by.",
	}, []string{"sink"})
	m.trailOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "apelora_audit_trail_verified",
		Help: "1 while the latest check of the audit trail (every APELORA_AUDIT_CHECKPOINT_INTERVAL: seals, tree, witnessed heads, checkpoints, every event) found nothing wrong, 0 while it finds a problem. The console shows a banner and /readyz says so.",
	})
	m.trailProblem = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_audit_trail_problems_total",
		Help: "Checks of the audit trail that found a problem, by kind: append (the stored tree refuses the next event: every change is refused), events (events changed, deleted, inserted or moved), seal (the newest event is not sealed for its tree), witness (the tree is shorter than, or forks from, a head this replica witnessed), checkpoint (a checkpoint row not signed by the audit key, beyond the tree, forked or deleted).",
	}, []string{"kind"})
	m.reg.MustRegister(m.operations, m.opDuration, m.subsOpen, m.subsStarted, m.auditWrites, m.auditLost, m.plans,
		m.verdicts, m.checkFails, m.sources, m.sourceAsked, m.exportLag, m.trailOK, m.trailProblem)
	m.trailOK.Set(1)
	for _, k := range auditlog.Kinds {
		m.trailProblem.WithLabelValues(k)
	}

	// Series that alerts use exist from the start at 0: increase() cannot see a counter's
	// first step from nothing.
	m.auditWrites.WithLabelValues("written")
	m.auditWrites.WithLabelValues("failed")
	m.exportLag.WithLabelValues("syslog")
	m.exportLag.WithLabelValues("jsonl")
	for _, v := range []admission.Verdict{admission.Admissible, admission.Blocked} {
		for _, t := range []admission.Trigger{admission.TriggerReport, admission.TriggerAdmission} {
			m.verdicts.WithLabelValues(string(v), string(t))
		}
	}
	for _, c := range admission.CheckNames {
		m.checkFails.WithLabelValues(c)
	}
}

func (m *Metrics) registerWorker() {
	m.fenceEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_fence_events_total",
		Help: "Fence events this worker recorded, by kind (decisions: ELIGIBLE, REFUSED, REQUESTED; outcomes: CONFIRMED, NOT_CONFIRMED; OFFLINE, BACK_ONLINE, LEADING, QUORUM_LOST, QUORUM_BACK) and reason.",
	}, []string{"kind", "reason"})
	m.fenceLeading = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "apelora_fence_leading",
		Help: "1 while this apelora-worker holds the fence lease and acts, 0 while it stands by.",
	})
	m.fenceRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apelora_fence_rounds_total",
		Help: "Fence rounds (read the members, decide, act) this worker ran while leading, by result (ok, failed).",
	}, []string{"result"})
	m.lastRound = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "apelora_fence_last_round_timestamp_seconds",
		Help: "When this worker last finished a fence round (Unix time); 0 if it never led.",
	})
	m.noQuorum = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_incus_no_quorum_since_timestamp_seconds",
		Help: "When the leading apelora-worker first saw the cluster's Incus without quorum (its members answer, its database does not; Unix time): fencing in that cluster is paused. 0 while Incus has its quorum; no series while this worker does not lead.",
	}, []string{"cluster"})
	m.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apelora_fence_cluster_paused",
		Help: "1 while fencing is paused in the cluster (its members cannot be read, no quorum, or its offline threshold too long for the limits; the cluster view's fencing.pausedCode says which), 0 while the leading worker acts there; no series while this worker does not lead.",
	}, []string{"cluster"})
	m.rollingStep = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "apelora_rolling_reboot_step_seconds",
		Help: "Seconds the running rolling reboot's current member has been in its step, as the worker that drives it last saw; 0 while none runs or this worker does not drive it (rollingReboot, or apeloractl rolling-reboot status, names the member and step).",
	})
	m.reg.MustRegister(m.fenceEvents, m.fenceLeading, m.fenceRounds, m.lastRound, m.rollingStep, m.noQuorum, m.paused)
	for _, k := range fencing.Kinds {
		m.fenceEvents.WithLabelValues(string(k), "")
	}
	for _, r := range fencing.Reasons {
		m.fenceEvents.WithLabelValues(string(fencing.KindRefused), string(r))
		m.fenceEvents.WithLabelValues(string(fencing.KindNotConfirmed), string(r))
	}
	m.fenceRounds.WithLabelValues("ok")
	m.fenceRounds.WithLabelValues("failed")
}

// Registry is the process's registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Operation records one GraphQL query or mutation (server.Observer).
func (m *Metrics) Operation(kind, name, code string, took time.Duration) {
	if m == nil || m.operations == nil {
		return
	}
	m.operations.WithLabelValues(kind, name, code).Inc()
	m.opDuration.WithLabelValues(kind, name).Observe(took.Seconds())
}

// Subscriptions declares the schema's subscriptions, so each is exported at 0 before
// its first (server.Observer).
func (m *Metrics) Subscriptions(names []string) {
	if m == nil || m.subsOpen == nil {
		return
	}
	for _, n := range names {
		m.subsOpen.WithLabelValues(n)
		m.subsStarted.WithLabelValues(n)
	}
}

// Subscribed records a subscription that started; ended is called once when it ends
// (server.Observer).
func (m *Metrics) Subscribed(name string) (ended func()) {
	if m == nil || m.subsOpen == nil {
		return func() {}
	}
	m.subsStarted.WithLabelValues(name).Inc()
	g := m.subsOpen.WithLabelValues(name)
	g.Inc()
	return g.Dec
}

// Planned records a dry run answered to a caller allowed to make the change
// (server.Observer).
func (m *Metrics) Planned(mutation, result string) {
	if m == nil || m.plans == nil {
		return
	}
	m.plans.WithLabelValues(mutation, result).Inc()
}

// ExportLag records an export sink's lag (auditexport.Observer); kind is syslog or jsonl.
func (m *Metrics) ExportLag(kind string, events int64) {
	if m == nil || m.exportLag == nil {
		return
	}
	if kind != "syslog" && kind != "jsonl" {
		kind = "other"
	}
	m.exportLag.WithLabelValues(kind).Set(float64(events))
}

// TrailChecked records one check of the audit trail (auditlog.Observer): kind is the
// problem's, "" when it found none.
func (m *Metrics) TrailChecked(kind string) {
	if m == nil || m.trailOK == nil {
		return
	}
	if kind == "" {
		m.trailOK.Set(1)
		return
	}
	m.trailOK.Set(0)
	if !slices.Contains(auditlog.Kinds, kind) {
		kind = "other"
	}
	m.trailProblem.WithLabelValues(kind).Inc()
}

// AuditLost records an audit event that could not be written at all (server.Observer).
func (m *Metrics) AuditLost() {
	if m == nil || m.auditLost == nil {
		return
	}
	m.auditLost.Inc()
}

// AuditWrite records one attempt to write an audit event (postgres.Observer).
func (m *Metrics) AuditWrite(err error) {
	if m == nil || m.auditWrites == nil {
		return
	}
	if err != nil {
		m.auditWrites.WithLabelValues("failed").Inc()
		return
	}
	m.auditWrites.WithLabelValues("written").Inc()
}

// Statement records one PostgreSQL statement under its bounded name (postgres.Observer).
func (m *Metrics) Statement(name string, took time.Duration, err error) {
	m.Upstream(Postgres, name, outcomeOf(err), took)
}

// Write counts one change through the write seam (a plan.Writes hook).
func (m *Metrics) Write(s plan.System, planned bool) {
	if m == nil {
		return
	}
	mode := "made"
	if planned {
		mode = "planned"
	}
	m.writes.WithLabelValues(string(s), mode).Inc()
}

// Upstream records one call to an upstream. operation must come from a bounded set.
func (m *Metrics) Upstream(upstream, operation, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.upstream.WithLabelValues(upstream, operation, outcome).Inc()
	m.upDuration.WithLabelValues(upstream, operation).Observe(took.Seconds())
}

// SourceAvailable records whether a read of a source (Incus, MAAS) succeeded: the fleet
// reads and the cluster view call it today, a fleet watcher may too.
func (m *Metrics) SourceAvailable(source string, available bool) {
	if m == nil || m.sources == nil {
		return
	}
	v := 0.0
	if available {
		v = 1
	}
	m.sources.WithLabelValues(source).Set(v)
	m.sourceAsked.WithLabelValues(source).SetToCurrentTime()
}

// Leading records whether this worker holds the fence lease (fencing.Observer).
func (m *Metrics) Leading(leading bool) {
	if m == nil || m.fenceLeading == nil {
		return
	}
	if leading {
		m.fenceLeading.Set(1)
	} else {
		m.fenceLeading.Set(0)
		m.noQuorum.Reset() // the leader's to say
		m.paused.Reset()
	}
}

// Lease records the leader lease this process leads with, at each take-over and renewal;
// epoch 0 when it stopped leading (fencing.Observer, drift.Runner.Leading).
func (m *Metrics) Lease(epoch int64, renewed time.Time) {
	if m == nil || m.lease == nil {
		return
	}
	m.lease.mu.Lock()
	defer m.lease.mu.Unlock()
	m.lease.epoch, m.lease.renewed = epoch, renewed
}

var (
	leaseEpochDesc = prometheus.NewDesc("apelora_leader_epoch",
		"The epoch of the leader lease this process leads with (role fence: apelora-worker; drift: apelora serve); 0 while it stands by. Two processes above 0 for one role are two leaders.",
		[]string{"role"}, nil)
	leaseAgeDesc = prometheus.NewDesc("apelora_leader_lease_age_seconds",
		"Seconds since this process last renewed the leader lease it leads with (renewed every third of APELORA_LEADER_LEASE; it steps down past the whole); 0 while it stands by.",
		[]string{"role"}, nil)
)

// leaseCollector reads the lease's age when scraped, not when it was last renewed.
type leaseCollector struct {
	role    string
	mu      sync.Mutex
	epoch   int64
	renewed time.Time
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leaseEpochDesc
	ch <- leaseAgeDesc
}

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	epoch, renewed := c.epoch, c.renewed
	c.mu.Unlock()
	age := 0.0
	if epoch > 0 && !renewed.IsZero() {
		age = time.Since(renewed).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(leaseEpochDesc, prometheus.GaugeValue, float64(epoch), c.role)
	ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, age, c.role)
}

// Recorded records a fence event this worker appended (fencing.Observer).
func (m *Metrics) Recorded(e fencing.Event) {
	if m == nil || m.fenceEvents == nil {
		return
	}
	m.fenceEvents.WithLabelValues(string(e.Kind), string(e.Reason)).Inc()
}

// RoundDone records the end of a fence round (fencing.Observer).
// NoQuorum records since when Incus has had no quorum as the leading worker's round saw it
// (zero: it has its quorum).
func (m *Metrics) NoQuorum(cluster string, since time.Time) {
	if m == nil || m.noQuorum == nil {
		return
	}
	if since.IsZero() {
		m.noQuorum.WithLabelValues(cluster).Set(0)
		return
	}
	m.noQuorum.WithLabelValues(cluster).Set(float64(since.UnixNano()) / 1e9)
}

// Paused records whether fencing is paused in the cluster after its round (fencing.Observer).
func (m *Metrics) Paused(cluster, reason string) {
	if m == nil || m.paused == nil {
		return
	}
	v := 0.0
	if reason != "" {
		v = 1
	}
	m.paused.WithLabelValues(cluster).Set(v)
}

func (m *Metrics) RoundDone(err error) {
	if m == nil || m.fenceRounds == nil {
		return
	}
	if err != nil {
		m.fenceRounds.WithLabelValues("failed").Inc()
		return
	}
	m.fenceRounds.WithLabelValues("ok").Inc()
	m.lastRound.SetToCurrentTime()
}

// admissionEvent counts a published admission event: its verdict, and its FAILed checks.
func (m *Metrics) admissionEvent(e admission.Event) {
	if m == nil || m.verdicts == nil {
		return
	}
	for _, c := range e.Checks {
		if c.Result != admission.Fail {
			continue
		}
		name := c.Name
		if !slices.Contains(admission.CheckNames, name) {
			name = "other" // the label stays bounded whatever a check is called
		}
		m.checkFails.WithLabelValues(name).Inc()
	}
	if e.Verdict != "" {
		m.verdicts.WithLabelValues(string(e.Verdict), string(e.Trigger)).Inc()
	}
}

// Admissions wraps the admission publisher so every published verdict and FAILed check
// is counted: the checker publishes each result as it computes it, so this sees every
// run, whatever started it.
func (m *Metrics) Admissions(p admission.Publisher) admission.Publisher {
	if m == nil {
		return p
	}
	return countedAdmissions{p, m}
}

type countedAdmissions struct {
	admission.Publisher
	m *Metrics
}

func (c countedAdmissions) Publish(ctx context.Context, e admission.Event) error {
	c.m.admissionEvent(e)
	return c.Publisher.Publish(ctx, e)
}

// RollingStage sets the rolling reboot gauge to how long the task's current member has
// been in its stage (rolling.Observer); nil clears it.
func (m *Metrics) RollingStage(t *rolling.Task) {
	if m == nil || m.rollingStep == nil {
		return
	}
	if t == nil || t.Current() == "" {
		m.rollingStep.Set(0)
		return
	}
	m.rollingStep.Set(t.StageFor.Seconds())
}
