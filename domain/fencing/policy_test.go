package fencing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/membership"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

var testLimits = Limits{OfflineAfter: 30 * time.Second, Cooldown: 10 * time.Minute, ConfirmTimeout: time.Minute, MaxObservationGap: time.Minute}

func mapping(member string) Mapping {
	return Mapping{Member: member, SystemID: "sys" + member, HardwareUUID: fmt.Sprintf("00000000-0000-4000-8000-%012x", member)}
}

func decideOne(t *testing.T, s Snapshot, member string) Decision {
	t.Helper()
	for _, d := range Decide(s) {
		if d.Member == member {
			return d
		}
	}
	return Decision{Member: member, Action: ActNone}
}

func TestDecideAppliesEachLimit(t *testing.T) {
	offline := func(name string, for_ time.Duration) Member {
		return Member{Name: name, Offline: true, OfflineSince: t0.Add(-for_)}
	}
	online := func(name string) Member { return Member{Name: name} }
	seenOnline := func(m Member, ago time.Duration) Member { m.LastSeenOnline = t0.Add(-ago); return m }
	voter := func(m Member) Member { m.Roles = []string{"database"}; return m }
	maps := map[string]Mapping{"m1": mapping("m1"), "m2": mapping("m2"), "m3": mapping("m3"), "m4": mapping("m4")}
	cases := []struct {
		name     string
		members  []Member
		mappings map[string]Mapping
		requests map[string]Request
		action   Action
		reason   Reason
	}{
		{"online member: nothing", []Member{online("m1"), online("m2"), online("m3")}, maps, nil, ActNone, ""},
		{"offline, not long enough: wait", []Member{online("m1"), online("m2"), offline("m3", 29*time.Second)}, maps, nil, ActWait, ""},
		{"offline long enough, mapped, 1 of 3: fence", []Member{online("m1"), online("m2"), offline("m3", 30*time.Second)}, maps, nil, ActFence, ""},
		{"no mapping: refused", []Member{online("m1"), online("m2"), offline("m3", time.Hour)}, map[string]Mapping{}, nil, ActRefuse, ReasonNotMapped},
		{"2 of 4 offline: refused", []Member{online("m1"), online("m2"), offline("m3", time.Hour), offline("m4", time.Second)}, maps, nil, ActRefuse, ReasonTooManyOffline},
		{"1 of 2 offline: refused", []Member{online("m1"), offline("m3", time.Hour)}, maps, nil, ActRefuse, ReasonTooManyOffline},
		{"1 offline + 1 unconfirmed request of 4: refused", []Member{online("m1"), online("m2"), offline("m3", time.Hour), online("m4")}, maps,
			map[string]Request{"m4": {At: t0.Add(-time.Second), SystemID: "sysm4"}}, ActRefuse, ReasonTooManyOffline},
		{"1 offline + 1 confirmed request of 4: fence", []Member{online("m1"), online("m2"), offline("m3", time.Hour), online("m4")}, maps,
			map[string]Request{"m4": {At: t0.Add(-time.Hour), SystemID: "sysm4", Outcome: KindConfirmed}}, ActFence, ""},
		{"requested within cooldown (not confirmed): refused", []Member{online("m1"), online("m2"), offline("m3", time.Hour)}, maps,
			map[string]Request{"m3": {At: t0.Add(-9 * time.Minute), Outcome: KindNotConfirmed}}, ActRefuse, ReasonCooldown},
		{"requested just outside cooldown: fence", []Member{online("m1"), online("m2"), offline("m3", time.Hour)}, maps,
			map[string]Request{"m3": {At: t0.Add(-10 * time.Minute), Outcome: KindNotConfirmed}}, ActFence, ""},
		{"confirmed in this outage: done", []Member{online("m1"), online("m2"), offline("m3", time.Hour)}, maps,
			map[string]Request{"m3": {At: t0.Add(-30 * time.Minute), Outcome: KindConfirmed}}, ActFenced, ""},
		{"confirmed in an earlier outage, seen online since, inside cooldown: refused", []Member{online("m1"), online("m2"), seenOnline(offline("m3", time.Minute), 90*time.Second)}, maps,
			map[string]Request{"m3": {At: t0.Add(-2 * time.Minute), Outcome: KindConfirmed}}, ActRefuse, ReasonCooldown},
		{"confirmed, outage clock restarted since (Incus unread), cooldown over, never seen online: still fenced", []Member{online("m1"), online("m2"), seenOnline(offline("m3", time.Minute), time.Hour)}, maps,
			map[string]Request{"m3": {At: t0.Add(-30 * time.Minute), Outcome: KindConfirmed}}, ActFenced, ""},
		{"confirmed, seen online since, cooldown over: fence again", []Member{online("m1"), online("m2"), seenOnline(offline("m3", time.Minute), 2*time.Minute)}, maps,
			map[string]Request{"m3": {At: t0.Add(-30 * time.Minute), Outcome: KindConfirmed}}, ActFence, ""},
		{"3 voters of 5, two voters offline (fewer than half the members): quorum refuses", []Member{voter(online("m1")), voter(offline("m2", time.Hour)), online("m4"), online("m5"), voter(offline("m3", time.Hour))},
			maps, nil, ActRefuse, ReasonQuorum},
		{"3 voters of 5, one offline: that voter may be fenced", []Member{voter(online("m1")), voter(online("m2")), online("m4"), online("m5"), voter(offline("m3", time.Hour))},
			maps, nil, ActFence, ""},
		{"the only database member: quorum refuses", []Member{online("m1"), online("m2"), online("m4"), voter(offline("m3", time.Hour))},
			maps, nil, ActRefuse, ReasonQuorum},
		{"pending request: confirm, even when back online", []Member{online("m1"), online("m2"), online("m3")}, maps,
			map[string]Request{"m3": {At: t0.Add(-time.Second)}}, ActConfirm, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decideOne(t, Snapshot{Now: t0, Limits: testLimits, Members: c.members, MembersKnown: true, Mappings: c.mappings, Requests: c.requests}, "m3")
			if d.Action != c.action || d.Reason != c.reason {
				t.Fatalf("decision %s/%s (%s), want %s/%s", d.Action, d.Reason, d.Message, c.action, c.reason)
			}
			if d.Action != ActNone && d.Message == "" {
				t.Fatal("a decision without a message")
			}
		})
	}
}

