package fleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/apperr"
)

type records []machines.Record

func (r records) Record(_ context.Context, name string) (*machines.Record, error) {
	for i := range r {
		if r[i].Name == name {
			return &r[i], nil
		}
	}
	return nil, nil
}
func (r records) Records(context.Context) ([]machines.Record, error) { return r, nil }

type admitted map[string]lifecycle.Admission

func (a admitted) OpenAdmissions(context.Context) (map[string]lifecycle.Admission, error) {
	return a, nil
}

type incus struct {
	snap *membership.Snapshot
	err  error
}

func (i incus) Snapshot(context.Context) (*membership.Snapshot, error) { return i.snap, i.err }

type maas struct {
	ms  []provisioning.MAASMachine
	err error
}

func (m maas) Machines(context.Context) ([]provisioning.MAASMachine, error) { return m.ms, m.err }

func fixture() *Service {
	return &Service{
		Records: records{
			{Name: "node-a", Provisioner: machines.MAAS, MAASSystemID: "aaaa01", HardwareUUID: "uuid-a"},
			{Name: "node-b", Provisioner: machines.MAAS, MAASSystemID: "bbbb02", HardwareUUID: "uuid-b"},
			{Name: "node-c", Provisioner: machines.MAAS, MAASSystemID: "cccc03", HardwareUUID: "uuid-c"},
			{Name: "node-m", Provisioner: machines.Manual},
		},
		Admissions: admitted{"node-a": {ID: 3}},
		Incus: incus{snap: &membership.Snapshot{
			Members: []membership.Member{{Name: "m1"}, {Name: "node-a", Config: map[string]string{lifecycle.AdmissionKey: lifecycle.AdmissionMark(3, "r")}}},
			Pending: []membership.PendingJoin{{Name: "node-m"}},
		}},
		MAAS: maas{ms: []provisioning.MAASMachine{
			{SystemID: "zzzz09", Hostname: "node-a", HardwareUUID: "uuid-z"},
			{SystemID: "aaaa01", Hostname: "renamed-in-maas", HardwareUUID: "uuid-a"},
			{SystemID: "bbbb02", Hostname: "node-b", HardwareUUID: "uuid-other"},
			{SystemID: "dddd04", Hostname: "node-d"},
			{SystemID: "eeee05", Hostname: "node-d"},
		}},
	}
}

func byName(t *testing.T, v *View) map[string]Machine {
	out := map[string]Machine{}
	for _, m := range v.Machines {
		out[m.Name] = m
	}
	return out
}

func codes(ws []lifecycle.Warning) string {
	var out []string
	for _, w := range ws {
		out = append(out, string(w.Code))
	}
	return fmt.Sprint(out)
}

