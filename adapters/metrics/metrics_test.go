package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/fencing"
)

// value reads one series from a registry; -1 when it is absent.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" for valid
	}{
		{Config{}, ""},
		{Config{Listen: "127.0.0.1:9470"}, ""},
		{Config{Listen: "[::1]:9470", Pprof: true}, ""},
		{Config{Listen: "localhost:9470", Pprof: true}, ""},
		{Config{Listen: "127.0.0.2:0"}, ""},
		{Config{Pprof: true}, EnvListen},
		{Config{AllowRemote: true}, EnvListen},
		{Config{Listen: "9470"}, "host:port"},
		{Config{Listen: ":9470"}, EnvAllowRemote},
		{Config{Listen: "0.0.0.0:9470"}, EnvAllowRemote},
		{Config{Listen: "10.0.0.5:9470"}, EnvAllowRemote},
		{Config{Listen: "10.0.0.5:9470", AllowRemote: true}, ""},
		{Config{Listen: "0.0.0.0:9470", AllowRemote: true, Pprof: true}, "loopback"},
		{Config{Listen: "metrics.example:9470", AllowRemote: true}, ""},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestHandlerServesPprofOnlyWhenAsked(t *testing.T) {
	m := New(Server)
	code, body := get(t, m.Handler(false), "/metrics")
	if code != http.StatusOK || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_cpu_seconds_total") ||
		!strings.Contains(body, "apelora_audit_writes_total") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	if code, _ := get(t, m.Handler(false), "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("pprof not asked for: /debug/pprof/ answered %d", code)
	}
	if code, _ := get(t, m.Handler(false), "/"); code != http.StatusNotFound {
		t.Fatalf("/ answered %d", code)
	}
	if code, body := get(t, m.Handler(true), "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof asked for: /debug/pprof/ answered %d", code)
	}
	if code, _ := get(t, m.Handler(true), "/debug/pprof/cmdline"); code != http.StatusOK {
		t.Fatalf("/debug/pprof/cmdline answered %d", code)
	}
}

// The worker exports the fencing metrics, the server the GraphQL ones; both the upstream,
// runtime and process ones.
func TestRolesExportTheirOwn(t *testing.T) {
	_, server := get(t, New(Server).Handler(false), "/metrics")
	_, worker := get(t, New(Worker).Handler(false), "/metrics")
	if strings.Contains(server, "apelora_fence_leading") || !strings.Contains(worker, "apelora_fence_leading 0") ||
		!strings.Contains(worker, `apelora_fence_events_total{kind="NOT_CONFIRMED",reason="POWER_NOT_OFF"} 0`) {
		t.Fatalf("fence metrics: server\n%s\nworker\n%s", server, worker)
	}
	if strings.Contains(worker, "apelora_graphql") || strings.Contains(worker, "apelora_audit") ||
		!strings.Contains(server, `apelora_admission_verdicts_total{trigger="ADMISSION",verdict="BLOCKED"} 0`) {
		t.Fatal("server metrics in the worker's registry, or missing from the server's")
	}
}

func TestNilRecordsNothingAndPanicsNot(t *testing.T) {
	var m *Metrics
	m.Operation("query", "fleet", "OK", time.Second)
	m.Subscriptions([]string{"x"})
	m.Subscribed("x")()
	m.AuditLost()
	m.AuditWrite(nil)
	m.Statement("SELECT", time.Second, nil)
	m.SourceAvailable(Incus, true)
	m.Leading(true)
	m.Recorded(fencing.Event{Kind: fencing.KindConfirmed})
	m.RoundDone(nil)
	if m.Registry() != nil {
		t.Fatal("a nil Metrics has a registry")
	}
	base := http.DefaultTransport
	if m.Transport(Incus, func(*http.Request) string { return "x" })(base) != base {
		t.Fatal("a nil Metrics wrapped the transport")
	}
	var p admission.Publisher = pubFunc(func(admission.Event) {})
	if _, ok := m.Admissions(p).(pubFunc); !ok {
		t.Fatal("a nil Metrics wrapped the admission publisher")
	}
}

type pubFunc func(admission.Event)

func (f pubFunc) Publish(_ context.Context, e admission.Event) error { f(e); return nil }

func TestTransportCountsByOperationAndOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<16))
		case "/missing":
			http.NotFound(w, r)
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	m := New(Server)
	var names []string
	hc := &http.Client{Transport: m.Transport(MAAS, func(r *http.Request) string {
		names = append(names, r.URL.Path)
		return "GET " + r.URL.Path
	})(http.DefaultTransport)}
	do := func(path string, timeout time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("/ok", time.Minute)
	do("/ok", time.Minute)
	do("/missing", time.Minute)
	do("/broken", time.Minute)
	do("/slow", 50*time.Millisecond)
	for _, c := range []struct {
		op, outcome string
		want        float64
	}{{"GET /ok", "2xx", 2}, {"GET /missing", "4xx", 1}, {"GET /broken", "5xx", 1}, {"GET /slow", "timeout", 1}} {
		if got := value(t, m.reg, "apelora_upstream_requests_total", map[string]string{"upstream": MAAS, "operation": c.op, "outcome": c.outcome}); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.op, c.outcome, got, c.want)
		}
	}
	if got := value(t, m.reg, "apelora_upstream_request_duration_seconds", map[string]string{"upstream": MAAS, "operation": "GET /ok"}); got != 2 {
		t.Errorf("latency observations of GET /ok: %v", got)
	}
	// A connection refused is an error.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := hc.Get("http://" + addr + "/gone"); err == nil {
		t.Fatal("a closed port answered")
	}
	if got := value(t, m.reg, "apelora_upstream_requests_total", map[string]string{"operation": "GET /gone", "outcome": "error"}); got != 1 {
		t.Errorf("refused connection: %v", got)
	}
}

