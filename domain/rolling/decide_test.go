package rolling

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

var limits = Limits{OnlineTimeout: time.Minute, Settle: 10 * time.Second}

const allReads = ReadTasks | ReadMapping | ReadPower | ReadAnswers

func mappingOf(name string) *fencing.Mapping {
	return &fencing.Mapping{Member: name, SystemID: "sys-" + name, HardwareUUID: fmt.Sprintf("00000000-0000-4000-8000-%012x", name)}
}

// at is a running task of m1, m2, m3 at the member in position, in stage for so long.
func at(position int, stage Stage, stageFor time.Duration) *Task {
	return &Task{ID: 7, Members: []string{"m1", "m2", "m3"}, Position: position, Stage: stage, State: StateRunning,
		StageSince: t0.Add(-stageFor), StageFor: stageFor}
}

// cluster is three voters, each Online but where statuses say otherwise ("m2": Evacuated).
func cluster(statuses map[string]membership.Status) []membership.Member {
	var out []membership.Member
	for _, n := range []string{"m1", "m2", "m3"} {
		s, ok := statuses[n]
		if !ok {
			s = membership.StatusOnline
		}
		out = append(out, member(n, s, quorum.RoleVoter))
	}
	return out
}

// snap is a snapshot with every read made: m2 mapped, Incus listing the statuses given,
// the member answering, MAAS reading power on.
func snap(t *Task, statuses map[string]membership.Status) Snapshot {
	return Snapshot{Task: t, Members: cluster(statuses), Now: t0, Limits: limits, Have: allReads,
		Mapping: mappingOf("m2"), PowerState: "on"}
}

func evac(action string, startedAgo time.Duration, outcome maintenance.Kind, message string) *maintenance.Task {
	t := &maintenance.Task{ID: 3, Machine: "m2", Action: action, IncusOperation: "op-1", StartedAt: t0.Add(-startedAgo), Outcome: outcome, Message: message}
	if outcome != "" {
		t.FinishedAt = t0
	}
	return t
}

var (
	evacuated = map[string]membership.Status{"m2": membership.StatusEvacuated}
	offline   = map[string]membership.Status{"m2": membership.StatusOffline}
	notReady  = apperr.New(apperr.Unavailable, "Incus answered \"Server isn't ready yet\" for member m2")
)

