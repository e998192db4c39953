package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// admit records an admission of machine in an audited change, as admitMember does.
func admit(t *testing.T, s *postgres.Store, machine string, roles []string) int64 {
	t.Helper()
	var id, cluster int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT id FROM clusters WHERE from_environment`).Scan(&cluster); err != nil {
		t.Fatalf("the environment's cluster: %v", err)
	}
	err := s.Audited(audited("admitMember"), machine, func(ctx context.Context) (err error) {
		id, err = s.RecordAdmission(ctx, admission.Admitted{Cluster: cluster, Machine: machine, Member: machine, Roles: roles, By: "admin", RequestID: "req-1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func end(t *testing.T, s *postgres.Store, machine, step string) {
	t.Helper()
	if err := s.Audited(audited(step), machine, func(ctx context.Context) error { return s.EndAdmission(ctx, machine) }); err != nil {
		t.Fatal(err)
	}
}

func TestAdmittedMachinesWithTheirRoles(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	admit(t, db.Store, "node-4", []string{"database-standby", "event-hub"})
	admit(t, db.Store, "node-6", nil)
	end(t, db.Store, "node-6", "removeMember")
	admit(t, db.Store, "node-7", nil)
	// A carried-over admission whose trail event listed no roles (migration 0008).
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO admissions (machine, member, admitted_by, request_id, carried_over)
		VALUES ('node-5', 'node-5', 'admin', 'old', true)`); err != nil {
		t.Fatal(err)
	}
	// A refused or planned change ends nothing: its transaction is not kept.
	refused := errors.New("refused")
	if err := db.Store.Audited(audited("removeMember"), "node-4", func(ctx context.Context) error {
		if err := db.Store.EndAdmission(ctx, "node-4"); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatal(err)
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
	if got[1].RolesKnown || !got[2].RolesKnown || len(got[2].Roles) != 0 {
		t.Fatalf("roles unknown (carried over), and none: %+v %+v", got[1], got[2])
	}
}

// An admission keeps the id of the audit event that recorded it (drawn only when the event
// is inserted, after the Incus update), and a second admission ends the first.
func TestAnAdmissionKeepsItsAuditEvent(t *testing.T) {
	db := pgtest.New(t)
	db.EnvironmentCluster(t) // its rows are the environment's cluster's (migration 0040)
	ctx := context.Background()
	first := admit(t, db.Store, "node-1", []string{"database"})
	second := admit(t, db.Store, "node-1", []string{"database"})
	open, err := db.Store.OpenAdmission(ctx, "node-1")
	if err != nil || open == nil || open.ID != second || open.CarriedOver || first == second {
		t.Fatalf("open admission %+v %v (first %d, second %d)", open, err, first, second)
	}
	var eventID int64
	var action string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT a.audit_event_id, e.action FROM admissions a JOIN audit_events e ON e.id = a.audit_event_id
		WHERE a.id = $1`, second).Scan(&eventID, &action); err != nil || action != "admitMember" {
		t.Fatalf("admission %d's audit event: %d %q %v", second, eventID, action, err)
	}
	var endedBy, endedAction string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT ended_by, ended_action FROM admissions WHERE id = $1`, first).Scan(&endedBy, &endedAction); err != nil ||
		endedBy != "admin" || endedAction != "admitMember" {
		t.Fatalf("first admission ended by %q with %q: %v", endedBy, endedAction, err)
	}
	end(t, db.Store, "node-1", "removeMember")
	if open, err := db.Store.OpenAdmission(ctx, "node-1"); err != nil || open != nil {
		t.Fatalf("after removeMember: %+v %v", open, err)
	}
	all, err := db.Store.OpenAdmissions(ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("open admissions %v %v", all, err)
	}
	// Outside a change, an admission is never written.
	if _, err := db.Store.RecordAdmission(ctx, admission.Admitted{Machine: "node-2"}); !apperr.Is(err, apperr.Internal) {
		t.Fatalf("written outside a change: %v", err)
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

	lead, err := db.Store.DriftLeadership("test-1", time.Minute).TryLead(ctx)
	if err != nil || lead == nil {
		t.Fatalf("lead: %v %v", lead, err)
	}
	standby := other.DriftLeadership("test-2", time.Minute)
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
	saved, err := lead.Save(ctx, "node-4", now, "", []drift.State{raised, pending},
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
	if _, err := lead.Save(ctx, "node-5", now, "drift is quiet for node-5: in maintenance", nil, nil); err != nil {
		t.Fatal(err)
	}
	if by, _ := ds.ByMachine(ctx); by["node-5"].Quiet != "drift is quiet for node-5: in maintenance" || by["node-4"].Quiet != "" {
		t.Fatalf("quiet reasons: %+v", by)
	}
	states, _ := lead.States(ctx)
	if st, ok := states["node-5"]; len(states) != 2 || len(states["node-4"]) != 2 || !ok || st != nil {
		t.Fatalf("states %+v", states)
	}
	if _, err := lead.Save(ctx, "node-5", time.Time{}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Saving again replaces the machine's states: the scheduler passes, it clears.
	later := now.Add(time.Minute)
	if _, err := lead.Save(ctx, "node-4", later, "", []drift.State{pending}, []drift.Event{{Check: "scheduler", Title: raised.Title, Change: drift.Cleared, At: later, Since: now, Evidence: "unset"}}); err != nil {
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
	if _, err := lead.Save(ctx, "node-4", time.Time{}, "", nil, nil); err != nil {
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
	if _, err := lead.Save(ctx, "node-4", later, "", nil, nil); err == nil {
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
