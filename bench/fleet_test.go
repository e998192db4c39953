package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// BenchmarkFleetQuery300 is the benchmark of the fleet query: 300 simulated MAAS
// machines (the maas-sim binary, over HTTPS, in its own process so its work is not
// counted), 300 machine records and a real three-member Incus cluster. The query runs
// in-process through the real HTTP handler (no client on the measured path).
// It reports the query's time as a multiple of its slowest upstream call (the MAAS list,
// the Incus member list or the Incus operations list, each timed alone the same number of
// times), the time and the allocations per row.
func BenchmarkFleetQuery300(b *testing.B) { benchmarkFleetQuery(b, 300, 1) }

// BenchmarkFleetQuery3000 is the same at 3,000 MAAS machines and records: the time per
// row should be no higher than at 300.
func BenchmarkFleetQuery3000(b *testing.B) { benchmarkFleetQuery(b, 3000, 1) }

// BenchmarkFleetQuery5x3x3000 is the many-clusters benchmark: five real
// three-member Incus clusters (the environment's and four registered through the API, each
// with members m1…m3, so every unclaimed member row is m1.<cluster>), 3,000 MAAS machines
// and records. It also reports the Incus calls per read, counted by a transport wrapped
// around every Incus client (two per cluster: members, pending tokens).
func BenchmarkFleetQuery5x3x3000(b *testing.B) { benchmarkFleetQuery(b, 3000, 5) }

// BenchmarkFleetQuery5x3x300 is the same at 300 machines: the Incus calls per read must
// be those at 3,000.
func BenchmarkFleetQuery5x3x300(b *testing.B) { benchmarkFleetQuery(b, 300, 5) }

// countingTransport counts the requests sent through it.
type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