// TestDecideTakesEveryTransition is the rolling reboot's rule, stage by stage: the next
// action, where it moves the task, and why it waits or stops (with the stage's own audit
// event when the stop is the decision's, not a call's).
func TestDecideTakesEveryTransition(t *testing.T) {
	type want struct {
		action   Action
		next     Stage // the stage a call or an advance moves to
		position int
		record   bool   // ActFail: the refusal is the stage's event
		says     string // in Why
	}
	with := func(s Snapshot, f func(*Snapshot)) Snapshot { f(&s); return s }
	cases := []struct {
		name string
		s    Snapshot
		want want
	}{
		// No task, or one that does not run.
		{"no task", Snapshot{Now: t0}, want{action: ActNone, says: "no rolling reboot"}},
		{"paused: nothing happens", with(snap(at(1, StagePowerOff, 0), evacuated), func(s *Snapshot) { s.Task.State = StatePaused }), want{action: ActNone, says: "paused"}},
		{"cancelled", with(snap(at(1, StagePowerOff, 0), evacuated), func(s *Snapshot) { s.Task.State = StateCancelled }), want{action: ActNone, says: "cancelled"}},
		{"failed", with(snap(at(1, StageWaitOnline, 0), evacuated), func(s *Snapshot) { s.Task.State = StateFailed }), want{action: ActNone, says: "failed"}},
		{"every member done: finish", snap(at(3, StageDone, 0), nil), want{action: ActFinish, position: 3, says: "every member"}},
		{"the member left the cluster: stop", with(snap(at(1, StagePowerOn, 0), nil), func(s *Snapshot) { s.Members = s.Members[:1] }),
			want{action: ActFail, position: 1, says: `m2 (stage POWER_ON): "m2" is no longer a member`}},
		{"an unknown stage (a newer worker's): wait", snap(at(1, "REFLASH", 0), evacuated), want{action: ActWait, position: 1, says: "does not know"}},

		// EVACUATE
		{"evacuate: all up, no evacuation yet", snap(at(1, StageEvacuate, 0), nil), want{action: ActEvacuate, position: 1, says: "evacuate it"}},
		{"evacuate: another member evacuated: stop, the refusal is the stage's event", snap(at(1, StageEvacuate, 0), map[string]membership.Status{"m3": membership.StatusEvacuated}),
			want{action: ActFail, position: 1, record: true, says: "m3 (Evacuated)"}},
		{"evacuate: another member offline", snap(at(1, StageEvacuate, 0), map[string]membership.Status{"m1": membership.StatusOffline}),
			want{action: ActFail, position: 1, record: true, says: "m1 (Offline)"}},
		{"evacuate: the member itself offline", snap(at(1, StageEvacuate, 0), offline), want{action: ActFail, position: 1, record: true, says: "is offline"}},
		{"evacuate: two voters, the quorum projection refuses", with(snap(at(1, StageEvacuate, 0), nil), func(s *Snapshot) { s.Members = s.Members[:2] }),
			want{action: ActFail, position: 1, record: true, says: "cannot be rebooted"}},
		{"evacuate: the evacuation runs: wait", with(snap(at(1, StageEvacuate, time.Second), evacuated), func(s *Snapshot) { s.Latest = evac(maintenance.Evacuate, 0, "", "") }),
			want{action: ActWait, position: 1, says: "runs"}},
		{"evacuate: the evacuation failed: stop (its change has the event)", with(snap(at(1, StageEvacuate, time.Second), nil), func(s *Snapshot) {
			s.Latest = evac(maintenance.Evacuate, 0, maintenance.KindFailed, "no room")
		}), want{action: ActFail, position: 1, says: "the evacuation of m2 failed: no room"}},
		{"evacuate: done, Incus lists it Evacuated: on to POWER_OFF", with(snap(at(1, StageEvacuate, time.Second), evacuated), func(s *Snapshot) {
			s.Latest = evac(maintenance.Evacuate, 0, maintenance.KindSucceeded, "")
		}), want{action: ActAdvance, next: StagePowerOff, position: 1, says: "Evacuated"}},
		{"evacuate: evacuated without a task (the reconciler, a new leader): on", snap(at(1, StageEvacuate, time.Second), evacuated),
			want{action: ActAdvance, next: StagePowerOff, position: 1}},
		{"evacuate: ended but not Evacuated: stop", with(snap(at(1, StageEvacuate, time.Second), nil), func(s *Snapshot) {
			s.Latest = evac(maintenance.Evacuate, 0, maintenance.KindUnknown, "")
		}), want{action: ActFail, position: 1, says: "ended (UNKNOWN) but Incus lists it Online"}},
		{"evacuate: an evacuation from before the stage does not count", with(snap(at(1, StageEvacuate, time.Second), nil), func(s *Snapshot) {
			s.Latest = evac(maintenance.Evacuate, time.Hour, maintenance.KindFailed, "old")
		}), want{action: ActEvacuate, position: 1}},
		{"evacuate: a restore is not an evacuation", with(snap(at(1, StageEvacuate, time.Second), nil), func(s *Snapshot) {
			s.Latest = evac(maintenance.Restore, 0, maintenance.KindFailed, "x")
		}), want{action: ActEvacuate, position: 1}},

		// POWER_OFF
		{"power off: mapped", snap(at(1, StagePowerOff, 0), evacuated), want{action: ActPowerOff, next: StageConfirmOff, position: 1, says: "power machine sys-m2 off"}},
		{"power off: no mapping any more: stop", with(snap(at(1, StagePowerOff, 0), evacuated), func(s *Snapshot) { s.Mapping = nil }),
			want{action: ActFail, position: 1, record: true, says: "no fence mapping any more"}},

		// CONFIRM_OFF
		{"confirm off: MAAS reads off and the member is silent", with(snap(at(1, StageConfirmOff, 5*time.Second), evacuated), func(s *Snapshot) {
			s.PowerState, s.Answers = "off", notReady
		}), want{action: ActConfirmOff, next: StagePowerOn, position: 1, says: "no longer answers"}},
		{"confirm off: off and silent past the timeout still confirms", with(snap(at(1, StageConfirmOff, time.Hour), evacuated), func(s *Snapshot) {
			s.PowerState, s.Answers = "off", notReady
		}), want{action: ActConfirmOff, next: StagePowerOn, position: 1}},
		{"confirm off: still on: wait", snap(at(1, StageConfirmOff, 5*time.Second), evacuated), want{action: ActWait, position: 1, says: "not off yet"}},
		{"confirm off: off but it still answers: wait", with(snap(at(1, StageConfirmOff, 5*time.Second), evacuated), func(s *Snapshot) { s.PowerState = "off" }),
			want{action: ActWait, position: 1, says: "still answers"}},
		{"confirm off: MAAS unreadable: wait", with(snap(at(1, StageConfirmOff, 5*time.Second), evacuated), func(s *Snapshot) { s.PowerState, s.PowerErr = "", errors.New("BMC timeout") }),
			want{action: ActWait, position: 1, says: "BMC timeout"}},
		{"confirm off: still on past the timeout: stop", snap(at(1, StageConfirmOff, 61*time.Second), evacuated),
			want{action: ActFail, position: 1, record: true, says: "not seen down within 1m0s of its power-off (APELORA_ROLLING_ONLINE_TIMEOUT): MAAS reads its power on;"}},
		{"confirm off: answering past the timeout: stop", with(snap(at(1, StageConfirmOff, 61*time.Second), evacuated), func(s *Snapshot) { s.PowerState = "off" }),
			want{action: ActFail, position: 1, record: true, says: "power off and it still answers"}},
		{"confirm off: unreadable past the timeout: stop", with(snap(at(1, StageConfirmOff, 61*time.Second), evacuated), func(s *Snapshot) { s.PowerState, s.PowerErr = "", errors.New("BMC timeout") }),
			want{action: ActFail, position: 1, record: true, says: "unreadable (BMC timeout)"}},
		{"confirm off: no mapping any more: stop", with(snap(at(1, StageConfirmOff, 0), evacuated), func(s *Snapshot) { s.Mapping = nil }),
			want{action: ActFail, position: 1, record: true, says: "no fence mapping"}},

		// POWER_ON
		{"power on: mapped", snap(at(1, StagePowerOn, 0), evacuated), want{action: ActPowerOn, next: StageWaitOnline, position: 1, says: "power machine sys-m2 on"}},
		{"power on: no mapping any more: stop", with(snap(at(1, StagePowerOn, 0), evacuated), func(s *Snapshot) { s.Mapping = nil }),
			want{action: ActFail, position: 1, record: true, says: "no fence mapping"}},

		// WAIT_ONLINE
		{"wait online: answering, no settle period: on to RESTORE", with(snap(at(1, StageWaitOnline, 5*time.Second), evacuated), func(s *Snapshot) { s.Limits.Settle = 0 }),
			want{action: ActConfirmOnline, next: StageRestore, position: 1}},
		{"wait online: answering for the settle period: on", with(snap(at(1, StageWaitOnline, 30*time.Second), evacuated), func(s *Snapshot) {
			s.Answering = Answering{Task: 7, Position: 1, Since: t0.Add(-10 * time.Second)}
		}), want{action: ActConfirmOnline, next: StageRestore, position: 1, says: "answered for 10s"}},
		{"wait online: answering, not for long enough: wait", with(snap(at(1, StageWaitOnline, 30*time.Second), evacuated), func(s *Snapshot) {
			s.Answering = Answering{Task: 7, Position: 1, Since: t0.Add(-9 * time.Second)}
		}), want{action: ActWait, position: 1, says: "counts as back"}},
		{"wait online: answering just seen (a new leader's first look): wait", snap(at(1, StageWaitOnline, 30*time.Second), evacuated),
			want{action: ActWait, position: 1}},
		{"wait online: not answering: wait", with(snap(at(1, StageWaitOnline, 30*time.Second), evacuated), func(s *Snapshot) { s.Answers = notReady }),
			want{action: ActWait, position: 1, says: "does not answer yet"}},
		{"wait online: Incus lists it Offline: wait", snap(at(1, StageWaitOnline, 30*time.Second), offline), want{action: ActWait, position: 1, says: "Offline"}},
		{"wait online: not back within the timeout: stop", with(snap(at(1, StageWaitOnline, 61*time.Second), evacuated), func(s *Snapshot) { s.Answers = notReady }),
			want{action: ActFail, position: 1, record: true, says: "m2 (stage WAIT_ONLINE): m2 did not come back within 1m0s of its power-on"}},
		{"wait online: answering but unsettled past the timeout: stop", snap(at(1, StageWaitOnline, 61*time.Second), evacuated),
			want{action: ActFail, position: 1, record: true, says: "did not come back within 1m0s of its power-on (APELORA_ROLLING_ONLINE_TIMEOUT): it answers, but not yet for the settle period (10s)"}},

		// RESTORE
		{"restore: ready: restore it", snap(at(1, StageRestore, 0), evacuated), want{action: ActRestore, position: 1, says: "restore it"}},
		{"restore: not ready yet: wait", with(snap(at(1, StageRestore, 5*time.Second), evacuated), func(s *Snapshot) { s.Answers = notReady }),
			want{action: ActWait, position: 1, says: "waiting for m2 to be ready"}},
		{"restore: not ready within the timeout: stop", with(snap(at(1, StageRestore, 61*time.Second), evacuated), func(s *Snapshot) { s.Answers = notReady }),
			want{action: ActFail, position: 1, record: true, says: "not ready to restore within 1m0s"}},
		{"restore: the restore runs: wait", with(snap(at(1, StageRestore, time.Second), evacuated), func(s *Snapshot) { s.Latest = evac(maintenance.Restore, 0, "", "") }),
			want{action: ActWait, position: 1, says: "runs"}},
		{"restore: the restore failed: stop", with(snap(at(1, StageRestore, time.Second), evacuated), func(s *Snapshot) {
			s.Latest = evac(maintenance.Restore, 0, maintenance.KindFailed, "check failed")
		}), want{action: ActFail, position: 1, says: "the restore of m2 failed: check failed"}},
		{"restore: Incus lists it Online: the next member", with(snap(at(1, StageRestore, time.Second), nil), func(s *Snapshot) {
			s.Latest = evac(maintenance.Restore, 0, maintenance.KindSucceeded, "")
		}), want{action: ActAdvance, next: StageEvacuate, position: 2}},
		{"restore: the last member restored: DONE", with(snap(at(2, StageRestore, time.Second), nil), func(s *Snapshot) {}),
			want{action: ActAdvance, next: StageDone, position: 3}},
		{"restore: ended but still Evacuated: stop", with(snap(at(1, StageRestore, time.Second), evacuated), func(s *Snapshot) {
			s.Latest = evac(maintenance.Restore, 0, maintenance.KindSucceeded, "")
		}), want{action: ActFail, position: 1, says: "ended (SUCCEEDED) but Incus lists it Evacuated"}},
		{"restore: Offline and no restore: asks it, which fails: wait", with(snap(at(1, StageRestore, time.Second), offline), func(s *Snapshot) { s.Answers = notReady }),
			want{action: ActWait, position: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.s)
			if d.Action != c.want.action || d.Next != c.want.next || d.Position != c.want.position || d.Record != c.want.record || !strings.Contains(d.Why, c.want.says) {
				t.Fatalf("got %s next %q position %d record %v: %s\nwant %+v", d.Action, d.Next, d.Position, d.Record, d.Why, c.want)
			}
			if d.Action == ActFail && (d.Reason != d.Why || d.Cause == nil || !strings.HasPrefix(d.Reason, fmt.Sprintf("%s (stage %s): ", d.Member, d.Stage))) {
				t.Fatalf("a stop says the member and its stage: %+v", d)
			}
			if (d.Action == ActPowerOff || d.Action == ActConfirmOff || d.Action == ActPowerOn) && (d.Mapping == nil || *d.Mapping != *c.s.Mapping) {
				t.Fatalf("a power stage without its mapping: %+v", d)
			}
		})
	}
}

