package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/drift"
	"github.com/apelora/fabric/internal/broadcast"
)

func step(t *testing.T, s *postgres.Store, machine, action string, details map[string]any) {
	t.Helper()
	if err := s.RecordAudit(context.Background(), audit.Event{Actor: "admin", Action: action, Machine: machine,
		Outcome: audit.Succeeded, RequestID: "req", Details: details}); err != nil {
		t.Fatal(err)
	}
}

func TestAdmittedMachinesWithTheirRoles(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	step(t, db.Store, "node-4", "approveEnrolment", nil)
	step(t, db.Store, "node-4", "admitMember", map[string]any{"roles": []string{"database-standby", "event-hub"}})
	step(t, db.Store, "node-5", "admitMember", map[string]any{"checks": "…"}) // recorded before roles were
	step(t, db.Store, "node-6", "admitMember", map[string]any{"roles": []string{}})
	step(t, db.Store, "node-6", "removeMember", nil)
	step(t, db.Store, "node-7", "admitMember", map[string]any{"roles": "not a list"})
	if err := db.Store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "removeMember", Machine: "node-4", Outcome: audit.Refused, RequestID: "req"}); err != nil {
		t.Fatal(err)
	}
	// Plans (dry runs) move no machine: a planned removal and a planned admission are not
	// steps, for drift as for the lifecycle.
	for _, e := range []audit.Event{{Action: "removeMember", Machine: "node-5"}, {Action: "admitMember", Machine: "node-8"}} {
		e.Actor, e.Outcome, e.RequestID = "admin", audit.Planned, "req"
		if err := db.Store.RecordAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if step, err := db.Store.LatestStep(ctx, "node-5", []string{"admitMember", "removeMember"}); err != nil || step != "admitMember" {
		t.Fatalf("node-5's latest step %q %v: a PLANNED event counted", step, err)
	}
	got, err := db.Store.Drift().Admitted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Machine != "node-4" || got[1].Machine != "node-5" || got[2].Machine != "node-7" {
		t.Fatalf("admitted %+v", got)
	}
	if !got[0].RolesKnown || strings.Join(got[0].Roles, ",") != "database-standby,event-hub" || got[0].At.IsZero() {
		t.Fatalf("node-4 %+v", got[0])
	}
	if got[1].RolesKnown || got[2].RolesKnown {
		t.Fatalf("no roles, or not a list: %+v %+v", got[1], got[2])
	}
}

