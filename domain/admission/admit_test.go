package admission

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/internal/apperr"
)

type fakeMembers struct {
	f       *fakeIncus
	etag    string
	updates []membership.Member
	etags   []string
}

func (m *fakeMembers) Member(_ context.Context, name string) (membership.Member, string, error) {
	for _, x := range m.f.members {
		if x.Name == name {
			return x, m.etag, nil
		}
	}
	return membership.Member{}, "", apperr.New(apperr.NotFound, "no member")
}

func (m *fakeMembers) UpdateMember(_ context.Context, x membership.Member, etag string) error {
	m.updates = append(m.updates, x)
	m.etags = append(m.etags, etag)
	return nil
}

type fakeStore struct {
	open     *lifecycle.Admission
	recorded []Admitted
	audited  int
	profile  string // the records' hardware profile
}

func (s *fakeStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	s.audited++
	return fn(ctx)
}

func (s *fakeStore) Record(_ context.Context, name string) (*machines.Record, error) {
	return &machines.Record{Name: name, Provisioner: machines.Manual, HardwareProfile: s.profile}, nil
}

func (s *fakeStore) OpenAdmission(context.Context, string) (*lifecycle.Admission, error) {
	return s.open, nil
}

func (s *fakeStore) NextAdmissionID(context.Context) (int64, error) {
	return int64(41 + len(s.recorded)), nil
}

func (s *fakeStore) RecordAdmission(_ context.Context, a Admitted) (int64, error) {
	s.recorded = append(s.recorded, a)
	s.open = &lifecycle.Admission{ID: a.ID}
	return s.open.ID, nil
}

func admitService(f *fakeIncus) (*Service, *fakeMembers, *fakeStore) {
	mem := &fakeMembers{f: f, etag: `"e1"`}
	st := &fakeStore{}
	return &Service{Checker: &Checker{Ports: portsOf[Incus](f), Clusters: testClusters}, Members: portsOf[Members](mem), Store: st}, mem, st
}

func TestAdmitReleasesTheHoldAndKeepsEverythingElse(t *testing.T) {
	f := healthy()
	f.members[1].Roles = []string{"database", "event-hub"}
	f.members[1].Groups = []string{"default", "gpu"}
	f.members[1].FailureDomain = "rack-3"
	f.members[1].Description = "node three"
	f.members[1].Config["user.owner"] = "ops"
	s, mem, st := admitService(f)
	a := &audit.Action{Name: "admitMember", Actor: "alice", RequestID: "req-1"}
	report, err := s.Admit(audit.WithAction(context.Background(), a), "node-3")
	if err != nil {
		t.Fatal(err)
	}
	if report.Verdict != Admissible || len(mem.updates) != 1 || mem.etags[0] != `"e1"` {
		t.Fatalf("verdict %s, %d updates, etags %v", report.Verdict, len(mem.updates), mem.etags)
	}
	u := mem.updates[0]
	if _, held := u.Config["scheduler.instance"]; held || u.Config["user.owner"] != "ops" || u.Config[lifecycle.AdmissionKey] != "admission 41, request req-1" {
		t.Fatalf("config sent %v", u.Config)
	}
	if !reflect.DeepEqual(u.Roles, []string{"database", "event-hub"}) || !reflect.DeepEqual(u.Groups, []string{"default", "gpu"}) || u.FailureDomain != "rack-3" || u.Description != "node three" {
		t.Fatalf("writable fields not sent back: %+v", u)
	}
	if f.members[1].Config["scheduler.instance"] != "manual" {
		t.Fatal("the member read from Incus was modified in place")
	}
	ev := a.Event(audit.Succeeded, "")
	if ev.Details["verdict"] != Admissible || ev.Details["checks"] == nil {
		t.Fatalf("audit details %v", ev.Details)
	}
	// The roles it was admitted with are recorded for drift to compare with later.
	if r, ok := ev.Details[AdmittedRolesDetail].([]string); !ok || !reflect.DeepEqual(r, []string{"database", "event-hub"}) {
		t.Fatalf("recorded roles %#v", ev.Details[AdmittedRolesDetail])
	}
	want := Admitted{ID: 41, Cluster: 1, Machine: "node-3", Member: "node-3", Roles: []string{"database", "event-hub"}, Groups: []string{"default", "gpu"},
		FailureDomain: "rack-3", By: "alice", RequestID: "req-1"}
	if len(st.recorded) != 1 || !reflect.DeepEqual(st.recorded[0], want) || ev.Details[AdmissionDetail] != int64(41) {
		t.Fatalf("recorded %+v, event names admission %v", st.recorded, ev.Details[AdmissionDetail])
	}
}

