package provisioning

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

type fakeMAAS struct {
	machines  map[string]*MAASMachine
	calls     []string
	deployErr error
	eraseOn   bool
	configErr error
}

func (f *fakeMAAS) get(id string) (MAASMachine, error) {
	m, ok := f.machines[id]
	if !ok {
		return MAASMachine{}, apperr.New(apperr.NotFound, "no MAAS machine %s", id)
	}
	return *m, nil
}
func (f *fakeMAAS) Machines(context.Context) ([]MAASMachine, error) { return nil, nil }
func (f *fakeMAAS) Machine(_ context.Context, id string) (MAASMachine, error) {
	return f.get(id)
}
func (f *fakeMAAS) Commission(_ context.Context, id string, o CommissionOptions) (MAASMachine, error) {
	f.calls = append(f.calls, "commission "+id+" "+strings.Join(o.Tests, ","))
	f.machines[id].Status = Commissioning
	return f.get(id)
}
func (f *fakeMAAS) Test(_ context.Context, id string, tests []string) (MAASMachine, error) {
	f.calls = append(f.calls, "test "+id+" "+strings.Join(tests, ","))
	f.machines[id].Status = Testing
	return f.get(id)
}
func (f *fakeMAAS) Allocate(_ context.Context, id string) (MAASMachine, error) {
	f.calls = append(f.calls, "allocate "+id)
	f.machines[id].Status = Allocated
	return f.get(id)
}
func (f *fakeMAAS) Deploy(_ context.Context, id, series string, ud UserData) (MAASMachine, error) {
	userData := ud.Bytes
	f.calls = append(f.calls, "deploy "+id+" "+series)
	if f.deployErr != nil {
		return MAASMachine{}, f.deployErr
	}
	if !strings.Contains(string(userData), "TOKEN-") {
		return MAASMachine{}, errors.New("no token in the user data")
	}
	f.machines[id].Status = Deploying
	return f.get(id)
}
func (f *fakeMAAS) Release(_ context.Context, id string, erase bool, _ string) (MAASMachine, error) {
	e := "keep"
	if erase {
		e = "erase"
	}
	f.calls = append(f.calls, "release "+id+" "+e)
	f.machines[id].Status = Ready
	return f.get(id)
}
func (f *fakeMAAS) EraseOnRelease(context.Context) (bool, error) { return f.eraseOn, f.configErr }

type fakeStore struct{ records map[string]*machines.Record }

func (s *fakeStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}

func (s *fakeStore) Record(_ context.Context, name string) (*machines.Record, error) {
	return s.records[name], nil
}
func (s *fakeStore) RecordBySystemID(_ context.Context, id string) (*machines.Record, error) {
	for _, r := range s.records {
		if r.MAASSystemID == id {
			return r, nil
		}
	}
	return nil, nil
}

type secret string

func (s secret) Reveal() string { return string(s) }

type fakeEnrolment struct{ prepared, withdrawn, joining []string }

func (f *fakeEnrolment) Prepare(_ context.Context, rec *machines.Record, cluster string, _ []enrolment.ConfigValue) (*enrolment.Approval, error) {
	f.prepared = append(f.prepared, rec.Name+"@"+cluster)
	return &enrolment.Approval{Name: rec.Name, Token: secret("TOKEN-" + rec.Name), Addresses: []string{"10.0.0.5:8443"}}, nil
}
func (f *fakeEnrolment) Withdraw(_ context.Context, a *enrolment.Approval) {
	f.withdrawn = append(f.withdrawn, a.Name)
}
func (f *fakeEnrolment) Joining(_ context.Context, a *enrolment.Approval) error {
	f.joining = append(f.joining, a.Name)
	return nil
}
func (f *fakeEnrolment) Joined(_ context.Context, name, _ string) error {
	f.joining = append(f.joining, name)
	return nil
}

type members []string

func (m members) Snapshot(context.Context) (*membership.Snapshot, error) {
	s := &membership.Snapshot{}
	for _, n := range m {
		s.Members = append(s.Members, membership.Member{Name: n})
	}
	return s, nil
}

