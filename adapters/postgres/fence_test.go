package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

func audited(name string) context.Context {
	return audit.WithAction(context.Background(), &audit.Action{Actor: "admin", Name: name, RequestID: "req-1"})
}

var (
	uuid1 = "4c4c4544-0042-3510-8052-000000000001"
	uuid2 = "4c4c4544-0042-3510-8052-000000000002"
)

func TestFenceMappingsAreAuditedAndUnique(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	fs := db.Store.Fences()
	put := func(m fencing.Mapping) (*fencing.Mapping, error) {
		var prev *fencing.Mapping
		err := fs.Change(audited("setFenceMapping"), m.Member, func(tx fencing.Tx) error {
			var err error
			prev, err = tx.PutMapping(context.Background(), m)
			return err
		})
		return prev, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if prev, err := put(fencing.Mapping{Cluster: env, Member: "m2", SystemID: "abc123", HardwareUUID: uuid1, SetBy: "admin", SetAt: now}); err != nil || prev != nil {
		t.Fatalf("first put: %v %v", prev, err)
	}
	// Another member cannot take the same machine.
	_, err := put(fencing.Mapping{Cluster: env, Member: "m3", SystemID: "abc123", HardwareUUID: uuid2, SetBy: "admin", SetAt: now})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.AlreadyExists || e.Field != "maasSystemId" || !strings.Contains(e.Message, `"m2"`) {
		t.Fatalf("same system id: %v", err)
	}
	_, err = put(fencing.Mapping{Cluster: env, Member: "m3", SystemID: "xyz789", HardwareUUID: uuid1, SetBy: "admin", SetAt: now})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.AlreadyExists || e.Field != "hardwareUuid" {
		t.Fatalf("same uuid: %v", err)
	}
	// Replacing returns the previous mapping and forgets the drill of the old machine.
	if err := db.Store.FenceDrills().SaveDrill(context.Background(), fencing.Drill{Cluster: env, Member: "m2", At: now, SystemID: "abc123", HardwareUUID: uuid1, OK: true, PowerState: "on", Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	prev, err := put(fencing.Mapping{Cluster: env, Member: "m2", SystemID: "xyz789", HardwareUUID: uuid2, SetBy: "admin", SetAt: now})
	if err != nil || prev == nil || prev.SystemID != "abc123" {
		t.Fatalf("replace: %+v %v", prev, err)
	}
	if ds, _ := db.Store.FenceDrills().Drills(context.Background()); len(ds) != 0 {
		t.Fatalf("drill of the old machine kept: %+v", ds)
	}
	// A drill of a machine the member is no longer mapped to is not kept.
	if err := db.Store.FenceDrills().SaveDrill(context.Background(), fencing.Drill{Cluster: env, Member: "m2", At: now, SystemID: "abc123", HardwareUUID: uuid1, OK: true, Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if ds, _ := db.Store.FenceDrills().Drills(context.Background()); len(ds) != 0 {
		t.Fatalf("stale drill kept: %+v", ds)
	}
	var audits int
	if err := db.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE action = 'setFenceMapping' AND outcome = 'SUCCEEDED'`).Scan(&audits); err != nil || audits != 2 {
		t.Fatalf("%d audit events (%v), want one per successful change", audits, err)
	}
	// Removing.
	var removed *fencing.Mapping
	if err := fs.Change(audited("removeFenceMapping"), "m2", func(tx fencing.Tx) error {
		removed, err = tx.DeleteMapping(context.Background(), env, "m2")
		return err
	}); err != nil || removed == nil || removed.SystemID != "xyz789" {
		t.Fatalf("remove: %+v %v", removed, err)
	}
	// The database refuses malformed values even if the domain let them through.
	err = fs.Change(audited("setFenceMapping"), "m4", func(tx fencing.Tx) error {
		_, err := tx.PutMapping(context.Background(), fencing.Mapping{Cluster: env, Member: "m4", SystemID: "abc123", HardwareUUID: "NOT-A-UUID", SetBy: "a", SetAt: now})
		return err
	})
	if err == nil {
		t.Fatal("malformed UUID stored")
	}
}

func lead(t *testing.T, s *postgres.Store) fencing.Lease {
	t.Helper()
	lease, err := s.FenceLeadership("apelora-worker-test", time.Minute).TryLead(context.Background())
	if err != nil || lease == nil {
		t.Fatalf("take the fence lease: %v %v", lease, err)
	}
	t.Cleanup(lease.Close)
	return lease
}

func TestFenceLeaseKeepsTrackingAndDerivesRequests(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	lease := lead(t, db.Store)
	now, err := lease.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	off := now.Add(-time.Minute).Truncate(time.Microsecond)
	evs, err := lease.SaveTracking(ctx, env, []fencing.Tracking{
		{Member: "m1", LastSeenOnline: now, LastObserved: now},
		{Member: "m2", FirstSeenOffline: off, LastObserved: now, Maintenance: true},
	}, nil, []fencing.Event{{At: now, Member: "m2", Kind: fencing.KindOffline, Worker: "w1", Message: "m2 is offline"}})
	if err != nil || len(evs) != 1 || evs[0].ID == 0 {
		t.Fatalf("save tracking: %+v %v", evs, err)
	}
	// Another session (after a restart) reads the same outage back.
	lease.Close()
	lease = lead(t, db.Store)
	tr, err := lease.Tracking(ctx, env)
	if err != nil || !tr["m2"].FirstSeenOffline.Equal(off) || !tr["m1"].FirstSeenOffline.IsZero() || !tr["m2"].Maintenance || tr["m1"].Maintenance {
		t.Fatalf("tracking after restart: %+v %v", tr, err)
	}
	if _, _, err := func() ([]fencing.Event, []string, error) {
		evs, err := lease.SaveTracking(ctx, env, nil, []string{"m1"}, nil)
		return evs, nil, err
	}(); err != nil {
		t.Fatal(err)
	}
	if tr, _ := lease.Tracking(ctx, env); len(tr) != 1 {
		t.Fatalf("gone member kept: %+v", tr)
	}

	ev := func(kind fencing.Kind, reason fencing.Reason, details map[string]any) fencing.Event {
		e, err := lease.Append(ctx, fencing.Event{At: now, Member: "m2", Kind: kind, Reason: reason, Worker: "w1", Details: details})
		if err != nil {
			t.Fatalf("append %s: %v", kind, err)
		}
		return e
	}
	req1 := ev(fencing.KindRequested, "", map[string]any{"maasSystemId": "abc123", "hardwareUuid": uuid1})
	rs, err := lease.Requests(ctx, env)
	if err != nil || !rs["m2"].Pending() || rs["m2"].EventID != req1.ID || rs["m2"].SystemID != "abc123" || rs["m2"].HardwareUUID != uuid1 {
		t.Fatalf("pending request: %+v %v", rs, err)
	}
	ev(fencing.KindNotConfirmed, fencing.ReasonPowerNotOff, nil)
	ev(fencing.KindRefused, fencing.ReasonCooldown, nil)
	if rs, _ := lease.Requests(ctx, env); rs["m2"].Outcome != fencing.KindNotConfirmed {
		t.Fatalf("after not confirmed: %+v", rs)
	}
	req2 := ev(fencing.KindRequested, "", map[string]any{"maasSystemId": "abc123", "hardwareUuid": uuid1})
	ev(fencing.KindConfirmed, "", map[string]any{"powerState": "off"})
	rs, _ = lease.Requests(ctx, env)
	if rs["m2"].EventID != req2.ID || rs["m2"].Outcome != fencing.KindConfirmed {
		t.Fatalf("latest request: %+v", rs)
	}
	latest, err := lease.LatestEvents(ctx, env)
	if err != nil || latest["m2"].Kind != fencing.KindConfirmed || latest["m2"].Details["powerState"] != "off" {
		t.Fatalf("latest events: %+v %v", latest, err)
	}
	// The trail cannot be rewritten.
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE fence_events SET kind = 'CONFIRMED' WHERE id = $1`, req1.ID); err == nil {
		t.Fatal("a fence event was updated")
	}
	if _, err := db.Store.Pool().Exec(ctx, `DELETE FROM fence_events`); err == nil {
		t.Fatal("fence events were deleted")
	}
	// Kinds and reasons the domain knows are the ones the database accepts.
	for _, k := range fencing.Kinds {
		e := fencing.Event{At: now, Member: "m9", Kind: k, Worker: "w"}
		switch k {
		case fencing.KindLeading, fencing.KindQuorumLost, fencing.KindQuorumBack, fencing.KindUnreadable, fencing.KindReadable:
			e.Member = "" // about the worker or the cluster, not a member
		case fencing.KindRefused, fencing.KindNotConfirmed:
			e.Reason = fencing.ReasonCooldown
		}
		if _, err := lease.Append(ctx, e); err != nil {
			t.Errorf("kind %s refused by the database: %v", k, err)
		}
	}
	for _, r := range fencing.Reasons {
		if _, err := lease.Append(ctx, fencing.Event{At: now, Member: "m9", Kind: fencing.KindRefused, Reason: r, Worker: "w"}); err != nil {
			t.Errorf("reason %s refused by the database: %v", r, err)
		}
	}
	if err := lease.Heartbeat(ctx, fencing.WorkerStatus{Worker: "w1", LeaderSince: now, LastRoundAt: now, PollInterval: 2 * time.Second,
		Limits: fencing.Limits{OfflineAfter: time.Minute, Cooldown: time.Hour, ConfirmTimeout: time.Minute, MaxObservationGap: 30 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	ws, err := db.Store.Fences().WorkerStatus(ctx)
	if err != nil || ws == nil || ws.Worker != "w1" || ws.PollInterval != 2*time.Second || ws.Limits.Cooldown != time.Hour || ws.NoQuorumSince != nil {
		t.Fatalf("worker status %+v %v", ws, err)
	}
	// Incus without quorum: the cluster's state keeps since when, and a new leader reads it back.
	lost := now.Add(-time.Minute).Truncate(time.Microsecond)
	if st, err := lease.ClusterState(ctx, env); err != nil || st.Cluster != env || st.NoQuorumSince != nil || st.PausedReason != "" {
		t.Fatalf("cluster state before any %+v %v", st, err)
	}
	if err := lease.SaveClusterState(ctx, fencing.ClusterState{Cluster: env, LastReadAt: &now, NoQuorumSince: &lost, PausedReason: fencing.PausedNoQuorum + ": " + fencing.NoQuorumMessage(lost)}); err != nil {
		t.Fatal(err)
	}
	if st, err := lease.ClusterState(ctx, env); err != nil || st.NoQuorumSince == nil || !st.NoQuorumSince.Equal(lost) {
		t.Fatalf("cluster state %+v %v", st, err)
	}
	states, err := db.Store.Fences().ClusterStates(ctx)
	if code, _ := states[env].Paused(); err != nil || code != fencing.PausedNoQuorum {
		t.Fatalf("cluster states %+v %v", states, err)
	}
}

// Two clusters with the same member names: tracking, requests and mappings never mix, and
// forgetting a cluster's gone members forgets none of the other's.
func TestFenceLeaseKeepsClustersApart(t *testing.T) {
	db := pgtest.New(t)
	a := db.EnvironmentCluster(t)
	var b int64
	if err := db.Store.Pool().QueryRow(context.Background(), `INSERT INTO clusters (name, socket, registered_by)
		VALUES ('b', '/nonexistent/apelora-test/b.socket', 'pgtest') RETURNING id`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := lead(t, db.Store)
	now, err := lease.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int64{a, b} {
		if _, err := lease.SaveTracking(ctx, c, []fencing.Tracking{{Member: "m2", FirstSeenOffline: now, LastObserved: now}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A lists no m2 any more: A forgets its m2, B keeps its own.
	if _, err := lease.SaveTracking(ctx, a, nil, []string{"m2"}, nil); err != nil {
		t.Fatal(err)
	}
	if ta, _ := lease.Tracking(ctx, a); len(ta) != 0 {
		t.Fatalf("A's tracking %v", ta)
	}
	if tb, _ := lease.Tracking(ctx, b); len(tb) != 1 || tb["m2"].FirstSeenOffline.IsZero() {
		t.Fatalf("B's tracking %v", tb)
	}
	// B's m2 requested: A has no request for its m2.
	if _, err := lease.Append(ctx, fencing.Event{At: now, Cluster: b, Member: "m2", Kind: fencing.KindRequested, Worker: "w",
		Details: map[string]any{"maasSystemId": "bbb222", "hardwareUuid": uuid2}}); err != nil {
		t.Fatal(err)
	}
	if ra, _ := lease.Requests(ctx, a); len(ra) != 0 {
		t.Fatalf("A's requests %v", ra)
	}
	if rb, _ := lease.Requests(ctx, b); rb["m2"].SystemID != "bbb222" || !rb["m2"].Pending() {
		t.Fatalf("B's requests %v", rb)
	}
	// fenceProgress(member: "m2", cluster: …) replays that cluster's m2 only.
	if ea, err := db.Store.Fences().EventsAfter(ctx, a, "m2", 0, 10); err != nil || len(ea) != 0 {
		t.Fatalf("A's m2's events %v %v", ea, err)
	}
	if eb, err := db.Store.Fences().EventsAfter(ctx, b, "m2", 0, 10); err != nil || len(eb) != 1 || eb[0].Cluster != b {
		t.Fatalf("B's m2's events %v %v", eb, err)
	}
	// A mapping of (B, m2) is not A's m2's.
	fs := db.Store.Fences()
	if err := fs.Change(audited("setFenceMapping"), "m2", func(tx fencing.Tx) error {
		_, err := tx.PutMapping(ctx, fencing.Mapping{Cluster: b, Member: "m2", SystemID: "bbb222", HardwareUUID: uuid2, SetBy: "admin", SetAt: now})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ma, _ := lease.Mappings(ctx, a); len(ma) != 0 {
		t.Fatalf("A's mappings %v", ma)
	}
	if mb, _ := lease.Mappings(ctx, b); mb["m2"].SystemID != "bbb222" || mb["m2"].Cluster != b {
		t.Fatalf("B's mappings %v", mb)
	}
	st, err := fs.Statuses(ctx)
	if _, ok := st[clusters.MemberKey{Cluster: a, Name: "m2"}]; err != nil || ok || len(st) != 1 {
		t.Fatalf("statuses %v %v", st, err)
	}
}

func TestFenceFeedPushesEventsAcrossConnections(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := db.Store.NewListener(postgres.FenceChannel)
	go l.Run(ctx)
	feed := db.Store.NewFenceFeed()
	go feed.Run(ctx, l)
	<-l.Ready()
	<-feed.Hub().Started()
	events := broadcast.Subscribe(ctx, feed.Hub(), broadcast.Want[string, fencing.Event]{All: true}, broadcast.NewView(func(e fencing.Event) fencing.Event { return e }), 8)
	lease := lead(t, db.Store)
	e, err := lease.Append(context.Background(), fencing.Event{At: time.Now(), Member: "m3", Kind: fencing.KindEligible, Worker: "w1", Message: "eligible", Details: map[string]any{"members": 3}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-events:
		if got.ID != e.ID || got.Member != "m3" || got.Kind != fencing.KindEligible || got.Message != "eligible" || got.Details["members"] != float64(3) {
			t.Fatalf("pushed %+v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event pushed")
	}
}
