package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	genqlient "github.com/Khan/genqlient/graphql"
	"github.com/goccy/go-yaml"

	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// exposition is a scraped /metrics, by sample name (histograms: _bucket, _sum, _count).
type exposition map[string][]sample

// parseExposition reads the Prometheus text format: "name{l="v",…} value" per line.
func parseExposition(t *testing.T, text string) exposition {
	t.Helper()
	out := exposition{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			t.Fatalf("exposition line %q", line)
		}
		s.name = line[:i]
		rest := line[i:]
		if rest[0] == '{' {
			j := 1
			for rest[j] != '}' {
				eq := strings.IndexByte(rest[j:], '=')
				key := rest[j : j+eq]
				j += eq + 2 // past ="
				var v strings.Builder
				for rest[j] != '"' {
					if rest[j] == '\\' {
						j++
						if rest[j] == 'n' {
							v.WriteByte('\n')
							j++
							continue
						}
					}
					v.WriteByte(rest[j])
					j++
				}
				s.labels[key] = v.String()
				j++ // past the closing quote
				if rest[j] == ',' {
					j++
				}
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatalf("exposition line %q: %v", line, err)
		}
		s.value = v
		out[s.name] = append(out[s.name], s)
	}
	return out
}

// sum adds the samples of name whose labels include want.
func (e exposition) sum(name string, want map[string]string) (float64, bool) {
	total, found := 0.0, false
next:
	for _, s := range e[name] {
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		found = true
	}
	return total, found
}

func scrape(t *testing.T, url string) exposition {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, body)
	}
	return parseExposition(t, string(body))
}

// gathered is what a registry exports now, through its own handler.
func gathered(t *testing.T, m *metrics.Metrics) exposition {
	t.Helper()
	rec := &responseRecorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	m.Handler(false).ServeHTTP(rec, req)
	return parseExposition(t, rec.body.String())
}

type responseRecorder struct {
	header http.Header
	body   strings.Builder
	code   int
}

func (r *responseRecorder) Header() http.Header         { return r.header }
func (r *responseRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *responseRecorder) WriteHeader(code int)        { r.code = code }

func withMetrics(m *metrics.Metrics) producttest.Option { return func(c *app.Config) { c.Metrics = m } }