func setup() (*Service, *fakeMAAS, *fakeEnrolment) {
	m := &fakeMAAS{machines: map[string]*MAASMachine{
		"ready1": {SystemID: "ready1", Hostname: "node-a", Status: Ready, StatusName: "Ready", HardwareUUID: "uuid-a"},
		"depl01": {SystemID: "depl01", Hostname: "node-b", Status: Deployed, StatusName: "Deployed", HardwareUUID: "uuid-b"},
		"alloc1": {SystemID: "alloc1", Hostname: "node-c", Status: Allocated, StatusName: "Allocated"},
		"broke1": {SystemID: "broke1", Hostname: "node-d", Status: Broken, StatusName: "Broken"},
		"comm01": {SystemID: "comm01", Hostname: "node-e", Status: Commissioning, StatusName: "Commissioning"},
	}}
	st := &fakeStore{records: map[string]*machines.Record{
		"node-a": {Name: "node-a", Provisioner: machines.MAAS, MAASSystemID: "ready1", HardwareUUID: "uuid-a"},
		"node-b": {Name: "node-b", Provisioner: machines.MAAS, MAASSystemID: "depl01", HardwareUUID: "uuid-b"},
		"node-c": {Name: "node-c", Provisioner: machines.MAAS, MAASSystemID: "alloc1"},
		"node-d": {Name: "node-d", Provisioner: machines.MAAS, MAASSystemID: "broke1"},
		"node-e": {Name: "node-e", Provisioner: machines.MAAS, MAASSystemID: "comm01"},
		"node-m": {Name: "node-m", Provisioner: machines.Manual},
	}}
	en := &fakeEnrolment{}
	return &Service{MAAS: m, Store: st, Membership: members{"node-b"}, Enrolment: en, EnrolScript: []byte("#!/bin/sh\n")}, m, en
}

func code(err error) apperr.Code { return apperr.CodeOf(err) }

func TestCommissionRules(t *testing.T) {
	s, m, _ := setup()
	ctx := context.Background()
	for id, want := range map[string]apperr.Code{"depl01": apperr.FailedPrecondition, "alloc1": apperr.FailedPrecondition, "comm01": apperr.FailedPrecondition, "BAD!": apperr.InvalidInput} {
		if _, err := s.Commission(ctx, id, CommissionOptions{}); code(err) != want {
			t.Errorf("commission %s: %v, want %s", id, err, want)
		}
	}
	if _, err := s.Commission(ctx, "broke1", CommissionOptions{Tests: []string{"memtester"}}); err != nil {
		t.Fatal(err)
	}
	// A machine Apelora has no record of: no step is taken (MAAS is not even asked).
	m.machines["new001"] = &MAASMachine{SystemID: "new001", Hostname: "node-n", Status: New, StatusName: "New"}
	for _, step := range []func() error{
		func() error { _, err := s.Commission(ctx, "new001", CommissionOptions{}); return err },
		func() error { _, err := s.RunTests(ctx, "new001", "node-n", nil); return err },
		func() error {
			_, _, err := s.Release(identity.WithIdentity(ctx, &identity.Identity{Name: "ops"}), "new001", false, "")
			return err
		},
	} {
		if err := step(); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "register it first") {
			t.Errorf("a step on an unregistered machine: %v", err)
		}
	}
	if strings.Join(m.calls, ";") != "commission broke1 memtester" {
		t.Fatalf("calls %v", m.calls)
	}
}

func TestHardwareTestRules(t *testing.T) {
	s, m, _ := setup()
	ctx := context.Background()
	if _, err := s.RunTests(ctx, "ready1", "node-z", nil); code(err) != apperr.InvalidInput || strings.Contains(err.Error(), "node-a") {
		t.Fatalf("wrong hostname: %v", err)
	}
	if _, err := s.RunTests(ctx, "ready1", "", nil); code(err) != apperr.InvalidInput {
		t.Fatalf("no hostname: %v", err)
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = "t" + string(rune('a'+i))
	}
	if _, err := s.RunTests(ctx, "ready1", "node-a", seventeen); code(err) != apperr.InvalidInput {
		t.Fatalf("17 tests: %v", err)
	}
	if _, err := s.RunTests(ctx, "ready1", "node-a", []string{"a", "a"}); code(err) != apperr.InvalidInput {
		t.Fatalf("a test named twice: %v", err)
	}
	for _, id := range []string{"depl01", "alloc1"} {
		if _, err := s.RunTests(ctx, id, m.machines[id].Hostname, nil); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "release it first") {
			t.Fatalf("test %s: %v", id, err)
		}
	}
	if _, err := s.RunTests(ctx, "comm01", "node-e", nil); code(err) != apperr.FailedPrecondition {
		t.Fatalf("test while commissioning: %v", err)
	}
	if _, err := s.RunTests(ctx, "broke1", "NODE-D", []string{"smartctl-validate"}); err != nil {
		t.Fatalf("test a Broken machine (hostname in another case): %v", err)
	}
	if len(m.calls) != 1 {
		t.Fatalf("MAAS was asked %v", m.calls)
	}
}