// TestDecideReadsOnlyWhatTheStageNeeds: each fact is asked for once, when the stage gets to
// it: no power read but in CONFIRM_OFF, no ask of a member MAAS does not read off, none of
// a member Incus lists Offline, none before a running evacuation or restore ends.
func TestDecideReadsOnlyWhatTheStageNeeds(t *testing.T) {
	cases := []struct {
		name     string
		s        Snapshot
		asks     []Read // in order, each answered by the world below
		then     Action
		answers  error
		power    string
		latest   *maintenance.Task
		statuses map[string]membership.Status
	}{
		{name: "evacuate", s: Snapshot{Task: at(0, StageEvacuate, 0)}, asks: []Read{ReadTasks}, then: ActEvacuate},
		{name: "evacuate, evacuation running", s: Snapshot{Task: at(0, StageEvacuate, 0)}, asks: []Read{ReadTasks}, then: ActWait, latest: evac(maintenance.Evacuate, 0, "", "")},
		{name: "power off", s: Snapshot{Task: at(0, StagePowerOff, 0)}, asks: []Read{ReadMapping}, then: ActPowerOff},
		{name: "confirm off, on", s: Snapshot{Task: at(0, StageConfirmOff, 0)}, asks: []Read{ReadMapping, ReadPower}, then: ActWait, power: "on"},
		{name: "confirm off, off", s: Snapshot{Task: at(0, StageConfirmOff, 0)}, asks: []Read{ReadMapping, ReadPower, ReadAnswers}, then: ActConfirmOff, power: "off", answers: notReady},
		{name: "power on", s: Snapshot{Task: at(0, StagePowerOn, 0)}, asks: []Read{ReadMapping}, then: ActPowerOn},
		{name: "wait online", s: Snapshot{Task: at(0, StageWaitOnline, 0)}, asks: []Read{ReadAnswers}, then: ActWait},
		{name: "wait online, Offline", s: Snapshot{Task: at(0, StageWaitOnline, 0)}, asks: nil, then: ActWait, statuses: map[string]membership.Status{"m1": membership.StatusOffline}},
		{name: "restore", s: Snapshot{Task: at(0, StageRestore, 0)}, asks: []Read{ReadTasks, ReadAnswers}, then: ActRestore, statuses: map[string]membership.Status{"m1": membership.StatusEvacuated}},
		{name: "restore, running", s: Snapshot{Task: at(0, StageRestore, 0)}, asks: []Read{ReadTasks}, then: ActWait, latest: evac(maintenance.Restore, 0, "", "")},
		{name: "restore, restored", s: Snapshot{Task: at(0, StageRestore, 0)}, asks: []Read{ReadTasks}, then: ActAdvance},
		{name: "done", s: Snapshot{Task: at(3, StageDone, 0)}, asks: nil, then: ActFinish},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			s.Members, s.Now, s.Limits = cluster(c.statuses), t0, limits
			var asked []Read
			for {
				d := Decide(s)
				if d.Action != ActRead {
					if d.Action != c.then || !reflect.DeepEqual(asked, c.asks) {
						t.Fatalf("asked %v then %s (%s); want %v then %s", asked, d.Action, d.Why, c.asks, c.then)
					}
					return
				}
				if s.Have.Has(d.Read) || len(asked) > 4 {
					t.Fatalf("asked again for %s (asked %v)", d.Read, asked)
				}
				asked = append(asked, d.Read)
				s.Have |= d.Read
				switch d.Read {
				case ReadTasks:
					if c.latest != nil {
						l := *c.latest
						l.Machine = "m1"
						s.Latest = &l
					}
				case ReadMapping:
					s.Mapping = mappingOf("m1")
				case ReadPower:
					s.PowerState = c.power
				case ReadAnswers:
					s.Answers = c.answers
				}
			}
		})
	}
}

