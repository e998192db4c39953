package bench

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

var (
	fleetReaders  = flag.Int("fleet-readers", 50, "BenchmarkFleetReaders: concurrent readers")
	fleetDuration = flag.Duration("fleet-duration", 5*time.Second, "BenchmarkFleetReaders: how long the readers read (the lone reader reads as long)")
)

// BenchmarkFleetReaders is issue 10's load on the fleet query: -fleet-readers clients
// (50) read it back to back for -fleet-duration over loopback HTTP, against 300 MAAS
// machines (the maas-sim binary, counting the whole machine lists it answers), 300 records
// and a three-member Incus cluster. It reports the latency p50/p99 of a lone reader and of
// the crowd, and the MAAS lists per second and per read. Run it once:
//
//	go test ./bench -run '^$' -bench FleetReaders -benchtime 1x -args -fleet-duration 30s
func BenchmarkFleetReaders(b *testing.B) {
	const machines = 300
	lab := incuslab.Start(b, 3)
	var lists atomic.Int64
	m := startCountingMAASSim(b, machines, &lists)
	db := pgtest.New(b)
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	product, err := app.Build(ctx, app.Config{PingInterval: time.Minute, Incus: lab.Config, MAAS: m}, db.Store, log)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(product.Handler)
	b.Cleanup(srv.Close)
	token := producttest.CreateIdentity(b, db.Store, "bench", identity.ViewInfrastructure)
	seedRecords(b, db.URL, sim.GenerateMachines(machines, 1))

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *fleetReaders * 2}}
	body := []byte(`{"query":"{ fleet { sources { incus { available } maas { available } } machines { name phase warnings { code } member { status } maas { systemId status powerState } } } }"}`)
	// read reads the fleet once; -1 after an error (reported; readers stop).
	read := func() time.Duration {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return -1
		}
		out, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || bytes.Contains(out, []byte(`"errors"`)) || !bytes.Contains(out, []byte(`"available":true`)) {
			b.Errorf("fleet read: %v %d %.300s", err, res.StatusCode, out)
			return -1
		}
		return time.Since(t0)
	}
	// run has n readers read for d; it returns every read's latency and the MAAS lists.
	run := func(n int, d time.Duration) ([]time.Duration, int64) {
		var mu sync.Mutex
		var all []time.Duration
		before := lists.Load()
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for time.Now().Before(end) {
					d := read()
					if d < 0 {
						break
					}
					mine = append(mine, d)
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		time.Sleep(200 * time.Millisecond) // the simulator's log is read on its own pipe
		slices.Sort(all)
		return all, lists.Load() - before
	}
	q := func(ds []time.Duration, p float64) time.Duration { return ds[int(float64(len(ds)-1)*p)] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	if read() < 0 { // warm up: connections, the first plans
		b.FailNow()
	}
	b.ResetTimer()
	lone, loneLists := run(1, *fleetDuration)
	crowd, crowdLists := run(*fleetReaders, *fleetDuration)
	b.StopTimer()
	if b.Failed() || len(lone) == 0 || len(crowd) == 0 {
		b.FailNow()
	}

	secs := fleetDuration.Seconds()
	b.ReportMetric(ms(q(lone, 0.99)), "lone-p99-ms")
	b.ReportMetric(ms(q(crowd, 0.50)), "p50-ms")
	b.ReportMetric(ms(q(crowd, 0.99)), "p99-ms")
	b.ReportMetric(float64(q(crowd, 0.99))/float64(q(lone, 0.99)), "p99/lone-p99")
	b.ReportMetric(float64(crowdLists)/secs, "maas-lists/s")
	b.ReportMetric(float64(crowdLists)/float64(len(crowd)), "maas-lists/read")
	b.Logf("lone reader: %d reads in %v, p50 %.1f ms, p99 %.1f ms, %d MAAS lists (%.2f per read)",
		len(lone), *fleetDuration, ms(q(lone, 0.5)), ms(q(lone, 0.99)), loneLists, float64(loneLists)/float64(len(lone)))
	b.Logf("%d readers: %d reads in %v (%.1f/s), p50 %.1f ms, p99 %.1f ms (%.2f× the lone p99), %d MAAS lists (%.1f/s, %.3f per read)",
		*fleetReaders, len(crowd), *fleetDuration, float64(len(crowd))/secs, ms(q(crowd, 0.5)), ms(q(crowd, 0.99)),
		float64(q(crowd, 0.99))/float64(q(lone, 0.99)), crowdLists, float64(crowdLists)/secs, float64(crowdLists)/float64(len(crowd)))
}