func TestInstall(t *testing.T) {
	s, m, en := setup()
	ctx := context.Background()
	if _, err := s.Install(ctx, "node-m", "noble", "", nil); code(err) != apperr.FailedPrecondition {
		t.Fatalf("install a MANUAL machine: %v", err)
	}
	if _, err := s.Install(ctx, "node-x", "noble", "", nil); code(err) != apperr.NotFound {
		t.Fatalf("install an unknown machine: %v", err)
	}
	if _, err := s.Install(ctx, "node-a", "not a series", "", nil); code(err) != apperr.InvalidInput {
		t.Fatalf("bad series: %v", err)
	}
	got, err := s.Install(ctx, "node-a", "noble", "rack2", nil)
	if err != nil || got.Status != Deploying || strings.Join(m.calls, ";") != "allocate ready1;deploy ready1 noble" {
		t.Fatalf("install: %v %v %v", got, err, m.calls)
	}
	// The token comes from the cluster named, and the record names it after the deploy.
	if len(en.prepared) != 1 || en.prepared[0] != "node-a@rack2" || len(en.withdrawn) != 0 || len(en.joining) != 1 {
		t.Fatalf("prepared %v withdrawn %v", en.prepared, en.withdrawn)
	}

	// A deploy MAAS refuses: the token is withdrawn and the allocation made here returned.
	s, m, en = setup()
	m.deployErr = apperr.New(apperr.FailedPrecondition, "MAAS refused to deploy: distro_series: 'warty' is not valid")
	if _, err := s.Install(ctx, "node-a", "warty", "", nil); err == nil {
		t.Fatal("install succeeded")
	}
	if strings.Join(m.calls, ";") != "allocate ready1;deploy ready1 warty;release ready1 keep" || len(en.withdrawn) != 1 {
		t.Fatalf("after a failed deploy: calls %v withdrawn %v", m.calls, en.withdrawn)
	}

	// A machine replaced under the same system id is not installed.
	s, m, _ = setup()
	m.machines["ready1"].HardwareUUID = "uuid-other"
	if _, err := s.Install(ctx, "node-a", "noble", "", nil); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("hardware UUID changed: %v", err)
	}
}

func TestRelease(t *testing.T) {
	s, m, _ := setup()
	manager := identity.WithIdentity(context.Background(), &identity.Identity{Name: "ops", Permissions: []identity.Permission{identity.ManageInfrastructure}})
	eraser := identity.WithIdentity(context.Background(), &identity.Identity{Name: "root", Permissions: []identity.Permission{identity.ManageInfrastructure, identity.HardwareDelete}})
	if _, _, err := s.Release(manager, "depl01", false, ""); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "remove the member first") {
		t.Fatalf("release a member: %v", err)
	}
	// A member with no machine record (the bootstrap member) is found by its hostname.
	m.machines["boot01"] = &MAASMachine{SystemID: "boot01", Hostname: "m1", Status: Deployed, StatusName: "Deployed"}
	s.Membership = members{"node-b", "m1"}
	if _, _, err := s.Release(manager, "boot01", false, ""); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "register it first") {
		t.Fatalf("release an unregistered member: %v", err)
	}
	// A registered machine whose MAAS hostname names a member is found by that hostname.
	s.Store.(*fakeStore).records["node-f"] = &machines.Record{Name: "node-f", Provisioner: machines.MAAS, MAASSystemID: "boot01"}
	if _, _, err := s.Release(manager, "boot01", false, ""); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "m1 is an Incus member") {
		t.Fatalf("release a member registered under another name: %v", err)
	}
	if _, _, err := s.Release(manager, "broke1", true, ""); code(err) != apperr.Forbidden {
		t.Fatalf("erase without hardware.delete: %v", err)
	}
	if _, _, err := s.Release(manager, "broke1", false, "two\nlines"); code(err) != apperr.InvalidInput {
		t.Fatalf("multi-line comment: %v", err)
	}
	_, p, err := s.Release(eraser, "broke1", true, "")
	if err != nil || !p.Requested || *p.Effective() != true {
		t.Fatalf("erase: %+v %v", p, err)
	}
	m.eraseOn = true
	_, p, err = s.Release(manager, "alloc1", false, "")
	if err != nil || p.Effective() == nil || !*p.Effective() || !strings.Contains(p.Message, "MAAS will erase the disks anyway") {
		t.Fatalf("MAAS erases on release: %+v %v", p, err)
	}
	m.configErr = apperr.New(apperr.FailedPrecondition, "forbidden")
	if p, err := s.PreviewRelease(manager, false); err != nil || p.Effective() != nil || !strings.Contains(p.Message, "may erase") {
		t.Fatalf("setting unreadable: %+v %v", p, err)
	}
	if strings.Join(m.calls, ";") != "release broke1 erase;release alloc1 keep" {
		t.Fatalf("calls %v", m.calls)
	}
}

func TestNotConfigured(t *testing.T) {
	s := &Service{}
	if _, err := s.Commission(context.Background(), "ready1", CommissionOptions{}); code(err) != apperr.FailedPrecondition || !strings.Contains(err.Error(), "APELORA_MAAS_URL") {
		t.Fatalf("%v", err)
	}
}
