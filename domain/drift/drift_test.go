package drift

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/membership"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func member(status string, config map[string]string, roles ...string) *membership.Member {
	return &membership.Member{Name: "node-4", Status: membership.Status(status), Config: config, Roles: roles}
}

// report is an admission report with every check passing but those given.
func report(results map[string]admission.Check) *admission.Report {
	r := &admission.Report{Machine: "node-4"}
	for _, name := range []string{admission.CheckOnline, admission.CheckIncusVersion, admission.CheckKernel, admission.CheckStoragePools,
		admission.CheckNetworks, admission.CheckArchitecture, admission.CheckHardwareTests, admission.CheckProfileMAAS,
		admission.CheckProfileIncus, admission.CheckOVNChassis, admission.CheckClock} {
		c, ok := results[name]
		if !ok {
			c = admission.Check{Result: admission.Pass, Message: name + " is fine"}
		}
		c.Name, c.Title = name, "title of "+name
		r.Checks = append(r.Checks, c)
	}
	return r
}

func outcomes(fs []Finding) map[string]Outcome {
	out := map[string]Outcome{}
	for _, f := range fs {
		out[f.Check] = f.Outcome
	}
	return out
}

func finding(fs []Finding, check string) Finding {
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	return Finding{}
}

var admitted = Admission{Machine: "node-4", RolesKnown: true, Roles: []string{"database-standby", "event-hub"}}

func TestAssessAHealthyMemberPassesEverything(t *testing.T) {
	nc := report(map[string]admission.Check{
		admission.CheckArchitecture:  {Result: admission.Warn, Message: "first aarch64"},
		admission.CheckHardwareTests: {Result: admission.Skipped, Message: "not a MAAS machine"},
		admission.CheckOVNChassis:    {Result: admission.NotChecked},
	})
	// Raft moved the member from stand-by to voter, and it gained a role: neither is drift.
	fs := Assess(nc, member("Online", nil, "database", "event-hub", "ovn-chassis"), admitted)
	for check, o := range outcomes(fs) {
		if o != Passing {
			t.Errorf("%s: %v (%s)", check, o, finding(fs, check).Evidence)
		}
	}
	if len(fs) != 14 {
		t.Fatalf("%d findings: the 11 admission checks and membership, scheduler, roles", len(fs))
	}
	if f := finding(fs, CheckScheduler); !strings.Contains(f.Evidence, "unset") {
		t.Fatal(f.Evidence)
	}
	if o := outcomes(Assess(nc, member("Online", map[string]string{"scheduler.instance": "all"}), admitted))[CheckScheduler]; o != Passing {
		t.Fatal("scheduler.instance=all is the default placement")
	}
}

func TestAssessSchedulerSetBackAndRolesDropped(t *testing.T) {
	m := member("Online", map[string]string{"scheduler.instance": "manual"}, "database")
	fs := Assess(report(nil), m, admitted)
	s, r := finding(fs, CheckScheduler), finding(fs, CheckRoles)
	if s.Outcome != Failing || !strings.Contains(s.Evidence, "scheduler.instance=manual") || !strings.Contains(s.Evidence, "incus cluster unset node-4 scheduler.instance") {
		t.Fatalf("scheduler: %+v", s)
	}
	if r.Outcome != Failing || !strings.Contains(r.Evidence, "roles dropped since admission: event-hub") ||
		!strings.Contains(r.Evidence, "incus cluster role add node-4 event-hub") || strings.Contains(r.Evidence, "database") {
		t.Fatalf("roles: %+v", r)
	}
	m.Config["scheduler.instance"] = "group"
	if f := finding(Assess(report(nil), m, admitted), CheckScheduler); f.Outcome != Failing || !strings.Contains(f.Evidence, "groups") {
		t.Fatalf("group: %+v", f)
	}
	m.Config["scheduler.instance"] = "weird\x00"
	if f := finding(Assess(report(nil), m, admitted), CheckScheduler); f.Outcome != Failing || strings.Contains(f.Evidence, "\x00") {
		t.Fatalf("unknown value: %+v", f)
	}
	// An admission recorded before roles were: nothing to compare with.
	if f := finding(Assess(report(nil), m, Admission{Machine: "node-4"}), CheckRoles); f.Outcome != Unknown {
		t.Fatalf("no recorded roles: %+v", f)
	}
	if f := finding(Assess(report(nil), m, Admission{Machine: "node-4", RolesKnown: true, Roles: []string{"database-leader"}}), CheckRoles); f.Outcome != Passing {
		t.Fatalf("only raft roles at admission: %+v", f)
	}
}