func TestDriftIsSavedByTheLeaderOnlyAndPushedToEveryReplica(t *testing.T) {
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ds := db.Store.Drift()

	// A second replica's feed: a store of its own on the same database.
	other, err := postgres.Open(ctx, db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	listener := other.NewListener(postgres.DriftChannel)
	go listener.Run(ctx)
	<-listener.Ready()
	feed := other.NewDriftFeed()
	go feed.Run(ctx, listener)
	<-feed.Hub().Started()
	events := broadcast.Subscribe(ctx, feed.Hub(), broadcast.Want[string, drift.Event]{All: true}, broadcast.NewView(func(e drift.Event) drift.Event { return e }), 16)

	lead, err := db.Store.DriftLeadership("test-1").TryLead(ctx)
	if err != nil || lead == nil {
		t.Fatalf("lead: %v %v", lead, err)
	}
	standby := other.DriftLeadership("test-2")
	if s, err := standby.TryLead(ctx); err != nil || s != nil {
		t.Fatalf("a second replica led too: %v %v", s, err)
	}
	if err := lead.Check(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := lead.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raised := drift.State{Machine: "node-4", Check: "scheduler", Title: "Placement reaches the member", FailingSince: now, RaisedAt: now,
		Evidence: "scheduler.instance=manual was set", LastChecked: now}
	pending := drift.State{Machine: "node-4", Check: "online", Title: "Member online", FailingSince: now, Evidence: "Offline", LastChecked: now}
	saved, err := lead.Save(ctx, "node-4", now, []drift.State{raised, pending},
		[]drift.Event{{Check: "scheduler", Title: raised.Title, Change: drift.Raised, At: now, Since: now, Evidence: raised.Evidence}})
	if err != nil || len(saved) != 1 || saved[0].ID == 0 || saved[0].Machine != "node-4" {
		t.Fatalf("save: %+v %v", saved, err)
	}
	select {
	case e := <-events:
		if e.ID != saved[0].ID || e.Change != drift.Raised || e.Check != "scheduler" || !e.Since.Equal(now) {
			t.Fatalf("pushed %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other replica got no push")
	}
	// Only raised drift is listed; states include what is still under its threshold.
	list, err := ds.Drifts(ctx, "")
	if err != nil || len(list) != 1 || list[0].Check != "scheduler" || !list[0].Raised() || list[0].Evidence != raised.Evidence {
		t.Fatalf("drifts %+v %v", list, err)
	}
	if l, _ := ds.Drifts(ctx, "node-5"); len(l) != 0 {
		t.Fatalf("node-5: %+v", l)
	}
	by, _ := ds.ByMachine(ctx)
	if st := by["node-4"]; len(by) != 1 || len(st.Drift) != 1 || st.Drift[0].Check != "scheduler" || !st.Checked.Equal(now) {
		t.Fatalf("by machine %+v", by)
	}
	// A machine looked at without any failing check is tracked too.
	if _, err := lead.Save(ctx, "node-5", now, nil, nil); err != nil {
		t.Fatal(err)
	}
	states, _ := lead.States(ctx)
	if st, ok := states["node-5"]; len(states) != 2 || len(states["node-4"]) != 2 || !ok || st != nil {
		t.Fatalf("states %+v", states)
	}
	if _, err := lead.Save(ctx, "node-5", time.Time{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Saving again replaces the machine's states: the scheduler passes, it clears.
	later := now.Add(time.Minute)
	if _, err := lead.Save(ctx, "node-4", later, []drift.State{pending}, []drift.Event{{Check: "scheduler", Title: raised.Title, Change: drift.Cleared, At: later, Since: now, Evidence: "unset"}}); err != nil {
		t.Fatal(err)
	}
	if l, _ := ds.Drifts(ctx, ""); len(l) != 0 {
		t.Fatalf("cleared drift still listed: %+v", l)
	}
	if by, _ := ds.ByMachine(ctx); len(by["node-4"].Drift) != 0 || !by["node-4"].Checked.Equal(later) {
		t.Fatalf("watched, without drift: %+v", by)
	}
	evs, err := ds.EventsAfter(ctx, "node-4", 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Change != drift.Raised || evs[1].Change != drift.Cleared {
		t.Fatalf("history %+v %v", evs, err)
	}
	// The history is append-only.
	if _, err := db.Store.Pool().Exec(ctx, `DELETE FROM drift_events`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("delete history: %v", err)
	}
	if err := lead.Heartbeat(ctx, drift.Watcher{Replica: "r1", LeaderSince: now, LastRoundAt: later, Interval: time.Minute, OfflineAfter: 2 * time.Minute, Machines: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := ds.Watcher(ctx)
	if err != nil || w == nil || w.Replica != "r1" || w.Interval != time.Minute || w.OfflineAfter != 2*time.Minute || w.Machines != 1 {
		t.Fatalf("watcher %+v %v", w, err)
	}
	// Forgetting a machine removes its states and its last check.
	if _, err := lead.Save(ctx, "node-4", time.Time{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if states, _ := lead.States(ctx); len(states) != 0 {
		t.Fatalf("forgotten machine kept: %+v", states)
	}

	// The leader goes: the standby leads, and the old session can write nothing.
	lead.Close()
	if err := lead.Check(ctx); err == nil {
		t.Fatal("a closed session still leads")
	}
	if _, err := lead.Save(ctx, "node-4", later, nil, nil); err == nil {
		t.Fatal("a closed session saved")
	}
	// The server lets go of the lock when the old connection's backend ends, just after.
	deadline := time.Now().Add(10 * time.Second)
	for {
		next, err := standby.TryLead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if next != nil {
			next.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby never led after the leader went")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