func TestOutcomeOf(t *testing.T) {
	for err, want := range map[error]string{
		nil:                      "ok",
		context.DeadlineExceeded: "timeout",
		context.Canceled:         "canceled",
		errors.New("boom"):       "error",
	} {
		if got := outcomeOf(err); got != want {
			t.Errorf("outcomeOf(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestAdmissionsCountVerdictsAndFailedChecks(t *testing.T) {
	m := New(Server)
	var seen int
	p := m.Admissions(pubFunc(func(admission.Event) { seen++ }))
	ctx := context.Background()
	_ = p.Publish(ctx, admission.Event{Checks: []admission.Check{{Name: admission.CheckKernel, Result: admission.Fail}}})
	_ = p.Publish(ctx, admission.Event{Checks: []admission.Check{{Name: admission.CheckOnline, Result: admission.Pass}}})
	_ = p.Publish(ctx, admission.Event{Checks: []admission.Check{{Name: "hostile\x00name", Result: admission.Fail}}})
	_ = p.Publish(ctx, admission.Event{Trigger: admission.TriggerAdmission, Verdict: admission.Blocked})
	if seen != 4 {
		t.Fatalf("the wrapped publisher got %d events, want 4", seen)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"apelora_admission_check_failures_total", map[string]string{"check": admission.CheckKernel}, 1},
		{"apelora_admission_check_failures_total", map[string]string{"check": admission.CheckOnline}, 0},
		{"apelora_admission_check_failures_total", map[string]string{"check": "other"}, 1},
		{"apelora_admission_verdicts_total", map[string]string{"verdict": "BLOCKED", "trigger": "ADMISSION"}, 1},
		{"apelora_admission_verdicts_total", map[string]string{"verdict": "ADMISSIBLE", "trigger": "REPORT"}, 0},
	} {
		if got := value(t, m.reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestFenceAndSourceGauges(t *testing.T) {
	w := New(Worker)
	w.Leading(true)
	w.Recorded(fencing.Event{Kind: fencing.KindNotConfirmed, Reason: fencing.ReasonPowerNotOff})
	w.RoundDone(nil)
	w.RoundDone(errors.New("database gone"))
	if value(t, w.reg, "apelora_fence_leading", nil) != 1 ||
		value(t, w.reg, "apelora_fence_events_total", map[string]string{"kind": "NOT_CONFIRMED", "reason": "POWER_NOT_OFF"}) != 1 ||
		value(t, w.reg, "apelora_fence_rounds_total", map[string]string{"result": "failed"}) != 1 ||
		value(t, w.reg, "apelora_fence_last_round_timestamp_seconds", nil) < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatal("fence metrics not recorded")
	}
	w.Leading(false)
	if value(t, w.reg, "apelora_fence_leading", nil) != 0 {
		t.Fatal("leading stayed 1")
	}
	s := New(Server)
	if value(t, s.reg, "apelora_source_available", map[string]string{"source": Incus}) != -1 {
		t.Fatal("availability claimed before any read")
	}
	s.SourceAvailable(Incus, false)
	s.SourceAvailable(MAAS, true)
	if value(t, s.reg, "apelora_source_available", map[string]string{"source": Incus}) != 0 ||
		value(t, s.reg, "apelora_source_available", map[string]string{"source": MAAS}) != 1 {
		t.Fatal("availability not recorded")
	}
	ended := s.Subscribed("fenceProgress")
	if value(t, s.reg, "apelora_graphql_subscriptions_open", map[string]string{"subscription": "fenceProgress"}) != 1 {
		t.Fatal("subscription not counted open")
	}
	ended()
	if value(t, s.reg, "apelora_graphql_subscriptions_open", map[string]string{"subscription": "fenceProgress"}) != 0 {
		t.Fatal("subscription still open")
	}
}

// The lease gauges: the worker's role is fence, the server's drift; the epoch while
// leading, the lease's age read when scraped (not when renewed), both 0 once it stops.
func TestLeaderLeaseGauges(t *testing.T) {
	w, s := New(Worker), New(Server)
	if value(t, w.reg, "apelora_leader_epoch", map[string]string{"role": "fence"}) != 0 ||
		value(t, s.reg, "apelora_leader_epoch", map[string]string{"role": "drift"}) != 0 {
		t.Fatal("an epoch before leading")
	}
	w.Lease(9, time.Now().Add(-4*time.Second))
	if got := value(t, w.reg, "apelora_leader_epoch", map[string]string{"role": "fence"}); got != 9 {
		t.Fatalf("epoch %v, want 9", got)
	}
	if age := value(t, w.reg, "apelora_leader_lease_age_seconds", map[string]string{"role": "fence"}); age < 4 || age > 60 {
		t.Fatalf("lease age %v, want about 4 s", age)
	}
	w.Lease(0, time.Time{})
	if value(t, w.reg, "apelora_leader_epoch", map[string]string{"role": "fence"}) != 0 ||
		value(t, w.reg, "apelora_leader_lease_age_seconds", map[string]string{"role": "fence"}) != 0 {
		t.Fatal("the gauges stayed up after stepping down")
	}
}
