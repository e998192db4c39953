package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

func TestHardwareProfilesAreAuditedAndAssignedToRecords(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	svc := &hardware.Service{Store: db.Store.HardwareProfiles()}
	for _, name := range []string{"node-a", "node-b"} {
		if err := db.Store.Machines().Change(audited("registerMachine"), name, func(tx machines.Tx) error {
			return tx.InsertRecord(ctx, machines.Record{Name: name, Provisioner: machines.Manual, RegisteredAt: time.Now(), RegisteredBy: "admin"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	wantCode := func(err error, code apperr.Code, field, says string) {
		t.Helper()
		e, ok := apperr.As(err)
		if !ok || e.Code != code || e.Field != field || !strings.Contains(e.Message, says) {
			t.Fatalf("got %v, want %s on %q saying %q", err, code, field, says)
		}
	}

	d, err := svc.Declare(audited("setHardwareProfile"), "admin", hardware.Declaration{Name: "gen2", Description: "2U compute", Architecture: "amd64",
		MinCPUCores: 32, MinMemoryMiB: 131072, MinDisks: 2, MinDiskSizeGB: 960, MinNICs: 2, MinNICSpeedMbps: 25000})
	if err != nil || d.Previous != nil {
		t.Fatalf("declare: %+v %v", d, err)
	}
	if p := d.Profile; p.Architecture != "x86_64" || p.MinNICSpeedMbps != 25000 || p.SetBy != "admin" || p.SetAt.IsZero() || len(p.Machines) != 0 || p.Description != "2U compute" {
		t.Fatalf("read back %+v", p)
	}

	_, err = svc.Assign(audited("assignHardwareProfile"), "node-x", "gen2")
	wantCode(err, apperr.NotFound, "machine", "register it first")
	_, err = svc.Assign(audited("assignHardwareProfile"), "node-a", "gen9")
	wantCode(err, apperr.NotFound, "profile", "declare it first")
	_, err = svc.Assign(audited("assignHardwareProfile"), "Node A", "gen2")
	wantCode(err, apperr.InvalidInput, "machine", "not valid")
	if prev, err := svc.Assign(audited("assignHardwareProfile"), "node-a", "gen2"); err != nil || prev != "" {
		t.Fatalf("assign: %q %v", prev, err)
	}
	if rec, _ := db.Store.Machines().Record(ctx, "node-a"); rec.HardwareProfile != "gen2" {
		t.Fatalf("record %+v", rec)
	}
	if rec, _ := db.Store.Machines().Record(ctx, "node-b"); rec.HardwareProfile != "" {
		t.Fatalf("record %+v", rec)
	}

	// Replacing keeps the assignment and returns what it replaced.
	d, err = svc.Declare(audited("setHardwareProfile"), "admin", hardware.Declaration{Name: "gen2", Architecture: "x86_64", MinCPUCores: 16})
	if err != nil || d.Previous == nil || d.Previous.MinCPUCores != 32 || d.Profile.MinCPUCores != 16 || !slices.Equal(d.Profile.Machines, []string{"node-a"}) {
		t.Fatalf("replace: %+v %v", d, err)
	}

	// A profile still assigned is not removed, and the refusal names the machines.
	_, err = svc.Remove(audited("removeHardwareProfile"), "gen2")
	wantCode(err, apperr.FailedPrecondition, "profile", "still assigned to node-a")
	ps, err := svc.Profiles(ctx)
	if err != nil || len(ps) != 1 || !slices.Equal(ps[0].Machines, []string{"node-a"}) {
		t.Fatalf("profiles %+v %v", ps, err)
	}

	if prev, err := svc.Clear(audited("clearHardwareProfile"), "node-a"); err != nil || prev != "gen2" {
		t.Fatalf("clear: %q %v", prev, err)
	}
	if prev, err := svc.Clear(audited("clearHardwareProfile"), "node-a"); err != nil || prev != "" {
		t.Fatalf("clear again: %q %v", prev, err)
	}
	removed, err := svc.Remove(audited("removeHardwareProfile"), "gen2")
	if err != nil || removed == nil || removed.Name != "gen2" {
		t.Fatalf("remove: %+v %v", removed, err)
	}
	_, err = svc.Remove(audited("removeHardwareProfile"), "gen2")
	wantCode(err, apperr.NotFound, "", "no hardware profile")
	if p, err := svc.Profile(ctx, "gen2"); p != nil || err != nil {
		t.Fatalf("removed profile read: %+v %v", p, err)
	}

	// One audit event per successful change, with its facts; refusals wrote none here
	// (the gate records those).
	rows, err := db.Store.Pool().Query(ctx, `SELECT action, coalesce(details->>'previousProfile', 'null') FROM audit_events WHERE outcome = 'SUCCEEDED' AND action <> 'registerMachine' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var a, prev string
		_ = rows.Scan(&a, &prev)
		got = append(got, a+":"+prev)
	}
	want := []string{"setHardwareProfile:null", "assignHardwareProfile:null", "setHardwareProfile:null", "clearHardwareProfile:gen2", "clearHardwareProfile:null", "removeHardwareProfile:null"}
	if !slices.Equal(got, want) {
		t.Fatalf("audit events\n got %v\nwant %v", got, want)
	}

	// The database refuses what the domain would never send.
	err = db.Store.HardwareProfiles().Change(audited("setHardwareProfile"), "", func(tx hardware.Tx) error {
		_, err := tx.PutProfile(ctx, hardware.Profile{Name: "bad", Architecture: "x86_64", MinCPUCores: -1, SetBy: "a", SetAt: time.Now()})
		return err
	})
	if err == nil {
		t.Fatal("a negative minimum was stored")
	}
	// Unregistering a machine forgets its assignment with it.
	if _, err := svc.Declare(audited("setHardwareProfile"), "admin", hardware.Declaration{Name: "gen3", Architecture: "arm64"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Assign(audited("assignHardwareProfile"), "node-b", "gen3"); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Machines().Change(audited("unregisterMachine"), "node-b", func(tx machines.Tx) error {
		_, err := tx.DeleteRecord(ctx, "node-b")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Remove(audited("removeHardwareProfile"), "gen3"); err != nil {
		t.Fatalf("remove after the machine was unregistered: %v", err)
	}
}