// TestFailedSaysWhatACallsErrorMeans: BUSY waits at every stage (nothing was tried); a
// restore whose checks could not be completed waits within the stage's bound, then stops
// with its own event; any other error stops the task, its call's change having recorded
// the stage's event.
func TestFailedSaysWhatACallsErrorMeans(t *testing.T) {
	busy := apperr.New(apperr.Busy, "machine m2 is busy: another change holds it")
	refused := apperr.New(apperr.FailedPrecondition, "MAAS machine sys-m2 reports hardware UUID x, not the mapped y")
	unavailable := apperr.New(apperr.Unavailable, "m2 stays evacuated: the admission checks could not be completed: incus-version (no answer)")
	for _, stage := range []struct {
		stage Stage
		s     Snapshot
	}{
		{StageEvacuate, snap(at(1, StageEvacuate, 0), nil)},
		{StagePowerOff, snap(at(1, StagePowerOff, 0), evacuated)},
		{StageConfirmOff, offAndSilent(snap(at(1, StageConfirmOff, 0), evacuated))},
		{StagePowerOn, snap(at(1, StagePowerOn, 0), evacuated)},
		{StageWaitOnline, withSettle(snap(at(1, StageWaitOnline, 0), evacuated))},
		{StageRestore, snap(at(1, StageRestore, 0), evacuated)},
	} {
		d := Decide(stage.s)
		if d.Action == ActWait || d.Action == ActFail || d.Action == ActRead || d.Action == ActAdvance {
			t.Fatalf("%s: %s is no call (%s)", stage.stage, d.Action, d.Why)
		}
		if w := d.Failed(stage.s, busy); w.Action != ActWait || w.Cause != busy {
			t.Errorf("%s: BUSY gave %s", stage.stage, w.Action)
		}
		if f := d.Failed(stage.s, refused); f.Action != ActFail || f.Record || f.Reason != fmt.Sprintf("m2 (stage %s): %s", stage.stage, refused.Message) {
			t.Errorf("%s: a refusal gave %s record %v %q", stage.stage, f.Action, f.Record, f.Reason)
		}
		u := d.Failed(stage.s, unavailable)
		if stage.stage == StageRestore {
			if u.Action != ActWait {
				t.Errorf("restore: UNAVAILABLE within the bound gave %s", u.Action)
			}
			late := stage.s
			late.Task = at(1, StageRestore, 61*time.Second)
			if f := d.Failed(late, unavailable); f.Action != ActFail || !f.Record || !strings.Contains(f.Reason, "not ready to restore within 1m0s (APELORA_ROLLING_ONLINE_TIMEOUT): m2 stays evacuated: the admission checks could not be completed") {
				t.Errorf("restore: UNAVAILABLE past the bound gave %s record %v %q", f.Action, f.Record, f.Reason)
			}
		} else if u.Action != ActFail || u.Record {
			t.Errorf("%s: UNAVAILABLE gave %s record %v", stage.stage, u.Action, u.Record)
		}
	}
	// A plain error (MAAS not reached) is said as it is; an internal one is not.
	d := Decide(snap(at(1, StagePowerOff, 0), evacuated))
	if f := d.Failed(Snapshot{}, errors.New("ask MAAS to power off machine sys-m2: connection refused")); f.Reason != "m2 (stage POWER_OFF): ask MAAS to power off machine sys-m2: connection refused" {
		t.Errorf("plain error: %q", f.Reason)
	}
	if f := d.Failed(Snapshot{}, apperr.New(apperr.Internal, "secret detail")); strings.Contains(f.Reason, "secret") {
		t.Errorf("internal error: %q", f.Reason)
	}
}