func TestAssessAnOfflineMemberIsOnlyOffline(t *testing.T) {
	// Offline: what the member would be asked cannot be read, and says nothing.
	nc := report(map[string]admission.Check{
		admission.CheckOnline:        {Result: admission.Fail, Message: "Incus reports the member Offline (No heartbeat for 25s)"},
		admission.CheckIncusVersion:  {Result: admission.Fail, Message: "Incus refused to read the versions"},
		admission.CheckStoragePools:  {Result: admission.Fail, Message: "local (Unknown)"},
		admission.CheckHardwareTests: {Result: admission.Fail, Message: "MAAS hardware tests are failed"},
		admission.CheckKernel:        {Result: admission.Fail, Message: "could not ask", Inconclusive: true},
	})
	o := outcomes(Assess(nc, member("Offline", nil, "event-hub"), admitted))
	want := map[string]Outcome{admission.CheckOnline: Failing, admission.CheckIncusVersion: Unknown, admission.CheckStoragePools: Unknown,
		admission.CheckKernel: Unknown, admission.CheckHardwareTests: Failing, CheckMembership: Passing, CheckScheduler: Passing, CheckRoles: Passing}
	for check, w := range want {
		if o[check] != w {
			t.Errorf("%s: %v, want %v", check, o[check], w)
		}
	}
	// Online, a failed read is still no evidence; a conclusive failure is.
	o = outcomes(Assess(nc, member("Online", nil, "event-hub"), admitted))
	if o[admission.CheckKernel] != Unknown || o[admission.CheckIncusVersion] != Failing || o[admission.CheckStoragePools] != Failing {
		t.Errorf("online: %v", o)
	}
	// Gone from the cluster: only membership is known.
	fs := Assess(nil, nil, admitted)
	if len(fs) != 1 || fs[0].Check != CheckMembership || fs[0].Outcome != Failing || !strings.Contains(fs[0].Evidence, "outside Apelora") {
		t.Fatalf("gone: %+v", fs)
	}
}

func TestApplyRaisesOfflineOnlyPastTheThreshold(t *testing.T) {
	l := Limits{OfflineAfter: 2 * time.Minute}
	offline := []Finding{{Check: admission.CheckOnline, Title: "Member online", Outcome: Failing, Evidence: "No heartbeat for 25s"}}
	online := []Finding{{Check: admission.CheckOnline, Title: "Member online", Outcome: Passing, Evidence: "Fully operational"}}

	s, ev := Apply("node-4", nil, offline, t0, l)
	if len(ev) != 0 || len(s) != 1 || s[0].Raised() || !s[0].FailingSince.Equal(t0) {
		t.Fatalf("first miss: %+v %+v", s, ev)
	}
	s, ev = Apply("node-4", s, offline, t0.Add(time.Minute), l)
	if len(ev) != 0 || s[0].Raised() || !s[0].LastChecked.Equal(t0.Add(time.Minute)) {
		t.Fatalf("under the threshold: %+v %+v", s, ev)
	}
	// Back before the threshold: never drift, nothing recorded.
	if s2, ev := Apply("node-4", s, online, t0.Add(90*time.Second), l); len(s2) != 0 || len(ev) != 0 {
		t.Fatalf("back in time: %+v %+v", s2, ev)
	}
	offline[0].Evidence = "No heartbeat for 2m25s"
	s, ev = Apply("node-4", s, offline, t0.Add(2*time.Minute), l)
	if len(ev) != 1 || ev[0].Change != Raised || !ev[0].Since.Equal(t0) || !ev[0].At.Equal(t0.Add(2*time.Minute)) ||
		ev[0].Evidence != "No heartbeat for 2m25s" || !s[0].Raised() {
		t.Fatalf("past the threshold: %+v %+v", s, ev)
	}
	// Still offline: the evidence follows, nothing new is recorded.
	offline[0].Evidence = "No heartbeat for 3m25s"
	s, ev = Apply("node-4", s, offline, t0.Add(3*time.Minute), l)
	if len(ev) != 0 || s[0].Evidence != "No heartbeat for 3m25s" || !s[0].RaisedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("still offline: %+v %+v", s, ev)
	}
	s, ev = Apply("node-4", s, online, t0.Add(4*time.Minute), l)
	if len(s) != 0 || len(ev) != 1 || ev[0].Change != Cleared || !ev[0].Since.Equal(t0) || ev[0].Evidence != "Fully operational" {
		t.Fatalf("back: %+v %+v", s, ev)
	}
}