func TestJoin(t *testing.T) {
	v, err := fixture().View(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := byName(t, v)
	// A record meets its MAAS machine by system id, whatever MAAS calls it now.
	if a := got["node-a"]; a.MAAS == nil || a.MAAS.SystemID != "aaaa01" || a.Member == nil || a.Phase != lifecycle.Admitted {
		t.Errorf("node-a: %+v", a)
	}
	if _, ok := got["renamed-in-maas"]; ok {
		t.Error("a MAAS machine joined to its record by system id got a row of its own too")
	}
	if b := got["node-b"]; codes(b.Warnings) != "[HARDWARE_UUID_MISMATCH]" {
		t.Errorf("node-b: %v", codes(b.Warnings))
	}
	if c := got["node-c"]; c.MAAS != nil || codes(c.Warnings) != "[MAAS_MACHINE_MISSING]" {
		t.Errorf("node-c: %+v", c)
	}
	if m := got["node-m"]; m.Phase != lifecycle.AwaitingJoin || m.MAAS != nil {
		t.Errorf("node-m: %+v", m)
	}
	if d := got["node-d"]; d.Phase != lifecycle.Discovered || d.MAAS.SystemID != "dddd04" {
		t.Errorf("node-d: %+v", d)
	}
	if d := got["node-d@eeee05"]; d.MAAS == nil || d.Phase != lifecycle.Discovered {
		t.Errorf("a second MAAS machine with the same hostname was hidden: %+v", got)
	}
	if m := got["m1"]; m.Phase != lifecycle.Unregistered {
		t.Errorf("m1: %+v", m)
	}
	if z := got["node-a@zzzz09"]; z.MAAS == nil || z.Record != nil {
		t.Errorf("a MAAS machine named like another's record took its row: %+v", got["node-a"])
	}
	if len(got) != 8 {
		t.Errorf("%d rows: %v", len(got), got)
	}
	if !v.Incus.Available || !v.MAAS.Available {
		t.Errorf("sources %+v %+v", v.Incus, v.MAAS)
	}
}

func TestUnavailableSourcesAreSaidAndRowsStay(t *testing.T) {
	s := fixture()
	s.MAAS = maas{err: apperr.New(apperr.Unavailable, "MAAS could not be reached")}
	s.Incus = incus{err: errors.New("boom")}
	v, err := s.View(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v.MAAS.Available || v.MAAS.Since.IsZero() || !strings.HasPrefix(v.MAAS.Message, "MAAS not answering (since ") ||
		!strings.HasSuffix(v.MAAS.Message, ": machine state from MAAS is missing (MAAS could not be reached)") || v.Incus.Available || v.Incus.Message == "" {
		t.Fatalf("sources %+v %+v", v.MAAS, v.Incus)
	}
	got := byName(t, v)
	if a := got["node-a"]; a.Phase != lifecycle.Unknown || codes(a.Warnings) != "[INCUS_UNAVAILABLE MAAS_UNAVAILABLE]" {
		t.Errorf("node-a: %v %v", a.Phase, codes(a.Warnings))
	}
	if len(got) != 4 {
		t.Errorf("rows %v", got)
	}
	// Without aaaa01 in MAAS, node-a's record reports it missing, not another machine.
	s = fixture()
	s.MAAS = maas{ms: []provisioning.MAASMachine{{SystemID: "zzzz09", Hostname: "node-a", HardwareUUID: "uuid-z"}}}
	v, _ = s.View(context.Background())
	if a := byName(t, v)["node-a"]; a.MAAS != nil || !strings.Contains(codes(a.Warnings), "MAAS_MACHINE_MISSING") {
		t.Errorf("node-a with its MAAS machine gone: %+v", a)
	}

	s = fixture()
	s.Incus, s.MAAS = nil, nil
	v, err = s.View(context.Background())
	if err != nil || v.Incus.Configured || v.MAAS.Configured {
		t.Fatalf("not configured: %+v %v", v, err)
	}
}

type drifts map[string]drift.Status

func (d drifts) ByMachine(context.Context) (map[string]drift.Status, error) { return d, nil }

func TestDriftIsAWarningOnItsMachine(t *testing.T) {
	s := fixture()
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.Drift = drifts{
		"node-a": {Checked: since, Drift: []drift.State{{Machine: "node-a", Check: "scheduler", Title: "Placement reaches the member", FailingSince: since, RaisedAt: since, Evidence: "scheduler.instance=manual was set"}}},
		// A name with no record (a stale row) shows nowhere.
		"m1": {Checked: since, Drift: []drift.State{{Machine: "m1", Check: "online", Title: "Member online", FailingSince: since, RaisedAt: since, Evidence: "Offline"}}},
	}
	v, err := s.View(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows := byName(t, v)
	a := rows["node-a"]
	var w *lifecycle.Warning
	for i := range a.Warnings {
		if a.Warnings[i].Code == lifecycle.Drift {
			w = &a.Warnings[i]
		}
	}
	if w == nil || w.Check != "scheduler" || len(a.Drift) != 1 || !a.DriftChecked.Equal(since) || !strings.Contains(w.Message, "2026-03-01T12:00:00Z") || !strings.Contains(w.Message, "scheduler.instance=manual") {
		t.Fatalf("node-a: %+v %+v", a.Warnings, a.Drift)
	}
	if m1 := rows["m1"]; len(m1.Drift) != 0 || strings.Contains(codes(m1.Warnings), "DRIFT") {
		t.Fatalf("m1 without a record: %+v", m1)
	}
}

func (r records) RecordBySystemID(_ context.Context, id string) (*machines.Record, error) {
	for i := range r {
		if r[i].MAASSystemID == id {
			return &r[i], nil
		}
	}
	return nil, nil
}

func (i incus) MemberSnapshot(_ context.Context, name string) (*membership.Snapshot, error) {
	if i.err != nil {
		return nil, i.err
	}
	s := &membership.Snapshot{Pending: i.snap.Pending, PendingProblem: i.snap.PendingProblem}
	if m := i.snap.Member(name); m != nil {
		s.Members = []membership.Member{*m}
	}
	return s, nil
}

// oneMAAS answers one machine's reads and counts them; a whole list is a test failure.
type oneMAAS struct {
	maas
	t     *testing.T
	reads *int
}

func (m oneMAAS) Machines(context.Context) ([]provisioning.MAASMachine, error) {
	m.t.Error("the whole MAAS list was read for one machine")
	return m.maas.Machines(context.Background())
}

func (m oneMAAS) Machine(_ context.Context, id string) (provisioning.MAASMachine, error) {
	*m.reads++
	if m.err != nil {
		return provisioning.MAASMachine{}, m.err
	}
	for _, x := range m.ms {
		if x.SystemID == id {
			return x, nil
		}
	}
	return provisioning.MAASMachine{}, apperr.New(apperr.NotFound, "MAAS knows no such machine")
}

func (m oneMAAS) MachinesNamed(_ context.Context, hostname string) ([]provisioning.MAASMachine, error) {
	*m.reads++
	if m.err != nil {
		return nil, m.err
	}
	var out []provisioning.MAASMachine
	for _, x := range m.ms {
		if x.Hostname == hostname {
			out = append(out, x)
		}
	}
	return out, nil
}

// TestOneMachineIsItsRowOfTheView: Machine reads one machine, never the MAAS list, and
// gives the very row the whole view holds, for every row the fixture makes (a record meeting
// its MAAS machine by system id, a hostname taken by a record, a second machine with the
// same hostname, a member with no record, a missing MAAS machine), also with a source down.
func TestOneMachineIsItsRowOfTheView(t *testing.T) {
	for _, down := range []string{"", "maas", "incus"} {
		whole := fixture()
		switch down {
		case "maas":
			whole.MAAS = maas{err: apperr.New(apperr.Unavailable, "MAAS could not be reached")}
		case "incus":
			whole.Incus = incus{err: apperr.New(apperr.Unavailable, "Incus could not be reached")}
		}
		v, err := whole.View(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		reads := 0
		one := fixture()
		one.Incus, one.MAAS = whole.Incus, oneMAAS{maas: whole.MAAS.(maas), t: t, reads: &reads}
		one.One = &One{BySystemID: one.Records.(records), Incus: one.Incus.(incus), MAAS: one.MAAS.(oneMAAS)}
		for _, row := range v.Machines {
			if strings.Contains(row.Name, "@") {
				continue // placed by the whole list, which the test's MAAS refuses
			}
			got, err := one.Machine(context.Background(), row.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !reflect.DeepEqual(*got, row) {
				t.Errorf("%s down: Machine(%s) =\n%+v\nthe view's row:\n%+v", down, row.Name, got, row)
			}
		}
		if got, err := one.Machine(context.Background(), "nobody"); err != nil || got != nil {
			t.Errorf("a name no source knows: %+v, %v", got, err)
		}
		if reads == 0 {
			t.Error("no one-machine MAAS read was made")
		}
		m, err := one.RegisteredFrom(context.Background(), "aaaa01")
		if err != nil || m == nil || m.Name != "node-a" || m.MAAS == nil && down != "maas" {
			t.Errorf("%s down: RegisteredFrom(aaaa01) = %+v, %v", down, m, err)
		}
	}
}

// heldMAAS answers its machine list only once released.
type heldMAAS struct {
	maas
	release chan struct{}
}

func (m heldMAAS) Machines(ctx context.Context) ([]provisioning.MAASMachine, error) {
	<-m.release
	return m.maas.Machines(ctx)
}

// A MAAS slower than the read's patience does not hold the view: it comes with the
// records and Incus, MAAS said not answering since the first read it left unanswered
// (kept by the next read), and the view completes with MAAS's answer when it comes; the
// next read that MAAS answers ends the outage.
func TestASlowMAASDoesNotHoldTheView(t *testing.T) {
	s := fixture()
	held := heldMAAS{maas: s.MAAS.(maas), release: make(chan struct{})}
	s.MAAS, s.MAASPatience = held, 20*time.Millisecond
	ctx := context.Background()
	v, err := s.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.MAAS.Available || v.MAAS.Since.IsZero() || !strings.Contains(v.MAAS.Message, "MAAS not answering") || !v.Incus.Available || v.late == nil {
		t.Fatalf("sources %+v %+v, want MAAS not answering and Incus answering", v.MAAS, v.Incus)
	}
	got := byName(t, v)
	if a := got["node-a"]; a.Phase != lifecycle.Admitted || codes(a.Warnings) != "[MAAS_UNAVAILABLE]" || a.MAAS != nil {
		t.Errorf("node-a without MAAS: %v %v", a.Phase, codes(a.Warnings))
	}
	if _, ok := got["node-d"]; ok {
		t.Error("a machine only MAAS reports is shown before MAAS answered")
	}
	again, err := s.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !again.MAAS.Since.Equal(v.MAAS.Since) {
		t.Errorf("the second unanswered read says since %v, want the first's %v", again.MAAS.Since, v.MAAS.Since)
	}
	close(held.release)
	done, ok := v.late(ctx)
	if !ok || !done.MAAS.Available || !done.MAAS.Since.IsZero() {
		t.Fatalf("completed: %v %+v, want MAAS answering", ok, done)
	}
	if d := byName(t, done)["node-d"]; d.MAAS == nil {
		t.Error("the completed view lacks MAAS's machines")
	}
	if a := byName(t, v)["node-a"]; a.MAAS != nil {
		t.Error("completing a view changed the earlier one's rows")
	}
	after, _ := s.View(ctx)
	if !after.MAAS.Available || !after.MAAS.Since.IsZero() || after.late != nil {
		t.Errorf("MAAS answering again: %+v", after.MAAS)
	}
}

// The stream publishes the completion of a read MAAS answered late, with no trigger and
// no interval to bring it.
func TestWatcherFillsMAASInWhenItAnswers(t *testing.T) {
	s := fixture()
	held := heldMAAS{maas: s.MAAS.(maas), release: make(chan struct{})}
	s.MAAS, s.MAASPatience = held, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatcher(ctx, s, WatcherOptions{Interval: time.Hour})
	ch := follow(ctx, w)
	first := next(t, ch)
	if first.Sources.MAAS.Available {
		t.Fatalf("snapshot %+v, want MAAS not answering", first.Sources.MAAS)
	}
	close(held.release)
	u := next(t, ch)
	if u.Revision != first.Revision+1 || u.Sources == nil || !u.Sources.MAAS.Available || !slices.Contains(names(u.Added), "node-d") {
		t.Fatalf("after MAAS answered: %+v, want MAAS's side filled in", u)
	}
	if w.Refreshes() != 1 {
		t.Errorf("%d fleet reads, want 1: the late answer completes the read, it does not read again", w.Refreshes())
	}
}
