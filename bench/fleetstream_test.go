package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// BenchmarkFleetUpdates is the benchmark of the fleet stream: 1 and then 1,000
// fleetUpdates subscribers (graphql-transport-ws, the generated Go client, on loopback) on
// one `apelora serve` with a real one-member Incus lab and 50 simulated MAAS machines. Each
// round holds or releases the member (scheduler.instance) with Incus's own API (a lifecycle event, no
// Apelora mutation; the refresh interval is an hour) and waits until every subscriber has
// the changed row. It reports the upstream calls per refresh (Incus calls counted from the
// product's debug log, MAAS requests at the simulator; they must be the same for 1 and
// 1,000 subscribers, or the benchmark fails) and the delivery from the change (the
// moment Incus answered the PUT, just before its event) to each subscriber: p50, p99 and
// the last one. The watcher waits 200 ms for a burst to settle before it reads, which is
// in these figures.
func BenchmarkFleetUpdates(b *testing.B) {
	lab := incuslab.Start(b, 1)
	m := producttest.StartMAAS(b, sim.Fixture{Machines: sim.GenerateMachines(50, 1)})
	env := producttest.Start(b, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config),
		producttest.WithFleetRefresh(time.Hour), producttest.WithPingInterval(time.Minute),
		// 1,000 subscribers on one token, each on its own socket: past the per-identity
		// defaults, which are sized for a dashboard and a service, not for a load test.
		producttest.WithIdentityLimits(2000, 2000))
	viewer := env.Identity("dashboard", identity.ViewInfrastructure)
	member := lab.Members[0].Name
	inc := lab.Client(b, lab.Members[0])

	var perRefresh [2][2]float64 // [1 or 1,000][incus, maas]
	for i, n := range []int{1, 1000} {
		subs := subscribe(b, env.Base, viewer, n)
		time.Sleep(time.Second) // the read made when Incus's event stream connects is over
		logFrom, maasFrom := len(env.Logs.String()), len(m.Requests())
		var lat []time.Duration
		for round := 0; round < b.N; round++ {
			cur, etag, err := inc.Member(context.Background(), member)
			if err != nil {
				b.Fatal(err)
			}
			put := cur.Put()
			if put.Config == nil {
				put.Config = map[string]string{}
			}
			held := put.Config["scheduler.instance"] != "manual"
			put.Config["scheduler.instance"] = map[bool]string{true: "manual", false: "all"}[held]
			if err := inc.UpdateMember(context.Background(), member, put, etag); err != nil {
				b.Fatal(err)
			}
			changed := time.Now()
			lat = append(lat, subs.wait(b, member, held, changed)...)
			time.Sleep(300 * time.Millisecond) // no second read is pending
		}
		incusCalls := 0
		for line := range strings.Lines(env.Logs.String()[logFrom:]) {
			if strings.Contains(line, `"incus request"`) && !strings.Contains(line, "/1.0/events") {
				incusCalls++
			}
		}
		maasCalls := len(m.Requests()) - maasFrom
		perRefresh[i] = [2]float64{float64(incusCalls) / float64(b.N), float64(maasCalls) / float64(b.N)}
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		b.ReportMetric(perRefresh[i][0], fmt.Sprintf("incus-calls/refresh@%d", n))
		b.ReportMetric(perRefresh[i][1], fmt.Sprintf("maas-calls/refresh@%d", n))
		b.ReportMetric(float64(q(0.99).Microseconds())/1000, fmt.Sprintf("p99-ms@%d", n))
		b.Logf("%d subscriber(s), %d change(s): %.1f Incus and %.1f MAAS calls per refresh; delivery from the change p50 %v, p99 %v, last %v",
			n, b.N, perRefresh[i][0], perRefresh[i][1], q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
		subs.close()
	}
	if perRefresh[0] != perRefresh[1] {
		b.Fatalf("upstream calls per refresh [incus maas]: %v with 1 subscriber, %v with 1,000: they must be the same", perRefresh[0], perRefresh[1])
	}
}

// subscribers are n fleetUpdates subscriptions, each on its own websocket.
type subscribers struct {
	mu      sync.Mutex
	cond    *sync.Cond
	seen    []map[bool]time.Time // per subscriber: held or not → when that last arrived
	closers []func()
}

func subscribe(b *testing.B, base, token string, n int) *subscribers {
	b.Helper()
	s := &subscribers{seen: make([]map[bool]time.Time, n)}
	s.cond = sync.NewCond(&s.mu)
	snapshots := make(chan struct{}, n)
	for i := range n {
		s.seen[i] = map[bool]time.Time{}
		ws, err := client.NewWebSocket(base+"/graphql", token)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := ws.Start(ctx); err != nil {
			b.Fatal(err)
		}
		raw, _, err := client.FleetUpdates(ctx, ws, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.closers = append(s.closers, func() { cancel(); ws.Close() })
		go func() {
			for r := range raw {
				now := time.Now()
				if r.Errors != nil || r.Data == nil {
					b.Errorf("fleetUpdates: %v", r.Errors)
					return
				}
				u := r.Data.FleetUpdates
				if u.Snapshot {
					snapshots <- struct{}{}
					continue
				}
				s.mu.Lock()
				for _, m := range u.Changed {
					if m.Member != nil {
						s.seen[i][m.Member.Held] = now
					}
				}
				s.cond.Broadcast()
				s.mu.Unlock()
			}
		}()
	}
	for range n {
		select {
		case <-snapshots:
		case <-time.After(2 * time.Minute):
			b.Fatal("not every subscriber had its snapshot within 2 minutes")
		}
	}
	return s
}

// wait returns, once every subscriber has the member held (or not) since changed, how
// long each took from changed.
func (s *subscribers) wait(b *testing.B, member string, held bool, changed time.Time) []time.Duration {
	b.Helper()
	timeout := time.AfterFunc(time.Minute, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer timeout.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var out []time.Duration
		for _, seen := range s.seen {
			if at, ok := seen[held]; ok && at.After(changed) {
				out = append(out, at.Sub(changed))
			}
		}
		if len(out) == len(s.seen) {
			return out
		}
		if time.Since(changed) > time.Minute {
			b.Fatalf("%d of %d subscribers have %s held=%v after a minute", len(out), len(s.seen), member, held)
		}
		s.cond.Wait()
	}
}

func (s *subscribers) close() {
	for _, c := range s.closers {
		c()
	}
}