func TestApplyRaisesConfigurationAtOnceAndKeepsWhatItCannotSee(t *testing.T) {
	l := Limits{OfflineAfter: time.Hour}
	fs := []Finding{
		{Check: CheckScheduler, Title: "Placement", Outcome: Failing, Evidence: "manual"},
		{Check: admission.CheckStoragePools, Title: "Pools", Outcome: Failing, Evidence: "fast (Pending)"},
	}
	s, ev := Apply("node-4", nil, fs, t0, l)
	if len(ev) != 2 || len(s) != 2 || !s[0].Raised() || !s[1].Raised() || s[0].Check != CheckScheduler && s[0].Check != admission.CheckStoragePools {
		t.Fatalf("%+v %+v", s, ev)
	}
	// The member cannot be asked: its pools stay as they were; scheduler passes again.
	next, ev := Apply("node-4", s, []Finding{
		{Check: CheckScheduler, Outcome: Passing, Evidence: "unset"},
		{Check: admission.CheckStoragePools, Outcome: Unknown, Evidence: "could not ask"},
	}, t0.Add(time.Minute), l)
	if len(ev) != 1 || ev[0].Check != CheckScheduler || ev[0].Change != Cleared {
		t.Fatalf("events %+v", ev)
	}
	if len(next) != 1 || next[0].Check != admission.CheckStoragePools || next[0].Evidence != "fast (Pending)" || !next[0].LastChecked.Equal(t0) {
		t.Fatalf("kept %+v", next)
	}
	// A check not looked at (the member is gone) is kept too.
	next, ev = Apply("node-4", next, []Finding{{Check: CheckMembership, Outcome: Failing, Evidence: "gone"}}, t0.Add(2*time.Minute), l)
	if len(ev) != 0 || len(next) != 2 {
		t.Fatalf("member gone: %+v %+v", next, ev)
	}
	// Forgotten (no longer admitted): what was raised clears, what was not goes quietly.
	ev = Forget(next, t0.Add(3*time.Minute), "no longer admitted")
	if len(ev) != 1 || ev[0].Check != admission.CheckStoragePools || ev[0].Change != Cleared || ev[0].Evidence != "no longer admitted" {
		t.Fatalf("forget: %+v", ev)
	}
}

// Whatever a machine does, each check's events alternate RAISED, CLEARED …, a raise comes
// only after the threshold of failing, and the states say exactly what is raised.
func TestApplyHistoryIsConsistent(t *testing.T) {
	l := Limits{OfflineAfter: 3 * time.Minute}
	rnd := rand.New(rand.NewPCG(1, 2))
	checks := []string{admission.CheckOnline, CheckScheduler, admission.CheckKernel}
	var states []State
	lastChange := map[string]Change{}
	raisedSince := map[string]time.Time{}
	now := t0
	for i := 0; i < 5000; i++ {
		now = now.Add(time.Duration(1+rnd.IntN(90)) * time.Second)
		var fs []Finding
		for _, c := range checks {
			if rnd.IntN(4) == 0 {
				continue // not looked at
			}
			fs = append(fs, Finding{Check: c, Outcome: Outcome(rnd.IntN(3)), Evidence: "e"})
		}
		next, events := Apply("node-4", states, fs, now, l)
		for _, e := range events {
			prev := lastChange[e.Check]
			if e.Change == prev || (prev == "" && e.Change == Cleared) {
				t.Fatalf("step %d: %s %s after %s", i, e.Check, e.Change, prev)
			}
			if e.Change == Raised && now.Sub(e.Since) < l.threshold(e.Check) {
				t.Fatalf("step %d: %s raised after %s", i, e.Check, now.Sub(e.Since))
			}
			if e.Change == Cleared && !e.Since.Equal(raisedSince[e.Check]) {
				t.Fatalf("step %d: cleared with since %s, raised with %s", i, e.Since, raisedSince[e.Check])
			}
			lastChange[e.Check] = e.Change
			raisedSince[e.Check] = e.Since
		}
		for _, c := range checks {
			raised := false
			for _, s := range next {
				if s.Check == c && s.Raised() {
					raised = true
				}
			}
			if raised != (lastChange[c] == Raised) {
				t.Fatalf("step %d: %s state raised=%v, last event %s", i, c, raised, lastChange[c])
			}
		}
		states = next
	}
}