func offAndSilent(s Snapshot) Snapshot {
	s.PowerState, s.Answers = "off", notReady
	return s
}

func withSettle(s Snapshot) Snapshot {
	s.Limits.Settle = 0
	return s
}

// TestAnsweringRestartsWithEachMemberAndEachLeader: the settle clock starts at the first
// answer of this member in this task, stops when it no longer answers, and starts again
// for a new leader (whose memory is empty).
func TestAnsweringRestartsWithEachMemberAndEachLeader(t *testing.T) {
	s := snap(at(1, StageWaitOnline, 0), evacuated)
	d := Decide(s)
	if d.Answering != (Answering{Task: 7, Position: 1, Since: t0}) {
		t.Fatalf("first answer: %+v", d.Answering)
	}
	s.Answering, s.Now = d.Answering, t0.Add(4*time.Second)
	if d = Decide(s); d.Answering.Since != t0 || d.Action != ActWait {
		t.Fatalf("still answering: %+v %s", d.Answering, d.Action)
	}
	s.Answers = notReady
	if d = Decide(s); d.Answering != (Answering{}) {
		t.Fatalf("no longer answering: %+v", d.Answering)
	}
	s.Answers, s.Answering = nil, Answering{Task: 7, Position: 0, Since: t0.Add(-time.Hour)} // m1's, long ago
	if d = Decide(s); d.Answering.Since != s.Now || d.Action != ActWait {
		t.Fatalf("another member's memory: %+v %s", d.Answering, d.Action)
	}
	s.Answering = Answering{Task: 6, Position: 1, Since: t0.Add(-time.Hour)} // another task's
	if d = Decide(s); d.Answering.Since != s.Now {
		t.Fatalf("another task's memory: %+v", d.Answering)
	}
	// Other stages keep the memory as it is.
	s = snap(at(1, StagePowerOff, 0), evacuated)
	s.Answering = Answering{Task: 7, Position: 1, Since: t0}
	if d = Decide(s); d.Answering != s.Answering {
		t.Fatalf("power off dropped the memory: %+v", d.Answering)
	}
}