// A hostile client chooses its operation names, aliases and documents freely: the
// operation label stays one of the schema's root fields (or invalid/other), the code one
// of the documented codes, however many it sends.
func TestMetricsLabelsStayBoundedUnderHostileOperations(t *testing.T) {
	parallel(t)
	m := metrics.New(metrics.Server)
	e := producttest.Start(t, withMetrics(m))
	token := e.Identity("reader", identity.ViewInfrastructure)
	const n = 150
	for i := range n {
		tag := fmt.Sprintf("Zq%dx%08x", i, i*2654435761)
		for _, c := range []struct {
			tok, query string
		}{
			{token, fmt.Sprintf(`query %s { %s: __typename }`, tag, tag)},
			{token, fmt.Sprintf(`query %s { fleet { sources { incus { available } } } }`, tag)},
			{token, fmt.Sprintf(`query %s { %s }`, tag, tag)},                                     // no such field
			{token, fmt.Sprintf(`mutation %s { %s(input: {name: "%s"}) { ok } }`, tag, tag, tag)}, // no such mutation
			{token, tag + ` {{{ ` + "\x00\xff"},                                                   // does not parse
			{"", fmt.Sprintf(`query %s { auditEvents(first: 1) { edges { cursor } } }`, tag)},
			{"apl_" + tag, fmt.Sprintf(`mutation %s { registerMachine(input: {name: "%s", provisioner: MANUAL}) { machine { name } } }`, tag, tag)},
		} {
			e.GQL(c.tok, c.query, nil)
		}
		// An operation name that names no operation of the document.
		body, _ := json.Marshal(map[string]any{"query": "query A { __typename }", "operationName": tag})
		req, _ := http.NewRequest(http.MethodPost, e.Base+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	got := gathered(t, m)
	ops := got["apelora_graphql_operations_total"]
	if len(ops) == 0 {
		t.Fatal("no operation counted")
	}
	roots := rootFields(t, e)
	codes := []string{server.CodeOK, server.CodeOther}
	for _, c := range apperr.Codes {
		codes = append(codes, string(c))
	}
	total := 0.0
	for _, s := range ops {
		op, code := s.labels["operation"], s.labels["code"]
		if !roots[op] && op != server.OperationInvalid && op != server.OperationOther {
			t.Errorf("operation label %q is not a root field of the schema", op)
		}
		if !slices.Contains(codes, code) {
			t.Errorf("code label %q is not a documented code", code)
		}
		if strings.Contains(op+code+s.labels["type"], "Zq") {
			t.Errorf("a client's name reached a label: %v", s.labels)
		}
		total += s.value
	}
	if total < 7*n {
		t.Errorf("%v operations counted, want at least %d", total, 7*n)
	}
	// 1,200 requests with 1,050 distinct names: a handful of series.
	if len(ops) > 12 {
		var series []string
		for _, s := range ops {
			series = append(series, fmt.Sprint(s.labels))
		}
		t.Errorf("%d operation series:\n%s", len(ops), strings.Join(series, "\n"))
	}
	if v, _ := got.sum("apelora_graphql_operations_total", map[string]string{"operation": "__typename", "code": "OK"}); v != n {
		t.Errorf("__typename OK counted %v times, want %d", v, n)
	}
	if v, _ := got.sum("apelora_graphql_operations_total", map[string]string{"operation": server.OperationInvalid, "code": "INVALID_INPUT"}); v < 3*n {
		t.Errorf("invalid operations counted %v times, want at least %d", v, 3*n)
	}
	if v, _ := got.sum("apelora_graphql_operations_total", map[string]string{"operation": "registerMachine", "code": "UNAUTHENTICATED"}); v != n {
		t.Errorf("unauthenticated registerMachine counted %v times, want %d", v, n)
	}
	if h := got["apelora_graphql_operation_duration_seconds_count"]; len(h) == 0 || len(h) > 12 {
		t.Errorf("%d latency series", len(h))
	}
}

// rootFields asks the server for its schema's root fields.
func rootFields(t *testing.T, e *producttest.Env) map[string]bool {
	t.Helper()
	d := e.MustGQL(e.Identity("introspector", identity.ViewInfrastructure),
		`{ __schema { queryType { fields { name } } mutationType { fields { name } } subscriptionType { fields { name } } } }`, nil)
	out := map[string]bool{"__typename": true, "__schema": true, "__type": true}
	s := d["__schema"].(map[string]any)
	for _, k := range []string{"queryType", "mutationType", "subscriptionType"} {
		for _, f := range s[k].(map[string]any)["fields"].([]any) {
			out[f.(map[string]any)["name"].(string)] = true
		}
	}
	return out
}

// An audit event the database refuses is counted as a failed write, and one the gate
// cannot write either as lost.
func TestAuditWriteFailuresAreCounted(t *testing.T) {
	parallel(t)
	m := metrics.New(metrics.Server)
	e := producttest.Start(t, withMetrics(m))
	token := e.Identity("alice", identity.ManageInfrastructure)
	e.MustGQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-1", "provisioner": "MANUAL"}})
	before := gathered(t, m)
	written, _ := before.sum("apelora_audit_writes_total", map[string]string{"result": "written"})
	if failed, ok := before.sum("apelora_audit_writes_total", map[string]string{"result": "failed"}); written < 1 || !ok || failed != 0 {
		t.Fatalf("before: written %v, failed %v (exported %v)", written, failed, ok)
	}
	if _, err := e.DB.Store.Pool().Exec(t.Context(), `ALTER TABLE audit_events ADD CONSTRAINT no_more_audit CHECK (false) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	r := e.GQL(token, registerQuery, map[string]any{"input": map[string]any{"name": "node-2", "provisioner": "MANUAL"}})
	if r.Code() != "UNAVAILABLE" {
		t.Fatalf("got %+v", r.Errors)
	}
	after := gathered(t, m)
	// The change's insert failed, then the gate's FAILED event failed too: two failed
	// writes, one event lost.
	if failed, _ := after.sum("apelora_audit_writes_total", map[string]string{"result": "failed"}); failed != 2 {
		t.Errorf("failed audit writes %v, want 2", failed)
	}
	if lost, _ := after.sum("apelora_audit_events_lost_total", nil); lost != 1 {
		t.Errorf("lost audit events %v, want 1", lost)
	}
	if w, _ := after.sum("apelora_audit_writes_total", map[string]string{"result": "written"}); w != written {
		t.Errorf("written went from %v to %v while every insert failed", written, w)
	}
	if v, _ := after.sum("apelora_graphql_operations_total", map[string]string{"operation": "registerMachine", "code": "UNAVAILABLE"}); v != 1 {
		t.Errorf("the failed mutation counted %v times", v)
	}
}

// Calls to the real Incus lab, the MAAS simulator and PostgreSQL are counted by operation
// and outcome, and the fleet read sets both sources available.
func TestUpstreamCallsAreCountedAgainstIncusAndMAAS(t *testing.T) {
	parallel(t, lasts(18))
	lab := incuslab.Start(t, 1)
	sm := producttest.StartMAAS(t, maasFleet())
	m := metrics.New(metrics.Server)
	e := producttest.Start(t, withMetrics(m), producttest.WithIncus(lab.Config), producttest.WithMAAS(sm.Config))
	token := e.Identity("reader", identity.ViewInfrastructure)
	before := len(sm.Requests())
	for range 3 {
		e.MustGQL(token, `{ fleet { sources { incus { available } maas { available } } machines { name } } }`, nil)
	}
	lists := 0
	for _, r := range sm.Requests()[before:] {
		if r.Method == http.MethodGet && r.Path == "/MAAS/api/2.0/machines/" {
			lists++
		}
	}
	got := gathered(t, m)
	// The simulator counted MAAS's machine lists itself: the metric agrees exactly. Incus
	// was asked for its members at least once per read.
	for _, c := range []struct {
		labels  map[string]string
		least   float64
		exactly bool
	}{
		{map[string]string{"upstream": "incus", "operation": "GET /1.0/cluster/members", "outcome": "2xx"}, 3, false},
		{map[string]string{"upstream": "maas", "operation": "GET /api/2.0/machines/", "outcome": "2xx"}, float64(lists), true},
	} {
		v, _ := got.sum("apelora_upstream_requests_total", c.labels)
		h, _ := got.sum("apelora_upstream_request_duration_seconds_count", map[string]string{"upstream": c.labels["upstream"], "operation": c.labels["operation"]})
		if v < 3 || v < c.least || (c.exactly && v != c.least) || h != v {
			t.Errorf("%v: %v calls and %v latencies counted, want %v (exactly: %v), at least 3", c.labels, v, h, c.least, c.exactly)
		}
	}
	if v, _ := got.sum("apelora_upstream_requests_total", map[string]string{"upstream": "postgres", "operation": "SELECT machine_records", "outcome": "ok"}); v < 3 {
		t.Errorf("machine record reads counted %v times", v)
	}
	for _, s := range got["apelora_upstream_requests_total"] {
		op := s.labels["operation"]
		if strings.Contains(op, "aaaa01") || strings.Contains(op, lab.Members[0].Name) || strings.Contains(op, "recursion") {
			t.Errorf("an operation label carries a value: %q", op)
		}
	}
	for _, src := range []string{"incus", "maas"} {
		if v, ok := got.sum("apelora_source_available", map[string]string{"source": src}); !ok || v != 1 {
			t.Errorf("%s available = %v (exported %v), want 1", src, v, ok)
		}
	}

	// MAAS gone: the next fleet read says so, and so does the gauge.
	sm.Endpoint.Close()
	e.MustGQL(token, `{ fleet { sources { maas { available } } } }`, nil)
	got = gathered(t, m)
	if v, _ := got.sum("apelora_source_available", map[string]string{"source": "maas"}); v != 0 {
		t.Errorf("maas available = %v after MAAS went away, want 0", v)
	}
	if v, _ := got.sum("apelora_upstream_requests_total", map[string]string{"upstream": "maas", "outcome": "error"}); v < 1 {
		t.Errorf("failed MAAS calls counted %v times", v)
	}
}

// freeAddr returns a loopback address nobody listens on, for a child process to take
// (producttest.ListenAddr: not from the ephemeral range, which outgoing connections share).
func freeAddr(t *testing.T) string { return producttest.ListenAddr(t) }

// proc is a child process of the product with its log.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), filepath.Base(bin)+".log")
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APELORA_") {
			base = append(base, kv)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = append(base, env...), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); out.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

func (p *proc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

func (p *proc) logs() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// waitScrape scrapes url until cond holds on what it exports.
func waitScrape(t *testing.T, what, url string, cond func(exposition) bool, procs ...*proc) exposition {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if e := parseExposition(t, string(body)); cond(e) {
					return e
				}
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range procs {
				logs.WriteString(p.logs())
			}
			t.Fatalf("%s: not reached\n%s", what, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func leading(e exposition) float64 { v, _ := e.sum("apelora_fence_leading", nil); return v }

// The binaries as deployed: `apelora serve` and two `apelora-worker`s with metrics
// listeners. Every metric the Grafana dashboard and the alert rules name is exported by
// one of them; the leadership gauge moves to the standby when the leader dies; the API's
// own listener serves no metrics, and pprof is not served unless asked.
func TestDeployedProcessesExportWhatTheDashboardAndRulesUse(t *testing.T) {
	parallel(t)
	db := pgtest.New(t)
	sm := producttest.StartMAAS(t, maasFleet())
	apiBin := buildCommand(t, "github.com/apelora/fabric/cmd/apelora")
	workerBin := buildWorker(t)
	// One state folder: the audit key the API seals with (the test's own events too) and
	// the workers find. Incus on a socket no daemon listens on: calls fail, quickly, and are
	// counted.
	state := t.TempDir()
	k, _, err := auditlog.LoadOrCreateKey(filepath.Join(state, auditlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	db.Store.SealAuditWith(k.Sealer)
	common := []string{"APELORA_DATABASE_URL=" + db.URL, "APELORA_STATE_DIR=" + state, "APELORA_LOG_LEVEL=debug",
		"APELORA_INCUS_SOCKET=/nonexistent/apelora-metrics-test/unix.socket",
		"APELORA_MAAS_URL=" + sm.Config.BaseURL, "APELORA_MAAS_API_KEY=" + sm.Key, "APELORA_MAAS_CA_FILE=" + sm.Config.CAFile}
	apiAddr, apiMetrics := freeAddr(t), freeAddr(t)
	api := startProc(t, apiBin, append(common, "APELORA_LISTEN="+apiAddr, metrics.EnvListen+"="+apiMetrics), "serve")
	workerMetrics := map[string]string{"w1": freeAddr(t), "w2": freeAddr(t)}
	workers := map[string]*proc{}
	startWorker := func(name string) {
		workers[name] = startProc(t, workerBin, append(common, "APELORA_WORKER_NAME="+name, "APELORA_FENCE_POLL_INTERVAL=200ms",
			metrics.EnvListen+"="+workerMetrics[name]))
	}
	startWorker("w1")
	w1 := waitScrape(t, "w1 leads", "http://"+workerMetrics["w1"]+"/metrics", func(e exposition) bool { return leading(e) == 1 }, workers["w1"])
	startWorker("w2")
	w2 := waitScrape(t, "w2 stands by", "http://"+workerMetrics["w2"]+"/metrics", func(e exposition) bool {
		_, ok := e["apelora_fence_leading"]
		return ok
	}, workers["w2"])
	if leading(w2) != 0 {
		t.Fatal("two workers lead at once")
	}

	// Traffic, so operation and upstream series exist.
	token := producttest.CreateIdentity(t, db.Store, "reader", identity.ViewInfrastructure)
	for _, q := range []string{`{ fleet { sources { maas { available } } machines { name } } }`, `{ cluster { members offlineMembers } }`, `{ nosuchfield }`} {
		body, _ := json.Marshal(map[string]any{"query": q})
		req, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%v\n%s", err, api.logs())
		}
		resp.Body.Close()
	}
	apiExp := waitScrape(t, "the API's operations", "http://"+apiMetrics+"/metrics", func(e exposition) bool {
		v, _ := e.sum("apelora_graphql_operations_total", map[string]string{"operation": "fleet"})
		return v >= 1
	}, api)
	w1 = waitScrape(t, "w1 rounds", "http://"+workerMetrics["w1"]+"/metrics", func(e exposition) bool {
		v, _ := e.sum("apelora_fence_rounds_total", map[string]string{"result": "ok"})
		return v >= 2
	}, workers["w1"])

	exported := map[string]bool{}
	for _, e := range []exposition{apiExp, w1, w2} {
		for name := range e {
			exported[name] = true
		}
	}
	used := map[string][]string{}
	for expr, where := range deployedQueries(t) {
		for _, name := range metricNames(expr) {
			used[name] = append(used[name], where)
		}
	}
	for name, where := range used {
		if !exported[name] {
			t.Errorf("%s is used by %s but neither apelora serve nor apelora-worker exports it", name, strings.Join(slices.Compact(where), ", "))
		}
	}
	// And the other way: every metric of Apelora's own is on the dashboard or in a rule.
	family := regexp.MustCompile(`_(bucket|sum|count)$`)
	shown := map[string]bool{}
	for name := range used {
		shown[family.ReplaceAllString(name, "")] = true
	}
	for name := range exported {
		if strings.HasPrefix(name, "apelora_") && !shown[family.ReplaceAllString(name, "")] {
			t.Errorf("%s is exported but neither the dashboard nor the alert rules use it", name)
		}
	}

	// The API's own listener is not a metrics endpoint, and pprof was not asked for.
	for _, u := range []string{"http://" + apiAddr + "/metrics", "http://" + apiAddr + "/debug/pprof/"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "apelora_graphql") || strings.Contains(string(body), "go_goroutines") || strings.Contains(string(body), "goroutine profile") {
			t.Errorf("%s serves metrics or profiles", u)
		}
	}
	if resp, err := http.Get("http://" + apiMetrics + "/debug/pprof/"); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("pprof served without %s: %d", metrics.EnvPprof, resp.StatusCode)
	}

	// The leader dies: the standby's gauge flips to 1.
	workers["w1"].stop(syscall.SIGKILL)
	waitScrape(t, "w2 takes over", "http://"+workerMetrics["w2"]+"/metrics", func(e exposition) bool { return leading(e) == 1 }, workers["w2"])
	// w1 comes back and stands by; w2 goes on leading.
	startWorker("w1")
	back := waitScrape(t, "w1 back", "http://"+workerMetrics["w1"]+"/metrics", func(e exposition) bool {
		_, ok := e["apelora_fence_leading"]
		return ok
	}, workers["w1"])
	time.Sleep(time.Second) // five standby polls
	if leading(back) != 0 || leading(scrape(t, "http://"+workerMetrics["w1"]+"/metrics")) != 0 ||
		leading(scrape(t, "http://"+workerMetrics["w2"]+"/metrics")) != 1 {
		t.Fatal("after the restart, w2 must lead and w1 stand by")
	}
	// A graceful stop lets go of the lock: the gauge flips back.
	workers["w2"].stop(syscall.SIGTERM)
	waitScrape(t, "w1 takes over again", "http://"+workerMetrics["w1"]+"/metrics", func(e exposition) bool { return leading(e) == 1 }, workers["w1"])
}

// deployedQueries returns every PromQL expression of the Grafana dashboard (panel
// targets and template queries) and of the alert rules, with where it is.
func deployedQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	raw, err := os.ReadFile("../deploy/grafana/apelora.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/apelora.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out[tg.Expr] = "dashboard panel " + strconv.Quote(p.Title)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out[v.Definition] = "dashboard variable " + v.Name
		}
	}
	files, _ := filepath.Glob("../deploy/prometheus/*.yml")
	if len(files) == 0 {
		t.Fatal("no alert rules in deploy/prometheus")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rules struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(raw, &rules); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				out[r.Expr] = "alert " + r.Alert
			}
		}
	}
	return out
}

var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promWords    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	ourMetric    = regexp.MustCompile(`^(apelora|go|process)_[a-z0-9_]+$`)
)

// metricNames finds the metric names a PromQL expression selects: after strings, label
// matchers and ranges are taken out, every word that looks like one of ours (apelora_,
// go_, process_ …) is a metric name; functions, keywords and labels are not shaped so.
func metricNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	var out []string
	for _, w := range promWords.FindAllString(s, -1) {
		if ourMetric.MatchString(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func TestMetricNamesTokenizer(t *testing.T) {
	parallel(t)
	for expr, want := range map[string][]string{
		`sum by (operation) (rate(apelora_graphql_operations_total{job=~"$job",code!="OK"}[$__rate_interval]))`: {"apelora_graphql_operations_total"},
		`histogram_quantile(0.99, sum by (le) (rate(apelora_x_bucket{a="go_fake_metric"}[5m])))`:                {"apelora_x_bucket"},
		`(sum(apelora_fence_leading) or vector(0)) < 1`:                                                         {"apelora_fence_leading"},
		`time() - max(apelora_a_timestamp_seconds > 0) + process_cpu_seconds_total`:                             {"apelora_a_timestamp_seconds", "process_cpu_seconds_total"},
		`label_values(apelora_fence_leading, job)`:                                                              {"apelora_fence_leading"},
		`sum by (apelora_label) (up)`:                                                                           {"apelora_label"}, // a label shaped like ours is checked too: name labels otherwise
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

// Every subscriber's subscription counts as open until it is stopped or its socket closes,
// also when several share one stream (the transport runs a shared stream once).
func TestSubscriptionsOpenFollowTheSubscribers(t *testing.T) {
	parallel(t)
	m := metrics.New(metrics.Server)
	e := producttest.Start(t, withMetrics(m))
	token := e.Identity("watcher", identity.ViewInfrastructure)
	open := func() float64 {
		v, _ := gathered(t, m).sum("apelora_graphql_subscriptions_open", map[string]string{"subscription": "auditEventRecorded"})
		return v
	}
	waitOpen := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for open() != want {
			if time.Now().After(deadline) {
				t.Fatalf("auditEventRecorded open = %v, want %v", open(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if open() != 0 {
		t.Fatal("a subscription counted before any")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	socket := func() genqlient.WebSocketClient {
		ws, err := client.NewWebSocket(e.Base+"/graphql", token)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	// Every subscription's events are taken: the creation of the identity may arrive late
	// on a loaded machine, and genqlient's reader, blocked on an untaken event, panics
	// (send on closed channel) when Unsubscribe or Close closes the channel under it.
	take := func(events chan client.AuditEventRecordedWsResponse) {
		go func() {
			for range events {
			}
		}()
	}
	a, b := socket(), socket()
	all, idAll, err := client.AuditEventRecorded(ctx, a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	take(all)
	machine := "node-1"
	one, _, err := client.AuditEventRecorded(ctx, a, &machine, nil)
	if err != nil {
		t.Fatal(err)
	}
	take(one)
	shared, _, err := client.AuditEventRecorded(ctx, b, nil, nil) // shares a's first stream
	if err != nil {
		t.Fatal(err)
	}
	take(shared)
	waitOpen(3)
	if err := a.Unsubscribe(idAll); err != nil {
		t.Fatal(err)
	}
	waitOpen(2) // b's goes on on the same stream
	a.Close()
	waitOpen(1)
	b.Close()
	waitOpen(0)
	if v, _ := gathered(t, m).sum("apelora_graphql_subscriptions_started_total", map[string]string{"subscription": "auditEventRecorded"}); v != 3 {
		t.Errorf("started %v, want 3", v)
	}
}