func TestEvidenceIsStorableAndBounded(t *testing.T) {
	for _, in := range []string{"plain", "nul\x00inside", "bad \xff\xfe utf-8", strings.Repeat("é", 4000), strings.Repeat("x", maxEvidence+1)} {
		got := clean(in)
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > maxEvidence {
			t.Errorf("clean(%.20q) = %.40q (%d bytes)", in, got, len(got))
		}
	}
	if clean("plain") != "plain" {
		t.Error("a plain message must be kept as it is")
	}
	s, _ := Apply("node-4", nil, []Finding{{Check: CheckScheduler, Outcome: Failing, Evidence: strings.Repeat("\x00", 5000)}}, t0, Limits{})
	if len(s[0].Evidence) > maxEvidence || strings.ContainsRune(s[0].Evidence, 0) {
		t.Fatalf("stored evidence %d bytes", len(s[0].Evidence))
	}
}

// A member in maintenance (evacuated) that goes down: its offline check is suspended and
// says why, whether Incus still lists it Evacuated or, once it stops answering, Offline.
func TestAssessSuspendsTheOfflineCheckInMaintenance(t *testing.T) {
	offline := report(map[string]admission.Check{
		admission.CheckOnline:       {Result: admission.Fail, Message: "Incus reports the member Offline (No heartbeat for 25s)"},
		admission.CheckIncusVersion: {Result: admission.Fail, Message: "Incus refused to read the versions"},
	})
	inMaintenance := admitted
	inMaintenance.Maintenance = true
	fs := Assess(offline, member("Offline", nil, "event-hub"), inMaintenance)
	f := finding(fs, admission.CheckOnline)
	if f.Outcome != Unknown || !strings.Contains(f.Evidence, "maintenance") || !strings.Contains(f.Evidence, "restoreMember") {
		t.Fatalf("offline check of a member in maintenance: %+v", f)
	}
	if o := outcomes(fs); o[admission.CheckIncusVersion] != Unknown || o[CheckScheduler] != Passing {
		t.Errorf("in maintenance: %v", o)
	}
	// Not in maintenance, the same look is drift.
	if o := outcomes(Assess(offline, member("Offline", nil, "event-hub"), admitted)); o[admission.CheckOnline] != Failing {
		t.Errorf("offline, not in maintenance: %v", o)
	}
	// Evacuated and answering: the checks run as usual (online passes for it).
	if o := outcomes(Assess(report(nil), member("Evacuated", nil, "event-hub"), admitted)); o[admission.CheckOnline] != Passing || o[admission.CheckKernel] != Passing {
		t.Errorf("evacuated and answering: %v", o)
	}
	// Evacuated and hung: Incus still lists it Evacuated; what it cannot answer is suspended.
	hung := report(map[string]admission.Check{admission.CheckKernel: {Result: admission.Fail, Message: "Incus did not answer"}})
	if f := finding(Assess(hung, member("Evacuated", nil, "event-hub"), admitted), admission.CheckKernel); f.Outcome != Unknown || !strings.Contains(f.Evidence, "maintenance") {
		t.Errorf("evacuated and hung: %+v", f)
	}
}

// Drift says why it is quiet: the checks suspended for a member in maintenance are named,
// with the reason; none suspended, nothing said.
func TestQuietSaysWhy(t *testing.T) {
	offline := report(map[string]admission.Check{
		admission.CheckOnline: {Result: admission.Fail, Message: "Incus reports the member Offline"},
		admission.CheckKernel: {Result: admission.Fail, Message: "could not ask the member", Inconclusive: true},
	})
	inMaintenance := admitted
	inMaintenance.Maintenance = true
	q := Quiet("node-4", Assess(offline, member("Offline", nil, "event-hub"), inMaintenance))
	if !strings.HasPrefix(q, "drift is quiet for node-4: node-4 is in maintenance") || !strings.Contains(q, "restoreMember") ||
		!strings.Contains(q, "suspended: "+admission.CheckOnline) || !strings.Contains(q, admission.CheckKernel) {
		t.Fatalf("quiet: %q", q)
	}
	if q := Quiet("event-hub", Assess(offline, member("Offline", nil, "event-hub"), admitted)); q != "" {
		t.Fatalf("not in maintenance, quiet says %q", q)
	}
}