func TestAdmitRefusesOnAnyFailureAndChangesNothing(t *testing.T) {
	f := healthy()
	f.pools["fast"] = "Pending"
	s, mem, _ := admitService(f)
	a := &audit.Action{Name: "admitMember"}
	report, err := s.Admit(audit.WithAction(context.Background(), a), "node-3")
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.FailedPrecondition || e.Details["failedChecks"] == nil {
		t.Fatalf("err %v", err)
	}
	if report == nil || report.Verdict != Blocked || len(mem.updates) != 0 {
		t.Fatalf("report %+v updates %d", report, len(mem.updates))
	}
	if a.Event(audit.Failed, "").Details["checks"] == nil {
		t.Fatal("the refused admission's check results are not in its audit event")
	}
}

func TestAdmitTwiceIsRefused(t *testing.T) {
	f := healthy()
	delete(f.members[1].Config, "scheduler.instance")
	f.members[1].Config[lifecycle.AdmissionKey] = lifecycle.AdmissionMark(7, "r")
	s, mem, st := admitService(f)
	st.open = &lifecycle.Admission{ID: 7}
	if _, err := s.Admit(context.Background(), "node-3"); !apperr.Is(err, apperr.FailedPrecondition) || len(mem.updates) != 0 {
		t.Fatalf("err %v, %d updates", err, len(mem.updates))
	}
	// A member that joined without the hold and was never admitted can be admitted: the
	// admission is recorded and the member marked; there is no hold to release.
	delete(f.members[1].Config, lifecycle.AdmissionKey)
	st.open = nil
	if _, err := s.Admit(context.Background(), "node-3"); err != nil || len(mem.updates) != 1 || len(st.recorded) != 1 {
		t.Fatalf("unheld admit: %v, %d updates, %d recorded", err, len(mem.updates), len(st.recorded))
	}
	if u := mem.updates[0]; lifecycle.MarkedAdmission(u.Config[lifecycle.AdmissionKey]) != st.open.ID {
		t.Fatalf("config sent %v, admission %d", u.Config, st.open.ID)
	}
}

func TestAdmitUnknownNames(t *testing.T) {
	s, _, _ := admitService(healthy())
	if _, err := s.Admit(context.Background(), "Bad Name"); !apperr.Is(err, apperr.InvalidInput) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := s.Admit(context.Background(), "node-9"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("unknown member: %v", err)
	}
}

func TestAdmitRefusalSaysWhatDifferedFromTheProfile(t *testing.T) {
	f := healthy()
	f.hw.MemoryMiB = 65536
	s, mem, _ := admitService(f)
	p, _ := hardware.Declaration{Name: "big", Architecture: "x86_64", MinMemoryMiB: 131072}.Profile()
	s.Checker.Profiles = fakeProfiles{"big": &p}
	s.Store.(*fakeStore).profile = "big"
	a := &audit.Action{Name: "admitMember"}
	_, err := s.Admit(audit.WithAction(context.Background(), a), "node-3")
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.FailedPrecondition || !strings.Contains(e.Message, `profile "big" wants at least 131072 MiB (128 GiB) of memory, Incus reports 65536 MiB (64 GiB) of memory`) ||
		!reflect.DeepEqual(e.Details["failedChecks"], []string{CheckProfileIncus}) || len(mem.updates) != 0 {
		t.Fatalf("err %v details %v", err, e.Details)
	}
}

type carried struct {
	todo []CarriedOver
}

func (c *carried) CarriedOver(context.Context) ([]CarriedOver, error) { return c.todo, nil }

