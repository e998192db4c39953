package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
)

func TestIdentityLifecycleInTheStore(t *testing.T) {
	db := pgtest.New(t)
	svc := &identity.Service{Store: db.Store}
	root := identity.Caller{Name: "local:root"}
	create := func(name string, perms ...identity.Permission) (*identity.Identity, string) {
		t.Helper()
		id, token, err := svc.Create(audited("createIdentity"), root, identity.NewIdentity{Name: name, Permissions: perms, ExpiresIn: "30d"})
		if err != nil {
			t.Fatal(err)
		}
		return id, token
	}
	alice, aliceToken := create("alice", identity.ManageInfrastructure)
	if alice.ExpiresAt == nil || alice.ExpiresAt.Sub(time.Now()) < 29*24*time.Hour || alice.LastUsedAt != nil || alice.RevokedAt != nil {
		t.Fatalf("created %+v", alice)
	}
	create("bob", identity.ManageInfrastructure, identity.HardwareDelete)

	// Only the hash is stored.
	var n int
	if err := db.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM identities i WHERE to_jsonb(i)::text LIKE '%' || $1 || '%'`, aliceToken[4:20]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the token is in the identities table (%d rows, %v)", n, err)
	}

	// A duplicate name, also of a revoked identity, is ALREADY_EXISTS on the name.
	_, _, err := svc.Create(audited("createIdentity"), root, identity.NewIdentity{Name: "alice", Permissions: []identity.Permission{identity.ViewInfrastructure}})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.AlreadyExists || e.Field != "name" {
		t.Fatalf("duplicate: %v", err)
	}

	// A server clock an hour behind the database's: the expiry it computes is already past
	// there, and the database says so instead of failing obscurely.
	behind := &identity.Service{Store: db.Store, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	_, _, err = behind.Create(audited("createIdentity"), root, identity.NewIdentity{Name: "skewed", Permissions: []identity.Permission{identity.ViewInfrastructure}, ExpiresIn: "1m"})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.InvalidInput || !strings.Contains(e.Message, "check the clocks") {
		t.Fatalf("expiry past by the database's clock: %v", err)
	}

	// Over the API, bob cannot grant what he holds but carol does not: a manager without
	// hardware.delete cannot mint one that has it.
	carol, _ := create("carol", identity.ManageInfrastructure)
	_, _, err = svc.Create(audited("createIdentity"), identity.APICaller(carol), identity.NewIdentity{Name: "dave", Permissions: []identity.Permission{identity.ManageInfrastructure, identity.HardwareDelete}})
	if apperr.CodeOf(err) != apperr.Forbidden || !strings.Contains(err.Error(), "cannot grant hardware.delete") {
		t.Fatalf("granting more than one holds: %v", err)
	}

	// Revoking: over the API while another manager remains, then refused for the last.
	got, err := svc.Revoke(audited("revokeIdentity"), identity.APICaller(carol), "bob")
	if err != nil || got.RevokedAt == nil || got.RevokedBy != "carol" || got.Active(time.Now()) {
		t.Fatalf("revoke bob: %+v %v", got, err)
	}
	if _, err := svc.Revoke(audited("revokeIdentity"), identity.APICaller(carol), "bob"); apperr.CodeOf(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "already revoked") {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, err := svc.Revoke(audited("revokeIdentity"), identity.APICaller(carol), "nobody"); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("revoke an unknown identity: %v", err)
	}
	if _, err := svc.Revoke(audited("revokeIdentity"), identity.APICaller(carol), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Revoke(audited("revokeIdentity"), identity.APICaller(carol), "carol"); apperr.CodeOf(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "last active one with manage-infrastructure") {
		t.Fatalf("revoking the last manager over the API: %v", err)
	}
	// On the server, it can be done (that is the way back).
	if _, err := svc.Revoke(audited("revokeIdentity"), root, "carol"); err != nil {
		t.Fatalf("revoking the last manager on the server: %v", err)
	}

	list, err := svc.List(t.Context())
	if err != nil || len(list) != 3 || list[0].Name != "alice" || list[1].RevokedBy != "carol" || list[2].RevokedBy != "local:root" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// Every change wrote one audit event, none with a machine.
	var events, withMachine int
	if err := db.Store.Pool().QueryRow(t.Context(), `SELECT count(*), count(machine) FROM audit_events WHERE action IN ('createIdentity', 'revokeIdentity') AND outcome = 'SUCCEEDED'`).Scan(&events, &withMachine); err != nil || events != 6 || withMachine != 0 {
		t.Fatalf("%d events (%d with a machine), %v", events, withMachine, err)
	}
}

// Two managers revoking each other at the same moment over the API: one wins, the other
// is refused, and one manager remains.
func TestConcurrentRevocationsLeaveAManager(t *testing.T) {
	db := pgtest.New(t)
	svc := &identity.Service{Store: db.Store}
	root := identity.Caller{Name: "local:root"}
	var ids []*identity.Identity
	for _, name := range []string{"a", "b"} {
		id, _, err := svc.Create(audited("createIdentity"), root, identity.NewIdentity{Name: name, Permissions: []identity.Permission{identity.ManageInfrastructure}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each revokes itself: both are allowed alone, not together.
				_, errs[i] = svc.Revoke(audited("revokeIdentity"), identity.APICaller(ids[i]), ids[i].Name)
			}()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: %v / %v; want exactly one refused", round, errs[0], errs[1])
		}
		if _, err := db.Store.Pool().Exec(t.Context(), `UPDATE identities SET revoked_at = NULL, revoked_by = NULL`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIdentityUseIsNotedWithoutAWritePerRequest(t *testing.T) {
	db := pgtest.New(t)
	svc := &identity.Service{Store: db.Store}
	_, token, err := svc.Create(audited("createIdentity"), identity.Caller{Name: "local:root"}, identity.NewIdentity{Name: "alice", Permissions: []identity.Permission{identity.ViewInfrastructure}})
	if err != nil {
		t.Fatal(err)
	}
	// Count the UPDATE statements on identities, also those that change no row.
	for _, sql := range []string{
		`CREATE TABLE test_identity_writes (at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`CREATE FUNCTION test_count_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_identity_writes DEFAULT VALUES; RETURN NULL; END $$`,
		`CREATE TRIGGER test_count_write AFTER UPDATE ON identities FOR EACH STATEMENT EXECUTE FUNCTION test_count_write()`,
	} {
		if _, err := db.Store.Pool().Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := identity.Authenticate(t.Context(), db.Store, "Bearer "+token); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var used *time.Time
	for deadline := time.Now().Add(10 * time.Second); used == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := db.Store.Pool().QueryRow(t.Context(), `SELECT last_used_at FROM identities WHERE name = 'alice'`).Scan(&used); err != nil {
			t.Fatal(err)
		}
	}
	if used == nil || time.Since(*used) > time.Minute {
		t.Fatalf("last use = %v", used)
	}
	// Two hundred authentications within a minute, four at a time: a handful of writes at
	// most (the first ones race the first write), not one each.
	time.Sleep(200 * time.Millisecond)
	var writes int
	if err := db.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM test_identity_writes`).Scan(&writes); err != nil {
		t.Fatal(err)
	}
	if writes < 1 || writes > 4 {
		t.Fatalf("%d writes of last_used_at for 200 authentications", writes)
	}
}

// The triggers tell every replica when an identity is revoked, deleted or gets another
// expiry, and stay quiet for a last-use write.
func TestIdentityChangesAreNotified(t *testing.T) {
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l := db.Store.NewListener(postgres.IdentityChannel)
	go l.Run(ctx)
	<-l.Ready()
	w := &recordingWatcher{changed: make(chan int64, 16)}
	go l.WatchIdentities(ctx, w)
	time.Sleep(50 * time.Millisecond) // let WatchIdentities subscribe

	svc := &identity.Service{Store: db.Store}
	root := identity.Caller{Name: "local:root"}
	alice, _, err := svc.Create(audited("createIdentity"), root, identity.NewIdentity{Name: "alice", Permissions: []identity.Permission{identity.ViewInfrastructure}})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Store.Pool().Exec(t.Context(), sql, alice.ID); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE identities SET last_used_at = now() WHERE id = $1`)
	exec(`UPDATE identities SET expires_at = now() + interval '1 hour' WHERE id = $1`)
	if _, err := svc.Revoke(audited("revokeIdentity"), root, "alice"); err != nil {
		t.Fatal(err)
	}
	exec(`DELETE FROM identities WHERE id = $1`)
	for i := range 3 {
		select {
		case id := <-w.changed:
			if id != alice.ID {
				t.Fatalf("notified %d, want %d", id, alice.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %d of 3 never came", i+1)
		}
	}
	select {
	case id := <-w.changed:
		t.Fatalf("a fourth notification (%d): the last-use write notified", id)
	case <-time.After(300 * time.Millisecond):
	}
}

type recordingWatcher struct{ changed chan int64 }

func (w *recordingWatcher) Changed(ctx context.Context, id int64) { w.changed <- id }
func (w *recordingWatcher) CheckAll(ctx context.Context)          {}
