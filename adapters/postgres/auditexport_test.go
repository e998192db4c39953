package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
)

// One exporter per sink: a second candidate for the same sink stands by while another
// sink leads on its own; the position only moves forward, survives the leader, and the
// next leader starts from it. Leaves are read from any index, in order.
func TestAuditExportLeadsOneSinkAtATimeAndKeepsItsPosition(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	for i := range 7 {
		if err := db.Store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "registerMachine", Machine: fmt.Sprintf("node-%d", i),
			Outcome: audit.Succeeded, RequestID: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	a := db.Store.AuditExportLeadership("test a", time.Minute)
	b := db.Store.AuditExportLeadership("test b", time.Minute)
	lead, err := a.TryLead(ctx, "syslog tcp://127.0.0.1:1")
	if err != nil || lead == nil {
		t.Fatalf("lead: %v %v", lead, err)
	}
	if p, err := b.TryLead(ctx, "syslog tcp://127.0.0.1:1"); err != nil || p != nil {
		t.Fatalf("a second exporter led the same sink: %v %v", p, err)
	}
	other, err := db.Store.AuditExportLeadership("test c", time.Minute).TryLead(ctx, "jsonl /tmp/x")
	if err != nil || other == nil {
		t.Fatalf("another sink: %v %v", other, err)
	}
	defer other.Close()
	if n, err := lead.Next(ctx); err != nil || n != 0 {
		t.Fatalf("a new sink starts at leaf 0: %d %v", n, err)
	}
	for _, n := range []int64{5, 3} {
		if err := lead.Acknowledge(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := other.Next(ctx); err != nil || n != 0 {
		t.Fatalf("the other sink's position moved with the first: %d %v", n, err)
	}
	lead.Close()
	next, err := b.TryLead(ctx, "syslog tcp://127.0.0.1:1")
	if err != nil || next == nil {
		t.Fatalf("the standby did not lead once the leader closed: %v %v", next, err)
	}
	defer next.Close()
	if n, err := next.Next(ctx); err != nil || n != 5 {
		t.Fatalf("the next leader starts at %d (%v), want 5: the position never moves back", n, err)
	}
	events, err := db.Store.AuditLeavesFrom(ctx, 5, 10)
	if err != nil || len(events) != 2 || events[0].LeafIndex != 5 || events[1].LeafIndex != 6 || events[1].Machine != "node-6" ||
		events[0].LeafHash != events[0].Record.LeafHash() {
		t.Fatalf("leaves from 5: %+v %v", events, err)
	}
}