func TestTransitionPausesResumesAndCancels(t *testing.T) {
	states := []State{StateRunning, StatePaused, StateSucceeded, StateFailed, StateCancelled}
	may := map[Verb][]State{Pause: {StateRunning}, Resume: {StatePaused}, Cancel: {StateRunning, StatePaused}}
	to := map[Verb]State{Pause: StatePaused, Resume: StateRunning, Cancel: StateCancelled}
	for _, verb := range []Verb{Pause, Resume, Cancel} {
		for _, st := range states {
			tk := *at(1, StagePowerOn, 0)
			tk.State = st
			mv, err := Transition(tk, verb, "ada")
			allowed := false
			for _, s := range may[verb] {
				allowed = allowed || s == st
			}
			if !allowed {
				e, ok := apperr.As(err)
				if !ok || e.Code != apperr.FailedPrecondition || !strings.Contains(e.Message, "cannot be "+verb.past()) {
					t.Errorf("%s a %s task: %v", verb, st, err)
				}
				continue
			}
			if err != nil || mv.To != to[verb] || !reflect.DeepEqual(mv.From, may[verb]) {
				t.Errorf("%s a %s task: %+v %v", verb, st, mv, err)
			}
		}
	}
	// The cancel's reason: where it was, who, and the member left as it is.
	mv, _ := Transition(*at(1, StagePowerOn, 0), Cancel, "ada")
	if mv.Reason != "cancelled at m2, stage POWER_ON by ada; m2 is left as it is (restore it with restoreMember when it is up)" {
		t.Errorf("cancel reason: %q", mv.Reason)
	}
	if mv, _ = Transition(*at(0, StageEvacuate, 0), Cancel, ""); mv.Reason != "cancelled at m1, stage EVACUATE" {
		t.Errorf("cancel before any evacuation: %q", mv.Reason)
	}
	if _, err := Transition(*at(0, StageEvacuate, 0), "reboot", ""); err == nil {
		t.Error("an unknown verb was accepted")
	}
}

