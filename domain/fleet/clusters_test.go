package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/apperr"
)

func keys(rows map[string]Machine) []string {
	out := make([]string, 0, len(rows))
	for k := range rows {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

type clusterList []Cluster

func (c clusterList) Clusters(context.Context) []Cluster { return c }

func id(n int64) *int64 { return &n }

func members(cluster string, names ...string) []membership.Member {
	out := make([]membership.Member, len(names))
	for i, n := range names {
		out[i] = membership.Member{Name: n, URL: "https://" + cluster + "/" + n}
	}
	return out
}

// Three clusters, two of which both have an m1 and an m5: every member is shown once,
// under its own cluster, joined only with a record of its own cluster; the cluster that
// does not answer is a warning on its own rows only.
func TestJoinAcrossClustersWithTheSameMemberNames(t *testing.T) {
	a := &membership.Snapshot{Members: members("a", "m1", "m3", "m5"), Pending: []membership.PendingJoin{{Name: "m7"}}}
	b := &membership.Snapshot{Members: members("b", "m6", "m1", "m2", "m5")}
	svc := func(cErr error, c *membership.Snapshot) *Service {
		return &Service{
			Records: records{
				{Name: "m1", Provisioner: machines.Manual, Cluster: id(1)},
				{Name: "m2", Provisioner: machines.Manual, Cluster: id(2)},
				{Name: "m3", Provisioner: machines.Manual},                 // no cluster: the environment's (a)
				{Name: "m4", Provisioner: machines.Manual, Cluster: id(3)}, // c
				{Name: "m7", Provisioner: machines.Manual, Cluster: id(2)}, // a token for m7 is pending in a, not b
			},
			Admissions: admitted{},
			Clusters: clusterList{
				{ID: 2, Name: "b", Incus: incus{snap: b}},
				{ID: 3, Name: "c", Incus: incus{snap: c, err: cErr}},
				{ID: 1, Name: "a", Environment: true, Incus: incus{snap: a}},
			},
			MAAS: maas{ms: []provisioning.MAASMachine{{SystemID: "x1", Hostname: "m6"}, {SystemID: "x2", Hostname: "node-x"}}},
		}
	}
	type want struct {
		cluster, member string
		phase           lifecycle.Phase
		record, maas    bool
	}
	wantRows := map[string]want{
		"m1":     {"a", "https://a/m1", lifecycle.Unheld, true, false},
		"m1.b":   {"b", "https://b/m1", lifecycle.Unregistered, false, false},
		"m2":     {"b", "https://b/m2", lifecycle.Unheld, true, false},
		"m3":     {"a", "https://a/m3", lifecycle.Unheld, true, false},
		"m4":     {"c", "https://c/m4", lifecycle.Unheld, true, false},
		"m5.a":   {"a", "https://a/m5", lifecycle.Unregistered, false, false},
		"m5.b":   {"b", "https://b/m5", lifecycle.Unregistered, false, false},
		"m6":     {"b", "https://b/m6", lifecycle.Unregistered, false, true},
		"m7":     {"b", "", lifecycle.Registered, true, false},
		"node-x": {"", "", lifecycle.Discovered, false, true},
	}
	check := func(t *testing.T, v *View, down bool) {
		t.Helper()
		rows := byName(t, v)
		if len(rows) != len(wantRows) {
			t.Errorf("rows %v, want %d", keys(rows), len(wantRows))
		}
		for name, w := range wantRows {
			m, ok := rows[name]
			if !ok {
				t.Errorf("no row %s among %v", name, keys(rows))
				continue
			}
			got := ""
			if m.Cluster != nil {
				got = m.Cluster.Name
			}
			member := ""
			if m.Member != nil {
				member = m.Member.URL
			}
			phase := w.phase
			// A MAAS machine no cluster claims may be a member of the one that did not answer.
			unknown := down && (w.cluster == "c" || name == "node-x")
			if unknown {
				phase, w.member = lifecycle.Unknown, ""
			}
			if got != w.cluster || member != w.member || m.Phase != phase || (m.Record != nil) != w.record || (m.MAAS != nil) != w.maas {
				t.Errorf("%s: cluster %q member %q phase %s record %t maas %t, want %q %q %s %t %t (warnings %v)",
					name, got, member, m.Phase, m.Record != nil, m.MAAS != nil, w.cluster, w.member, phase, w.record, w.maas, m.Warnings)
			}
			warned := len(m.Warnings) > 0 && m.Warnings[0].Code == lifecycle.IncusUnavailable
			if warned != unknown {
				t.Errorf("%s: warnings %v, want INCUS_UNAVAILABLE %t", name, m.Warnings, unknown)
			}
			if warned && !strings.Contains(m.Warnings[0].Message, "Incus cluster c: ") {
				t.Errorf("%s: warning %q does not name cluster c", name, m.Warnings[0].Message)
			}
		}
		if rows["m1"].Cluster != rows["m3"].Cluster {
			t.Errorf("rows of one cluster do not share its name")
		}
		if len(v.Clusters) != 3 || v.Clusters[0].Cluster.Name != "a" || v.Clusters[1].Cluster.Name != "b" || v.Clusters[2].Cluster.Name != "c" {
			t.Fatalf("cluster sources %+v, want a, b, c", v.Clusters)
		}
		if !v.Clusters[0].Source.Available || !v.Clusters[1].Source.Available || v.Clusters[2].Source.Available == down || v.Incus.Available == down {
			t.Errorf("sources %+v (incus %+v), c down %t", v.Clusters, v.Incus, down)
		}
		if down && (!strings.Contains(v.Clusters[2].Source.Message, "frozen") || !strings.Contains(v.Incus.Message, "Incus cluster c: ")) {
			t.Errorf("c's source %q, incus %q: want why", v.Clusters[2].Source.Message, v.Incus.Message)
		}
	}
	t.Run("every cluster answers", func(t *testing.T) {
		v, err := svc(nil, &membership.Snapshot{Members: members("c", "m4")}).View(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		check(t, v, false)
	})
	t.Run("one cluster does not answer", func(t *testing.T) {
		s := svc(errors.New("frozen"), nil)
		// problem() keeps only an apperr's message: say it as the pool would.
		s.Clusters.(clusterList)[1].Incus = incus{err: apperr.New(apperr.Unavailable, "could not be reached: frozen")}
		v, err := s.View(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		check(t, v, true)
	})
	t.Run("one machine is the whole view's row", func(t *testing.T) {
		s := svc(nil, &membership.Snapshot{Members: members("c", "m4")})
		s.One = &One{}
		v, err := s.View(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"m1", "m1.b", "m5.a", "m6"} {
			m, err := s.Machine(context.Background(), name)
			if err != nil || m == nil || m.Member == nil || m.Member.URL != byName(t, v)[name].Member.URL {
				t.Errorf("Machine(%s) = %+v, %v; want the view's row", name, m, err)
			}
		}
	})
}

// countingIncus counts its member-list reads.
type countingIncus struct {
	incus
	calls *atomic.Int64
}

func (c countingIncus) Snapshot(ctx context.Context) (*membership.Snapshot, error) {
	c.calls.Add(1)
	return c.incus.Snapshot(ctx)
}

// A read asks each cluster once (members with their pending tokens: one Snapshot), at
// the same time, whatever the number of machines.
func TestEachClusterIsReadOncePerView(t *testing.T) {
	for _, n := range []int{3, 300} {
		var calls [3]atomic.Int64
		recs := make(records, n)
		for i := range recs {
			recs[i] = machines.Record{Name: fmt.Sprintf("node-%d", i), Provisioner: machines.Manual, Cluster: id(int64(i%3 + 1))}
		}
		var cs clusterList
		for i := range calls {
			cs = append(cs, Cluster{ID: int64(i + 1), Name: string(rune('a' + i)), Environment: i == 0,
				Incus: countingIncus{incus{snap: &membership.Snapshot{Members: members("x", "node-1", "node-2")}}, &calls[i]}})
		}
		v, err := (&Service{Records: recs, Admissions: admitted{}, Clusters: cs}).View(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Errorf("%d machines: cluster %d read %d times, want once", n, i+1, got)
			}
		}
		// node-1 (in b) and node-2 (in c) claim their own cluster's member; the other
		// clusters' node-1 and node-2 are rows of their own.
		rows := byName(t, v)
		if rows["node-1"].Member == nil || rows["node-1"].Cluster.Name != "b" || rows["node-1.a"].Member == nil || rows["node-1.c"].Member == nil ||
			rows["node-2"].Cluster.Name != "c" || rows["node-2.a"].Member == nil || rows["node-2.b"].Member == nil || len(rows) != n+4 {
			t.Errorf("%d machines: rows %v", n, keys(rows))
		}
	}
}
