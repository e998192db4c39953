package patronilab

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The lab's promise: a row committed on the primary is on the standby that Patroni
// promotes after the primary is SIGKILLed, and the multi-host URL reaches it.
func TestAPrimaryLossPromotesTheStandbyWithEveryCommit(t *testing.T) {
	c := Start(t, "lab")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE acked (n int PRIMARY KEY); INSERT INTO acked SELECT generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	old := c.WaitPrimary(t, nil)
	killed := time.Now()
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	if old.IsPrimary() || old.postmasterPID() != 0 {
		t.Fatalf("%s's Patroni or PostgreSQL outlived the kill", old.Name)
	}
	now := c.WaitPrimary(t, old)
	t.Logf("%s promoted %s after %s was killed", now.Name, time.Since(killed).Round(time.Millisecond), old.Name)
	conn, err = pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatalf("the multi-host URL after the failover: %v\n%s", err, c.Logs())
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM acked`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("%d of 100 committed rows after the failover (%v)", n, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO acked VALUES (101)`); err != nil {
		t.Fatalf("a write on the promoted primary: %v", err)
	}
}