// Only an unheld member that carries no mark is marked; the others are left as they are,
// their admission still flagged.
func TestCarriedOverAdmissionsAreMarked(t *testing.T) {
	for _, c := range []struct {
		name   string
		member string
		config map[string]string
		marks  bool
	}{
		{"unheld member", "node-3", map[string]string{"user.owner": "ops"}, true},
		{"held member", "node-3", map[string]string{"scheduler.instance": "manual"}, false},
		{"marked otherwise", "node-3", map[string]string{lifecycle.AdmissionKey: "by hand"}, false},
		{"member gone", "node-9", nil, false},
	} {
		f := healthy()
		f.members[1].Config = c.config
		s, mem, st := admitService(f)
		st.open = &lifecycle.Admission{ID: 7, CarriedOver: true}
		store := &carried{todo: []CarriedOver{{Machine: c.member, ID: 7, RequestID: "req-old"}}}
		n, err := s.MarkCarriedOver(context.Background(), store, "req-start")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !c.marks {
			if n != 0 || len(mem.updates) != 0 {
				t.Errorf("%s: marked %d, updates %v", c.name, n, mem.updates)
			}
			continue
		}
		if n != 1 || len(mem.updates) != 1 || mem.etags[0] != `"e1"` {
			t.Fatalf("%s: marked %d, updates %v", c.name, n, mem.updates)
		}
		if u := mem.updates[0]; u.Config[lifecycle.AdmissionKey] != lifecycle.AdmissionMark(7, "req-old") || u.Config["user.owner"] != "ops" {
			t.Fatalf("%s: config sent %v", c.name, u.Config)
		}
	}
}

// TestBlockedByIsOneWording: a blocked admission reads the same in admit's refusal,
// apeloractl's report and the console's Admit reason (lib/logic.test.ts holds this case).
func TestBlockedByIsOneWording(t *testing.T) {
	failed := []Check{{Name: "kernel", Title: "Kernel", Result: Fail, Message: "kernel 6.1 is older than 6.12"}}
	if got := BlockedBy(failed); got != "admission blocked by Kernel: kernel 6.1 is older than 6.12" {
		t.Fatalf("BlockedBy: %q", got)
	}
	two := append(failed, Check{Title: "Clock", Result: Fail, Message: "off by 3 s"})
	if got := BlockedBy(two); got != "admission blocked by Kernel: kernel 6.1 is older than 6.12; Clock: off by 3 s" {
		t.Fatalf("BlockedBy, two checks: %q", got)
	}
}

type clusterGuard struct{ asked []int64 }

func (g *clusterGuard) Status(_ context.Context, cluster int64) (placement.Status, error) {
	g.asked = append(g.asked, cluster)
	return placement.Status{State: placement.On}, nil
}

// A machine whose record names the second cluster is checked against that cluster's
// members, versions, pools and guard, and admitted there, its admission naming it; the
// environment's cluster, which has a member of the same name, is not touched.
func TestAdmitInTheRecordsCluster(t *testing.T) {
	env, rack2 := healthy(), healthy()
	env.versions[""] = membership.Version{Incus: "7.0.0", APIExtensions: 500} // another cluster's version would fail the check
	envMembers, rack2Members := &fakeMembers{f: env, etag: `"env"`}, &fakeMembers{f: rack2, etag: `"rack2"`}
	two := listed{{ID: 1, Name: "default", Adopted: true, FromEnvironment: true}, {ID: 2, Name: "rack2", Adopted: true}}
	guard := &clusterGuard{}
	incusOf := clusters.PortsFunc[Incus](func(_ context.Context, id int64) (Incus, error) {
		if id == 2 {
			return rack2, nil
		}
		return env, nil
	})
	membersOf := clusters.PortsFunc[Members](func(_ context.Context, id int64) (Members, error) {
		if id == 2 {
			return rack2Members, nil
		}
		return envMembers, nil
	})
	st := &recordIn{fakeStore: &fakeStore{}, cluster: 2}
	s := &Service{Checker: &Checker{Ports: incusOf, Clusters: two, Guard: guard}, Members: membersOf, Store: st}
	report, err := s.Admit(context.Background(), "node-3")
	if err != nil {
		t.Fatalf("%v %+v", err, report)
	}
	if len(rack2Members.updates) != 1 || len(envMembers.updates) != 0 {
		t.Fatalf("updates in rack2 %d, in the environment's %d", len(rack2Members.updates), len(envMembers.updates))
	}
	if len(st.recorded) != 1 || st.recorded[0].Cluster != 2 {
		t.Fatalf("recorded %+v", st.recorded)
	}
	if len(guard.asked) != 1 || guard.asked[0] != 2 {
		t.Fatalf("guard asked about %v", guard.asked)
	}
}

// recordIn is the store whose records name cluster.
type recordIn struct {
	*fakeStore
	cluster int64
}

func (s *recordIn) Record(ctx context.Context, name string) (*machines.Record, error) {
	r, err := s.fakeStore.Record(ctx, name)
	if r != nil {
		r.Cluster = &s.cluster
	}
	return r, err
}