func benchmarkFleetQuery(b *testing.B, machines, clusters int) {
	ctx := context.Background()
	lab := incuslab.Start(b, 3)
	more := make([]*incuslab.Cluster, clusters-1)
	for i := range more {
		more[i] = incuslab.StartWith(b, incuslab.Options{Members: 3, Identity: lab.Identity()})
	}
	m := startMAASSim(b, machines)
	db := pgtest.New(b)
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	var incusCalls atomic.Int64
	counted := lab.Config
	counted.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &incusCalls} }
	product, err := app.Build(pctx, app.Config{PingInterval: time.Minute, Incus: counted, MAAS: m}, db.Store, log)
	if err != nil {
		b.Fatal(err)
	}
	token := producttest.CreateIdentity(b, db.Store, "bench", identity.ManageInfrastructure)
	serve := func(query string, vars map[string]any) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		product.Handler.ServeHTTP(rec, req)
		return rec
	}
	post := func(query string, vars map[string]any) map[string]any {
		rec := serve(query, vars)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["errors"] != nil {
			b.Fatalf("%s: %v %s", query, err, rec.Body.String())
		}
		return out
	}

	// The records, written straight into the table (what registerMachine stores): machines
	// MAAS has commissioned are registered from MAAS (system id and hardware UUID), the New
	// ones by hand under their hostname.
	seedRecords(b, db.URL, sim.GenerateMachines(machines, 1))
	for i, c := range more {
		post(`mutation($in: RegisterClusterInput!) { registerCluster(input: $in) { cluster { name } } }`, map[string]any{"in": map[string]any{
			"name": fmt.Sprintf("rack%d", i+2), "url": c.URL, "clusterCertificate": c.ClusterCertificatePEM()}})
	}

	const query = `{ fleet { sources { incus { available } maas { available } }
		machines { name phase cluster { name } warnings { code message } pendingJoinToken { expiresAt }
			record { name provisioner { kind } maasSystemId hardwareUuid registeredBy registeredAt }
			member { name status held roles groups failureDomain architecture }
			maas { systemId hostname status powerState powerType hardwareUuid cpuCount memoryMiB testingStatus zone pool tags } } } }`
	rows := len(post(query, nil)["data"].(map[string]any)["fleet"].(map[string]any)["machines"].([]any))
	if rows != machines+3*clusters {
		b.Fatalf("%d rows, want %d (%d machines and %d members)", rows, machines+3*clusters, machines, 3*clusters)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	callsBefore := incusCalls.Load()
	start := time.Now()
	// Labelled for -cpuprofile (the goroutines the query starts inherit the label): `go
	// tool pprof -tagfocus fleet-bench=query` is the query alone, =upstream the calls
	// timed alone below.
	pprof.Do(ctx, pprof.Labels("fleet-bench", "query"), func(context.Context) {
		for i := 0; i < b.N; i++ {
			// Not decoded: the client's work is not the query's.
			if rec := serve(query, nil); rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"errors"`)) {
				b.Fatalf("fleet: %d %.300s", rec.Code, rec.Body.String())
			}
		}
	})
	elapsed := time.Since(start)
	calls := incusCalls.Load() - callsBefore
	b.StopTimer()
	runtime.ReadMemStats(&after)

	// Each upstream call alone, as often as the query ran.
	mc, err := maas.New(m)
	if err != nil {
		b.Fatal(err)
	}
	ic, err := incus.New(lab.Config)
	if err != nil {
		b.Fatal(err)
	}
	timeIt := func(f func() error) (d time.Duration) {
		pprof.Do(ctx, pprof.Labels("fleet-bench", "upstream"), func(context.Context) {
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			d = time.Since(t0) / time.Duration(b.N)
		})
		return d
	}
	upstream := map[string]time.Duration{
		"maas-list":     timeIt(func() error { _, err := mc.Machines(ctx, maas.MachineFilter{}); return err }),
		"incus-members": timeIt(func() error { _, err := ic.Members(ctx); return err }),
		"incus-pending": timeIt(func() error { _, err := ic.PendingJoinTokens(ctx); return err }),
	}
	slowest, name := time.Duration(0), ""
	for n, d := range upstream {
		if d > slowest {
			slowest, name = d, n
		}
	}
	perQuery := elapsed / time.Duration(b.N)
	allocs := float64(after.Mallocs-before.Mallocs) / float64(b.N)
	b.ReportMetric(float64(perQuery)/float64(slowest), "x-slowest-upstream")
	b.ReportMetric(allocs/float64(rows), "allocs/row")
	b.ReportMetric(float64(perQuery.Nanoseconds())/1000/float64(rows), "us/row")
	b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-upstream-ms")
	b.ReportMetric(float64(calls)/float64(b.N), "incus-calls/read")
	b.Logf("%d rows: query %v; upstream alone: MAAS list %v, Incus members %v, Incus operations %v (slowest: %s); %.0f allocations per query",
		rows, perQuery, upstream["maas-list"], upstream["incus-members"], upstream["incus-pending"], name, allocs)
}

// countLists counts the simulator's log lines for a whole machine list: a GET of
// machines/ with no op and no parameter (a filter would be one).
func countLists(log io.Reader, lists *atomic.Int64) {
	sc := bufio.NewScanner(log)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "method=GET") && strings.Contains(l, "path=/MAAS/api/2.0/machines/ ") &&
			strings.Contains(l, `op="" `) && strings.Contains(l, `params="" `) && strings.Contains(l, "status=200") {
			lists.Add(1)
		}
	}
}

// seedRecords stores a record per machine as registerMachine would.
func seedRecords(b *testing.B, dbURL string, specs []sim.MachineSpec) {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows := make([][]any, len(specs))
	for i, spec := range specs {
		rows[i] = []any{spec.Hostname, "MANUAL", nil, nil, time.Now(), "bench"}
		if spec.Status != 0 {
			rows[i] = []any{spec.Hostname, "MAAS", spec.SystemID, spec.HardwareUUID, time.Now(), "bench"}
		}
	}
	if _, err := conn.CopyFrom(context.Background(), pgx.Identifier{"machine_records"},
		[]string{"name", "provisioner", "maas_system_id", "hardware_uuid", "registered_at", "registered_by"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
}

// startMAASSim builds and runs cmd/maas-sim with n generated machines (the same ones
// sim.GenerateMachines(n, 1) returns) and returns the configuration that reaches it.
func startMAASSim(b *testing.B, n int) maas.Config {
	b.Helper()
	return startCountingMAASSim(b, n, nil)
}

// startCountingMAASSim is startMAASSim counting, when lists is not nil, the whole machine
// lists the simulator answers (from its request log, -v).
func startCountingMAASSim(b *testing.B, n int, lists *atomic.Int64) maas.Config {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "maas-sim")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/maas-sim").CombinedOutput(); err != nil {
		b.Fatalf("build maas-sim: %v\n%s", err, out)
	}
	key, cert := filepath.Join(dir, "key"), filepath.Join(dir, "maas.pem")
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-tls", "leaf", "-cert-out", cert, "-key-file", key, "-write-key",
		"-generate", strconv.Itoa(n), "-seed", "1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if lists != nil {
		cmd.Args = append(cmd.Args, "-v")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			b.Fatal(err)
		}
		go countLists(stderr, lists)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("maas-sim said nothing: %v", err)
	}
	u := regexp.MustCompile(`https://\S+/MAAS`).FindString(line)
	if u == "" {
		b.Fatalf("maas-sim: %q", line)
	}
	go io.Copy(io.Discard, stdout)
	k, err := os.ReadFile(key)
	if err != nil {
		b.Fatal(err)
	}
	return maas.Config{BaseURL: u, APIKey: strings.TrimSpace(string(k)), CAFile: cert}
}