func TestDecideWithMembersUnknownOnlyConfirms(t *testing.T) {
	s := Snapshot{Now: t0, Limits: testLimits, MembersKnown: false,
		Members:  []Member{{Name: "m1"}, {Name: "m2"}, {Name: "m3", Offline: true, OfflineSince: t0.Add(-time.Hour)}, {Name: "m4", Offline: true, OfflineSince: t0.Add(-time.Hour)}},
		Mappings: map[string]Mapping{"m3": mapping("m3"), "m4": mapping("m4")},
		Requests: map[string]Request{"m4": {At: t0.Add(-time.Second)}}}
	ds := Decide(s)
	if len(ds) != 1 || ds[0].Member != "m4" || ds[0].Action != ActConfirm {
		t.Fatalf("decisions %+v", ds)
	}
}

func TestTrackRecordsOutagesAndNeverInventsOne(t *testing.T) {
	gap := time.Minute
	prev := map[string]Tracking{}
	apply := func(at time.Time, obs ...Observation) []Event {
		next, gone, evs := Track(prev, obs, at, gap, Trust{})
		for _, g := range gone {
			delete(prev, g)
		}
		for _, n := range next {
			prev[n.Member] = n
		}
		return evs
	}
	on, off := func(n string) Observation { return Observation{Name: n, Status: "Online"} }, func(n string) Observation { return Observation{Name: n, Status: "Offline"} }

	if evs := apply(t0, on("m1"), on("m2")); len(evs) != 0 {
		t.Fatalf("online members made events %+v", evs)
	}
	evs := apply(t0.Add(10*time.Second), on("m1"), off("m2"))
	if len(evs) != 1 || evs[0].Kind != KindOffline || evs[0].Member != "m2" || !prev["m2"].FirstSeenOffline.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("first offline: %+v %+v", evs, prev["m2"])
	}
	// Seen offline again: the outage keeps its start (a restart that reads the records back
	// does the same).
	if evs := apply(t0.Add(50*time.Second), on("m1"), off("m2")); len(evs) != 0 || !prev["m2"].FirstSeenOffline.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("continued outage: %+v %+v", evs, prev["m2"])
	}
	// Nobody looked for longer than the gap: the clock starts again.
	evs = apply(t0.Add(50*time.Second+gap+time.Second), on("m1"), off("m2"))
	if len(evs) != 1 || evs[0].Kind != KindOffline || !prev["m2"].FirstSeenOffline.Equal(t0.Add(50*time.Second+gap+time.Second)) {
		t.Fatalf("after a gap: %+v %+v", evs, prev["m2"])
	}
	// Back online: the outage ends.
	evs = apply(t0.Add(3*time.Minute), on("m1"), on("m2"))
	if len(evs) != 1 || evs[0].Kind != KindBackOnline || !prev["m2"].FirstSeenOffline.IsZero() || !prev["m2"].LastSeenOnline.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("back online: %+v %+v", evs, prev["m2"])
	}
	// A member no longer listed is forgotten.
	_, gone, _ := Track(prev, []Observation{on("m1")}, t0.Add(4*time.Minute), gap, Trust{})
	if !slices.Equal(gone, []string{"m2"}) {
		t.Fatalf("gone %v", gone)
	}
}

