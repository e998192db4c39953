package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// BenchmarkBulkCommission300 commissions 300 discovered machines in one bulk step
// (apeloractl's runner, each machine its own commissionMachine call) against the MAAS
// simulator, and compares the step's wall time with the simulator's own time for the same
// MAAS requests sent straight to it at the same concurrency (APELORA_STEP_CONCURRENCY and
// the runner's in-flight bound alike). It reports both, their ratio (the aim is ≤ 1.2) and
// the MAAS calls per machine.
func BenchmarkBulkCommission300(b *testing.B) {
	lab := incuslab.Start(b, 1)
	for _, c := range []int{8, 32} {
		b.Run(fmt.Sprintf("concurrency-%d", c), func(b *testing.B) { benchmarkBulkCommission(b, lab, 300, c) })
	}
}

func benchmarkBulkCommission(b *testing.B, lab *incuslab.Cluster, n, concurrency int) {
	fixture := func() sim.Fixture {
		var specs []sim.MachineSpec
		for i := range n {
			specs = append(specs, sim.MachineSpec{SystemID: fmt.Sprintf("bb%04d", i), Hostname: fmt.Sprintf("node-%03d", i), PowerType: "ipmi",
				HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-b7c04f4e%04d", i)})
		}
		return sim.Fixture{Machines: specs}
	}
	var stepTime, simTime time.Duration
	var calls, gets, posts, incusCalls int
	var incusTook time.Duration
	db := &statementWaits{}
	for range b.N {
		m := producttest.StartMAAS(b, fixture())
		e := producttest.Start(b, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config), producttest.WithStepConcurrency(concurrency))
		token := e.Identity(fmt.Sprintf("ops-%d", time.Now().UnixNano()), identity.ManageInfrastructure)
		gql := client.New(e.Base+"/graphql", token, nil)
		br := &bulkRun{step: "commission", tests: []string{}, concurrency: concurrency, out: io.Discard, requestID: "bulk-bench"}
		br.gql = client.New(e.Base+"/graphql", token, &http.Client{Transport: withRequestID{id: br.requestID, next: http.DefaultTransport}})
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("node-%03d", i))
		}
		// A MAAS step needs a record: register the machines first, outside the timing.
		reg := &bulkRun{step: "register", concurrency: concurrency, out: io.Discard, requestID: "bulk-bench-register", gql: gql}
		if err := reg.resolve(context.Background(), gql, names); err != nil {
			b.Fatal(err)
		}
		for _, r := range reg.runAll(context.Background(), reg.targets, false, nil) {
			if r.Outcome != outcomeDone {
				b.Fatalf("register %s: %s %s: %s", r.Machine, r.Outcome, r.Code, r.Message)
			}
		}
		if err := br.resolve(context.Background(), gql, names); err != nil {
			b.Fatal(err)
		}
		before := len(m.Server.Requests())
		e.DB.Store.Observe(db)
		start := time.Now()
		results := br.runAll(context.Background(), br.targets, false, nil)
		stepTime += time.Since(start)
		e.DB.Store.Observe(nil)
		for _, r := range results {
			if r.Outcome != outcomeDone {
				b.Fatalf("%s: %s %s: %s", r.Machine, r.Outcome, r.Code, r.Message)
			}
		}
		for _, line := range strings.Split(e.Logs.String(), "\n") {
			if strings.Contains(line, `"msg":"incus request"`) && strings.Contains(line, `"request_id":"bulk-bench"`) {
				incusCalls++
				var l struct{ Took time.Duration }
				if json.Unmarshal([]byte(line), &l) == nil {
					incusTook += l.Took
				}
			}
		}
		reqs := m.Server.Requests()[before:]
		calls += len(reqs)
		for _, r := range reqs {
			switch {
			case r.Method == http.MethodPost && r.Op == "commission":
				posts++
			case r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/MAAS/api/2.0/machines/bb"):
				gets++
			}
		}

		// The simulator's own time: the same requests per machine (its GETs and the
		// commission POST), straight from a MAAS client, at the same concurrency.
		fresh := producttest.StartMAAS(b, fixture())
		mc, err := maas.New(fresh.Config)
		if err != nil {
			b.Fatal(err)
		}
		perMachineGets := len(reqs) / n
		if posts > 0 {
			perMachineGets = (len(reqs) - n) / n
		}
		sem := make(chan struct{}, concurrency)
		var wg sync.WaitGroup
		start = time.Now()
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				id := fmt.Sprintf("bb%04d", i)
				for range perMachineGets {
					if _, err := mc.Machine(context.Background(), id); err != nil {
						b.Error(err)
					}
				}
				if _, err := mc.Commission(context.Background(), id, maas.CommissionOptions{TestingScripts: []string{"none"}}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		simTime += time.Since(start)
	}
	N := float64(b.N)
	b.ReportMetric(stepTime.Seconds()*1000/N, "step-ms")
	b.ReportMetric(simTime.Seconds()*1000/N, "sim-ms")
	b.ReportMetric(stepTime.Seconds()/simTime.Seconds(), "step/sim")
	b.ReportMetric(float64(calls)/(N*float64(n)), "maas-calls/machine")
	b.ReportMetric(float64(gets)/(N*float64(n)), "maas-gets/machine")
	b.ReportMetric(float64(posts)/(N*float64(n)), "maas-posts/machine")
	b.ReportMetric(float64(incusCalls)/(N*float64(n)), "incus-calls/machine")
	b.ReportMetric(incusTook.Seconds()*1000/N, "incus-ms-summed")
	// Where PostgreSQL's share goes: each statement's time summed over the steps in
	// flight (so it exceeds the wall time), the audit order lock's wait among them.
	b.ReportMetric(float64(db.count())/(N*float64(n)), "db-statements/machine")
	b.ReportMetric(db.summed().Seconds()*1000/N, "db-ms-summed")
	b.ReportMetric(db.took[auditOrderLockWait].Seconds()*1000/N, "audit-lock-wait-ms-summed")
	b.Log(db.table(int(N) * n))
}

// auditOrderLockWait is the statement that waits for the audit order lock (every change's
// audit append takes it, held to its commit).
const auditOrderLockWait = "SELECT pg_advisory_xact_lock"

// statementWaits sums the store's statements by name (postgres.Observer).
type statementWaits struct {
	mu   sync.Mutex
	n    map[string]int
	took map[string]time.Duration
}

func (w *statementWaits) Statement(name string, took time.Duration, _ error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n, w.took = map[string]int{}, map[string]time.Duration{}
	}
	w.n[name]++
	w.took[name] += took
}

func (w *statementWaits) AuditWrite(error) {}

func (w *statementWaits) count() (n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.n {
		n += c
	}
	return n
}

func (w *statementWaits) summed() (d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.took {
		d += t
	}
	return d
}

// table lists the statements, longest summed time first, per machine stepped.
func (w *statementWaits) table(machines int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.n))
	for k := range w.n {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return w.took[names[i]] > w.took[names[j]] })
	var sb strings.Builder
	sb.WriteString("PostgreSQL statements per machine (summed over the steps in flight):\n")
	for _, k := range names {
		fmt.Fprintf(&sb, "  %-36s %5.2f per machine, %8.1f ms summed\n", k, float64(w.n[k])/float64(machines), w.took[k].Seconds()*1000)
	}
	return sb.String()
}