func TestStartRefusalsInOrder(t *testing.T) {
	maps := map[string]fencing.Mapping{"m1": *mappingOf("m1"), "m2": *mappingOf("m2"), "m3": *mappingOf("m3")}
	active := at(1, StagePowerOff, 0)
	codes := func(errs []error) string {
		var out []string
		for _, e := range errs {
			out = append(out, string(apperr.CodeOf(e)))
		}
		return strings.Join(out, " ")
	}
	if got := StartRefusals(nil, cluster(nil), []string{"m1", "m2", "m3"}, maps); len(got) != 0 {
		t.Fatalf("a start that may go: %v", got)
	}
	got := StartRefusals(active, cluster(map[string]membership.Status{"m3": membership.StatusEvacuated}), []string{"m1", "nope", "m3"}, map[string]fencing.Mapping{"m3": maps["m3"]})
	if codes(got) != "FAILED_PRECONDITION FAILED_PRECONDITION NOT_FOUND" ||
		!strings.Contains(got[0].Error(), "rolling reboot 7 (m1, m2, m3, at m2, stage POWER_OFF) is still running") ||
		!strings.Contains(got[1].Error(), `"m1" cannot be rebooted while m3 (Evacuated)`) || !strings.Contains(got[2].Error(), `"nope" is not a member`) {
		t.Fatalf("refusals: %v", got)
	}
	// m3 itself evacuated may be named (a task resumed by hand), but it has no mapping here.
	got = StartRefusals(nil, cluster(map[string]membership.Status{"m3": membership.StatusEvacuated}), []string{"m3"}, map[string]fencing.Mapping{})
	if codes(got) != "FAILED_PRECONDITION" || !strings.Contains(got[0].Error(), "no fence mapping") {
		t.Fatalf("no mapping: %v", got)
	}
	// A finished task refuses nothing.
	done := at(3, StageDone, 0)
	done.State = StateSucceeded
	if got := StartRefusals(done, cluster(nil), []string{"m1"}, maps); len(got) != 0 {
		t.Fatalf("a finished task refused a start: %v", got)
	}
}