// After Incus could not be read, its Offline does not count until it has answered for the
// settle period (it lists live members Offline while it regains quorum), and an outage
// seen before starts again from the first read that counts.
func TestTrackBelievesOfflineOnlyAfterSettling(t *testing.T) {
	gap := time.Minute
	prev := map[string]Tracking{}
	apply := func(at time.Time, trust Trust, obs ...Observation) []Event {
		next, _, evs := Track(prev, obs, at, gap, trust)
		for _, n := range next {
			prev[n.Member] = n
		}
		return evs
	}
	on, off := func(n string) Observation { return Observation{Name: n, Status: "Online"} }, func(n string) Observation { return Observation{Name: n, Status: "Offline"} }
	apply(t0, Trust{}, on("m1"), off("m2"), on("m3"))
	// Incus fails at t0+10s (no Track), answers again at t0+30s; settle 20s.
	trust := Trust{AnsweringSince: t0.Add(30 * time.Second), Settle: 20 * time.Second}
	if evs := apply(t0.Add(30*time.Second), trust, off("m1"), off("m2"), off("m3")); len(evs) != 0 {
		t.Fatalf("everyone Offline right after Incus answered again made events %+v", evs)
	}
	if !prev["m1"].FirstSeenOffline.IsZero() || !prev["m3"].FirstSeenOffline.IsZero() || !prev["m2"].FirstSeenOffline.Equal(t0) {
		t.Fatalf("while settling: %+v", prev)
	}
	// A live member is believed at once.
	if evs := apply(t0.Add(40*time.Second), trust, on("m1"), off("m2"), on("m3")); len(evs) != 0 || !prev["m1"].LastSeenOnline.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("online while settling: %+v %+v", evs, prev["m1"])
	}
	// Settled: m2's outage clock starts again now, once.
	evs := apply(t0.Add(50*time.Second), trust, on("m1"), off("m2"), on("m3"))
	if len(evs) != 1 || evs[0].Kind != KindOffline || evs[0].Member != "m2" || !prev["m2"].FirstSeenOffline.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("first settled read: %+v %+v", evs, prev["m2"])
	}
	if evs := apply(t0.Add(55*time.Second), trust, on("m1"), off("m2"), off("m3")); len(evs) != 1 || evs[0].Member != "m3" || !prev["m2"].FirstSeenOffline.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("later settled read: %+v %+v", evs, prev)
	}
	if !(Trust{}).Settled(t0) || trust.Settled(t0.Add(49*time.Second)) || !trust.Settled(t0.Add(50*time.Second)) {
		t.Fatal("Settled")
	}
}

// TestPropertyDecideStaysWithinLimits checks Decide alone over many random snapshots: every
// FENCE is mapped, offline long enough, with fewer than half counted offline, and outside
// the cooldown; every pending request is confirmed, never fenced again.
func TestPropertyDecideStaysWithinLimits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fences := 0
	for i := range 20000 {
		n := 1 + r.IntN(8)
		s := Snapshot{Now: t0, Limits: testLimits, MembersKnown: true, Mappings: map[string]Mapping{}, Requests: map[string]Request{}}
		for j := range n {
			name := "m" + string(rune('a'+j))
			m := Member{Name: name}
			if r.IntN(3) == 0 {
				m.Offline, m.OfflineSince = true, t0.Add(-time.Duration(r.IntN(120))*time.Second)
			}
			s.Members = append(s.Members, m)
			if r.IntN(5) > 0 {
				s.Mappings[name] = mapping(name)
			}
			if r.IntN(3) == 0 {
				req := Request{At: t0.Add(-time.Duration(r.IntN(1200)) * time.Second)}
				req.Outcome = []Kind{"", KindConfirmed, KindNotConfirmed}[r.IntN(3)]
				s.Requests[name] = req
			}
		}
		offline, total := CountOffline(&s)
		byName := map[string]Member{}
		for _, m := range s.Members {
			byName[m.Name] = m
		}
		for _, d := range Decide(s) {
			req, hasReq := s.Requests[d.Member]
			if hasReq && req.Pending() && d.Action != ActConfirm {
				t.Fatalf("case %d: %s has a pending request but got %s", i, d.Member, d.Action)
			}
			if d.Action != ActFence {
				continue
			}
			fences++
			m := byName[d.Member]
			switch {
			case !m.Offline:
				t.Fatalf("case %d: fencing %s, which is not offline", i, d.Member)
			case s.Now.Sub(m.OfflineSince) < s.Limits.OfflineAfter:
				t.Fatalf("case %d: fencing %s after %v offline", i, d.Member, s.Now.Sub(m.OfflineSince))
			case offline*2 >= total:
				t.Fatalf("case %d: fencing %s with %d of %d offline", i, d.Member, offline, total)
			case hasReq && s.Now.Sub(req.At) < s.Limits.Cooldown:
				t.Fatalf("case %d: fencing %s %v after the last request", i, d.Member, s.Now.Sub(req.At))
			}
			if _, ok := s.Mappings[d.Member]; !ok {
				t.Fatalf("case %d: fencing unmapped %s", i, d.Member)
			}
		}
	}
	if fences == 0 {
		t.Fatal("no snapshot allowed a fence: the generator is broken")
	}
}

