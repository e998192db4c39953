package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/broadcast"
)

// A feed that loses its listening connection catches up from the database: rows
// recorded while it was gone are pushed once, in order, and so are the ones after.
func TestAuditFeedCatchesUpAfterALostConnection(t *testing.T) {
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := db.Store.NewListener(postgres.AuditChannel)
	go l.Run(ctx)
	feed := db.Store.NewAuditFeed()
	go feed.Run(ctx, l)
	<-l.Ready()
	<-feed.Hub().Started()
	events := broadcast.Subscribe(ctx, feed.Hub(), broadcast.Want[string, audit.Event]{All: true}, broadcast.NewView(func(e audit.Event) audit.Event { return e }), 64)
	record := func(machine string) {
		t.Helper()
		if err := db.Store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "registerMachine", Machine: machine, Outcome: audit.Failed, RequestID: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() audit.Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("nothing pushed")
		}
		return audit.Event{}
	}
	record("node-1")
	if e := next(); e.Machine != "node-1" {
		t.Fatalf("pushed %+v", e)
	}
	// Cut the listener's connection, and record while it is gone.
	var cut int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("cut %d listening connections: %v", cut, err)
	}
	record("node-2")
	record("node-3")
	got := []string{next().Machine, next().Machine}
	record("node-4")
	got = append(got, next().Machine)
	if got[0] != "node-2" || got[1] != "node-3" || got[2] != "node-4" {
		t.Fatalf("after the reconnect: %v", got)
	}
	select {
	case e := <-events:
		t.Fatalf("pushed twice: %+v", e)
	case <-time.After(500 * time.Millisecond):
	}
}