func TestValidateMembers(t *testing.T) {
	for _, c := range []struct {
		members []string
		ok      bool
	}{
		{[]string{"m1"}, true}, {[]string{"m1", "m2"}, true}, {nil, false}, {[]string{}, false},
		{[]string{"m1", "m1"}, false}, {[]string{"bad name"}, false}, {[]string{strings.Repeat("m", 300)}, false}, {[]string{"m1\x00"}, false},
	} {
		err := ValidateMembers(c.members)
		if (err == nil) != c.ok || (err != nil && apperr.CodeOf(err) != apperr.InvalidInput) {
			t.Errorf("%q: %v", c.members, err)
		}
	}
}

func TestPowerOffNeededAndPowerVerdict(t *testing.T) {
	if PowerOffNeeded("off", nil) || !PowerOffNeeded("on", nil) || !PowerOffNeeded("unknown", nil) || !PowerOffNeeded("off", errors.New("x")) {
		t.Error("PowerOffNeeded: only a read that says off skips the power-off")
	}
	for _, c := range []struct {
		stage Stage
		state string
		want  audit.Outcome
	}{
		{StagePowerOff, "off", audit.Succeeded}, {StagePowerOff, "on", audit.Failed}, {StagePowerOff, "error", audit.Failed},
		{StagePowerOn, "on", audit.Succeeded}, {StagePowerOn, "off", audit.Failed}, {StagePowerOn, "unknown", audit.Failed},
	} {
		v := PowerVerdict(c.stage, "sys-m2", c.state)
		if v.Outcome != c.want || !strings.Contains(v.Found, "machine sys-m2's power "+c.state) {
			t.Errorf("%s read %s: %+v", c.stage, c.state, v)
		}
	}
}