// BenchmarkDecide300 is one decision round for a fleet at the top of the product's scale.
func BenchmarkDecide300(b *testing.B) {
	s := Snapshot{Now: t0, Limits: testLimits, MembersKnown: true, Mappings: map[string]Mapping{}, Requests: map[string]Request{}}
	for i := range 300 {
		name := fmt.Sprintf("m%03d", i)
		m := Member{Name: name}
		if i%20 == 0 {
			m.Offline, m.OfflineSince = true, t0.Add(-time.Hour)
		}
		s.Members = append(s.Members, m)
		s.Mappings[name] = mapping(name)
		if i%50 == 0 {
			s.Requests[name] = Request{At: t0.Add(-2 * time.Hour), Outcome: KindNotConfirmed}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(Decide(s)) != 15 {
			b.Fatal("wrong number of decisions")
		}
	}
}

func TestOfflineTimeMustOutlastIncusThreshold(t *testing.T) {
	for _, c := range []struct {
		cfg          map[string]string
		offlineAfter time.Duration
		ok           bool
	}{
		{nil, 25 * time.Second, true},
		{nil, 24 * time.Second, false},
		{map[string]string{"cluster.offline_threshold": "60"}, time.Minute, false},
		{map[string]string{"cluster.offline_threshold": "60"}, 65 * time.Second, true},
		{map[string]string{"cluster.offline_threshold": "junk"}, 25 * time.Second, true},
	} {
		err := (Limits{OfflineAfter: c.offlineAfter}).CheckOfflineThreshold(OfflineThreshold(c.cfg))
		if (err == nil) != c.ok {
			t.Errorf("threshold %v, offline after %v: %v", c.cfg, c.offlineAfter, err)
		}
	}
}

// An evacuated member is in maintenance: when it stops answering, Incus lists it Offline,
// and the tracking keeps that it was Evacuated before, so it is never powered off.
func TestEvacuatedMemberIsNeverPoweredOff(t *testing.T) {
	obs := func(status string) []Observation {
		return []Observation{{Name: "m1", Status: "Online"}, {Name: "m2", Status: "Online"}, {Name: "m3", Status: membership.Status(status)}}
	}
	prev := map[string]Tracking{}
	step := func(at time.Time, status string) []Tracking {
		next, _, _ := Track(prev, obs(status), at, time.Hour, Trust{})
		prev = map[string]Tracking{}
		for _, tr := range next {
			prev[tr.Member] = tr
		}
		return next
	}
	if _, _, evs := Track(map[string]Tracking{}, obs("Evacuated"), t0.Add(-2*time.Hour), time.Hour, Trust{}); len(evs) != 1 ||
		evs[0].Kind != KindRefused || evs[0].Reason != ReasonMaintenance || evs[0].Member != "m3" {
		t.Fatalf("entering maintenance: %+v, want one REFUSED MAINTENANCE event for m3", evs)
	}
	step(t0.Add(-2*time.Hour), "Evacuated")
	if _, _, evs := Track(prev, obs("Evacuated"), t0.Add(-119*time.Minute), time.Hour, Trust{}); len(evs) != 0 {
		t.Fatalf("still in maintenance: %+v, want no new event", evs)
	}
	next := step(t0.Add(-time.Hour), "Offline")
	if !prev["m3"].Maintenance {
		t.Fatalf("tracking lost the maintenance of an evacuated member once it went offline: %+v", prev["m3"])
	}
	s := Snapshot{Now: t0, Limits: testLimits, MembersKnown: true, Members: Members(next, obs("Offline")),
		Mappings: map[string]Mapping{"m3": mapping("m3")}}
	d := decideOne(t, s, "m3")
	if d.Action != ActRefuse || d.Reason != ReasonMaintenance {
		t.Fatalf("evacuated member offline for an hour: got %s %s (%s), want REFUSE MAINTENANCE", d.Action, d.Reason, d.Message)
	}
	// Restored (listed Online again), then offline: fenced as any other member.
	step(t0.Add(-50*time.Minute), "Online")
	next = step(t0.Add(-40*time.Minute), "Offline")
	s.Members = Members(next, obs("Offline"))
	if d := decideOne(t, s, "m3"); d.Action != ActFence {
		t.Fatalf("restored member offline for 40 minutes: got %s %s (%s), want FENCE", d.Action, d.Reason, d.Message)
	}
}
