package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/localpg"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/broadcast"
	"github.com/apelora/fabric/internal/leader"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// auditPushes runs a listener and the audit feed on store and returns what it pushes.
func auditPushes(t *testing.T, ctx context.Context, store *postgres.Store) (record func(machine string), next func() string) {
	t.Helper()
	l := store.NewListener(postgres.AuditChannel)
	go l.Run(ctx)
	feed := store.NewAuditFeed()
	go feed.Run(ctx, l)
	select {
	case <-l.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the listener never listened")
	}
	<-feed.Hub().Started()
	events := broadcast.Subscribe(ctx, feed.Hub(), broadcast.Want[string, audit.Event]{All: true}, broadcast.NewView(func(e audit.Event) audit.Event { return e }), 64)
	record = func(machine string) {
		t.Helper()
		if err := store.RecordAudit(ctx, audit.Event{Actor: "admin", Action: "registerMachine", Machine: machine, Outcome: audit.Failed, RequestID: "r"}); err != nil {
			t.Fatalf("record %s: %v", machine, err)
		}
	}
	next = func() string {
		t.Helper()
		select {
		case e := <-events:
			return e.Machine
		case <-time.After(30 * time.Second):
			t.Fatal("nothing pushed")
		}
		return ""
	}
	return record, next
}

// A libpq multi-host URL whose first host is down (as a failed primary is) with
// target_session_attrs=read-write: the store, the listener and the leader lease all reach
// the second host.
func TestMultiHostURLReachesTheHostThatIsUp(t *testing.T) {
	db := pgtest.New(t)
	if !strings.HasPrefix(db.URL, "postgres") {
		t.Skipf("SKIPPED: %s is not a URL; a multi-host URL is built from one", pgtest.EnvVar)
	}
	// A loopback port with nothing behind it.
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := gone.Addr().String()
	gone.Close()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = down + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := postgres.Open(ctx, u.String(), discard)
	if err != nil {
		t.Fatalf("open %s: %v", strings.Replace(u.String(), u.User.String()+"@", "", 1), err)
	}
	defer store.Close()
	pgtest.Seal(t, store)
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	record, next := auditPushes(t, ctx, store)
	record("node-1")
	if got := next(); got != "node-1" {
		t.Fatalf("pushed %q", got)
	}
	lease, err := store.FenceLeadership("apelora-worker multi-host", time.Minute).TryLead(ctx)
	if err != nil || lease == nil {
		t.Fatalf("lease through a multi-host URL: %v %v", lease, err)
	}
	defer lease.Close()
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
}

// PostgreSQL restarts (as a failover looks to a client: every connection dropped, the
// server back a moment later). The listener reconnects and the feed catches up with what
// was recorded meanwhile, pushing each row once; the leader's renewal says its lease is
// lost (its connection is gone); a new take-over succeeds once the lease has expired, with
// the next epoch.
func TestListenerAndLeadershipReconnectAfterAPostgreSQLRestart(t *testing.T) {
	pgtest.AdminURL(t) // skips loudly (fails under CI) where the test PostgreSQL is missing
	if _, err := localpg.FindBinDir(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	// Not t.TempDir(): its parent is private to root, and the postgres user must reach it.
	dir, err := os.MkdirTemp("/var/tmp", "apelora-restart-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := localpg.New(filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := pg.Start(ctx, "apelora"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()); _ = os.RemoveAll(dir) })
	store, err := postgres.Open(ctx, pg.URL("apelora"), discard)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pgtest.Seal(t, store)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	record, next := auditPushes(t, ctx, store)
	record("node-1")
	if got := next(); got != "node-1" {
		t.Fatalf("pushed %q", got)
	}
	const length = 2 * time.Second
	lease, err := store.FenceLeadership("apelora-worker a", length).TryLead(ctx)
	if err != nil || lease == nil {
		t.Fatalf("lead: %v %v", lease, err)
	}
	defer lease.Close()

	restart := time.Now()
	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(ctx, "apelora"); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL restarted in %v", time.Since(restart).Round(time.Millisecond))
	if err := lease.Renew(ctx); !errors.Is(err, leader.ErrLost) {
		t.Fatalf("renewal on a connection from before the restart: %v, want leader.ErrLost", err)
	}
	// The pool's connections died too: the first write may fail, later ones reach the
	// restarted server.
	for deadline := time.Now().Add(30 * time.Second); store.Ping(ctx) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never reached the restarted server")
		}
	}
	record("node-2")
	record("node-3")
	got := []string{next(), next()}
	if got[0] != "node-2" || got[1] != "node-3" {
		t.Fatalf("after the restart: %v", got)
	}
	standby := store.FenceLeadership("apelora-worker b", length)
	var again interface{ Epoch() int64 }
	for deadline := time.Now().Add(3 * length); again == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nobody led again after the restart")
		}
		s, err := standby.TryLead(ctx)
		if err != nil {
			t.Logf("take-over attempt: %v", err)
			continue
		}
		if s != nil {
			defer s.Close()
			again = s
		}
	}
	if again.Epoch() != lease.Epoch()+1 {
		t.Fatalf("epoch %d after %d", again.Epoch(), lease.Epoch())
	}
	t.Logf("led again %v after the restart began", time.Since(restart).Round(time.Millisecond))
}
