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
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Reads inside a change run on its transaction and NOTIFYs have connections of their own,
// so a change never waits for a second connection of the pool: with a pool of one, and
// as many concurrent changes as connections, none can wait for another forever.
func TestChangesNeedOnlyTheirOwnConnection(t *testing.T) {
	db := pgtest.New(t)
	url := db.URL
	if strings.Contains(url, "?") {
		url += "&pool_max_conns=1"
	} else {
		url += "?pool_max_conns=1"
	}
	store, err := postgres.Open(context.Background(), url, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pgtest.Seal(t, store)
	ctx, cancel := context.WithTimeout(audited("admitMember"), 20*time.Second)
	defer cancel()
	err = store.Audited(ctx, "node-1", func(ctx context.Context) error {
		if _, err := store.Machines().Record(ctx, "node-1"); err != nil {
			return err
		}
		if _, err := store.OpenAdmission(ctx, "node-1"); err != nil {
			return err
		}
		return store.Notify(ctx, postgres.AdmissionChannel, `{}`)
	})
	if err != nil {
		t.Fatalf("a change with a pool of one connection: %v", err)
	}
}

// Once a change has begun (and may have acted in Incus or MAAS), the client going away
// does not undo its record.
func TestAChangeIsRecordedEvenIfTheClientGoesAway(t *testing.T) {
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(audited("removeMember"))
	a := audit.ActionFrom(ctx)
	a.Machine = "node-1"
	err := db.Store.Audited(ctx, "node-1", func(ctx context.Context) error {
		cancel() // the client disconnects right after Incus removed the member
		return nil
	})
	if err != nil || !a.Recorded() {
		t.Fatalf("change after the client left: %v, recorded %v", err, a.Recorded())
	}
	var n int
	if err := db.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE action = 'removeMember' AND outcome = 'SUCCEEDED'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d audit events, %v", n, err)
	}
}

// A dry run only looks at the machine's lock: while one runs, the change it previews and
// other plans of the same machine go ahead; a dry run of a machine a change holds is BUSY.
func TestADryRunTakesNoMachineLock(t *testing.T) {
	db := pgtest.New(t)
	planning := plan.With(audited("installOperatingSystem"), &plan.Recorder{})
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Store.Audited(planning, "node-1", func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	if err := db.Store.Audited(plan.With(audited("installOperatingSystem"), &plan.Recorder{}), "node-1", func(context.Context) error { return nil }); err != nil {
		t.Errorf("a second plan while one runs: %v", err)
	}
	if err := db.Store.Audited(audited("installOperatingSystem"), "node-1", func(context.Context) error { return nil }); err != nil {
		t.Errorf("the real change while its plan runs: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	holding, let := make(chan struct{}), make(chan struct{})
	go func() {
		done <- db.Store.Audited(audited("installOperatingSystem"), "node-1", func(context.Context) error {
			close(holding)
			<-let
			return nil
		})
	}()
	<-holding
	err := db.Store.Audited(plan.With(audited("installOperatingSystem"), &plan.Recorder{}), "node-1", func(context.Context) error { return nil })
	if apperr.CodeOf(err) != apperr.Busy {
		t.Errorf("a plan while a change holds the machine: %v, want BUSY", err)
	}
	close(let)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A mutation's change holds the lock declared beside it in schema/ (@change): one that
// holds another is refused before it changes anything, so the declaration cannot drift
// from the services.
func TestAChangeHoldsTheLockItsMutationDeclares(t *testing.T) {
	db := pgtest.New(t)
	for _, c := range []struct {
		action, machine string
		ok              bool
	}{
		{"registerMachine", "node-1", true},     // MACHINE
		{"registerMachine", "", false},          // MACHINE declared, none held
		{"setHardwareProfile", "", true},        // NONE
		{"setHardwareProfile", "node-1", false}, // NONE declared, a machine's held
		{"createIdentity", "", false},           // IDENTITIES: only through ChangeIdentities
		{"driftCheck", "node-1", true},          // no mutation: not checked
	} {
		ran := false
		err := db.Store.Audited(audited(c.action), c.machine, func(context.Context) error { ran = true; return nil })
		if c.ok != (err == nil) || ran != c.ok {
			t.Errorf("%s holding %q: ran %v, %v", c.action, c.machine, ran, err)
		}
		if !c.ok && apperr.CodeOf(err) != apperr.Internal {
			t.Errorf("%s holding %q: %v, want INTERNAL", c.action, c.machine, err)
		}
	}
	if err := db.Store.ChangeIdentities(audited("createIdentity"), func(identity.Tx) error { return nil }); err != nil {
		t.Errorf("createIdentity through ChangeIdentities: %v", err)
	}
	if err := db.Store.ChangeIdentities(audited("registerMachine"), func(identity.Tx) error { return nil }); apperr.CodeOf(err) != apperr.Internal {
		t.Errorf("registerMachine through ChangeIdentities: %v, want INTERNAL", err)
	}
}
