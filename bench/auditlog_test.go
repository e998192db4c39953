package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// reportLatency reports the p50 and p99 of ds in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAuditedMutation is a mutation's latency over loopback HTTP: createIdentity
// back to back (the gate, one audited change, its audit event, the answer), after 200
// to warm up. It uses only what main has too, so the audit log's cost is this benchmark
// run on main and on a branch, back to back:
//
//	go test ./bench -run '^$' -bench AuditedMutation -benchtime 2000x
func BenchmarkAuditedMutation(b *testing.B) {
	e := producttest.Start(b)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	const q = `mutation($n: String!) { createIdentity(input: {name: $n, permissions: [VIEW_INFRASTRUCTURE]}) { token } }`
	mutate := func(name string) time.Duration {
		t0 := time.Now()
		if r := e.GQL(admin, q, map[string]any{"n": name}); len(r.Errors) > 0 {
			b.Fatalf("createIdentity: %+v", r.Errors)
		}
		return time.Since(t0)
	}
	for i := range 200 {
		mutate(fmt.Sprintf("warm-%d", i))
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		ds = append(ds, mutate(fmt.Sprintf("reader-%d", i)))
	}
	b.StopTimer()
	reportLatency(b, ds)
}

// BenchmarkAuditWrite is the audit write alone: one event in its own transaction
// (Store.RecordAudit, as for a refused mutation), after 200 to warm up.
//
//	go test ./bench -run '^$' -bench AuditWrite -benchtime 5000x
func BenchmarkAuditWrite(b *testing.B) {
	db := pgtest.New(b)
	ctx := context.Background()
	write := func(i int) time.Duration {
		t0 := time.Now()
		err := db.Store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "registerMachine", Machine: fmt.Sprintf("node-%d", i%50),
			Outcome: audit.Refused, Error: "not allowed", RequestID: fmt.Sprintf("req-%d", i), Parameters: map[string]any{"name": "node", "i": i}})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for i := range 200 {
		write(i)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		ds = append(ds, write(i))
	}
	b.StopTimer()
	reportLatency(b, ds)
}
