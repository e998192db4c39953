// Package drift watches admitted members for changes since their admission. The admission
// checks (admission.Checker: the same rule code, hardware profiles included) run again on
// every admitted member, with three checks of drift's own: the member is still in the
// cluster, scheduler.instance is still unset, and it keeps the roles it was admitted with.
// A check that fails now, and fails long enough, is drift: a DRIFT warning on the machine
// with the check, since when and the evidence (the check's message). It clears when the
// check passes again. Drift only reads: nothing here can change Incus or MAAS.
//
// The rules are pure code (Assess, Apply, Forget) over what one look at a machine found;
// the Runner is the loop that looks (one process at a time, through Leadership), and the
// Service is what the API reads.
package drift

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/membership"
)

// Checks drift adds to the admission checks.
const (
	CheckMembership = "membership" // the member is still in the cluster
	CheckScheduler  = "scheduler"  // scheduler.instance is unset, as admission left it
	CheckRoles      = "roles"      // the member keeps the roles it was admitted with
)

// Outcome is what one look found for one check.
type Outcome int

const (
	// Unknown says nothing about the machine now (a read failed, or the member is not
	// online to be asked): what was known is kept.
	Unknown Outcome = iota
	Passing
	Failing
)

// Finding is one check's outcome in one look at a machine.
type Finding struct {
	Check    string
	Title    string
	Outcome  Outcome
	Evidence string
	// Suspended: the check needs the member up, and it is in maintenance (Unknown).
	Suspended bool
}

// Admission is what the audit trail recorded when the machine was admitted.
type Admission struct {
	Machine string
	At      time.Time
	// Roles the member had when admitted; RolesKnown is false for an admission carried
	// over from an audit event that did not list them.
	Roles      []string
	RolesKnown bool
	// Maintenance: Apelora's latest evacuation or restore of the machine is an evacuation
	// that did not fail. Incus lists an evacuated member that stops answering (rebooted
	// for its maintenance) as Offline, so its evacuation is known from that record.
	Maintenance bool
}

// State is one check of one machine that failed when last evaluated. It is drift once
// raised; until then it is failing under its threshold.
type State struct {
	Machine      string
	Check        string
	Title        string
	FailingSince time.Time // first seen failing (the drift's "since")
	RaisedAt     time.Time // zero while under the threshold
	Evidence     string    // the check's message when last evaluated
	LastChecked  time.Time // when the check was last evaluated (not kept as Unknown)
}

// Status is what the watcher knows of one admitted machine: when it last looked, and the
// raised drift (the fleet reads every machine's in one query).
type Status struct {
	Checked time.Time
	Drift   []State
	// Quiet says why checks of the machine are suspended at its last check (Quiet); ""
	// while every check runs.
	Quiet string
}

// Quiet says why drift is quiet for a member whose checks are suspended (a member in
// maintenance may be down on purpose), naming them; "" when none is.
func Quiet(member string, fs []Finding) string {
	var names []string
	why := ""
	for _, f := range fs {
		if f.Suspended {
			names = append(names, f.Check)
			if why == "" {
				why = f.Evidence
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	_, reason, _ := strings.Cut(why, ": ")
	return fmt.Sprintf("drift is quiet for %s: %s; suspended: %s", member, strings.TrimSuffix(reason, "; this check resumes once it is restored (restoreMember)")+"; these checks resume once it is restored (restoreMember)", strings.Join(names, ", "))
}

// Raised reports whether the state is drift.
func (s State) Raised() bool { return !s.RaisedAt.IsZero() }

// Change is what an event records.
type Change string

const (
	Raised  Change = "RAISED"
	Cleared Change = "CLEARED"
)

// Event is one raise or clear: kept as history, pushed to subscribers on every replica.
type Event struct {
	ID       int64
	Machine  string
	Check    string
	Title    string
	Change   Change
	At       time.Time
	Since    time.Time // when the check was first seen failing
	Evidence string    // the check's message (for a clear: why it passes now)
}

// Limits are drift's thresholds.
type Limits struct {
	// OfflineAfter is how long a member must be seen offline, or missing from the
	// cluster, before that is drift: one missed heartbeat or poll is not. Other checks
	// are drift from the first look that sees them fail (their failure is a fact about the
	// member's configuration, not a moment's silence).
	OfflineAfter time.Duration
}

// threshold is how long a check must fail before it is drift.
func (l Limits) threshold(check string) time.Duration {
	switch check {
	case admission.CheckOnline, CheckMembership:
		return l.OfflineAfter
	}
	return 0
}

// readsTheMember are the admission checks that ask the member itself (through the member
// Apelora talks to): while it is not online their failures are the outage, not drift.
var readsTheMember = []string{admission.CheckIncusVersion, admission.CheckKernel, admission.CheckStoragePools,
	admission.CheckNetworks, admission.CheckProfileIncus}

// derivedRoles are given and taken by the cluster's database (raft) on its own; only the
// roles Incus stores (event-hub, ovn-chassis …) are an administrator's, and can drift.
var derivedRoles = []string{"database", "database-leader", "database-standby"}

// Assess turns one look at an admitted machine into findings: the admission report (nil
// when the member is gone), the member as Incus lists it (nil when gone), and what the
// admission recorded. Checks not in the result are Unknown.
func Assess(r *admission.Report, m *membership.Member, a Admission) []Finding {
	if m == nil {
		return []Finding{{Check: CheckMembership, Title: "Member of the cluster", Outcome: Failing,
			Evidence: "the member is no longer in the Incus cluster, yet its admission is the latest membership step recorded: it was removed (or renamed) outside Apelora; enrol it again, or record its end with removeMember if it is back"}}
	}
	out := []Finding{{Check: CheckMembership, Title: "Member of the cluster", Outcome: Passing, Evidence: "the member is in the Incus cluster"}}
	// A member in maintenance may be down on purpose (Incus keeps listing it Evacuated
	// even then): its offline check and the checks that ask it are suspended (Unknown
	// keeps what was known) until it is restored.
	maintenance := m.Evacuated() || a.Maintenance
	if r != nil {
		for _, c := range r.Checks {
			f := Finding{Check: c.Name, Title: c.Title, Evidence: c.Message}
			switch {
			case maintenance && (c.Result == admission.Fail || c.Inconclusive) && (c.Name == admission.CheckOnline || slices.Contains(readsTheMember, c.Name)):
				f.Outcome, f.Suspended = Unknown, true
				f.Evidence = fmt.Sprintf("suspended: %s is in maintenance (evacuated; Incus lists it %s), so it may be down on purpose; this check resumes once it is restored (restoreMember)", m.Name, m.Status)
			case c.Inconclusive:
				f.Outcome = Unknown
			case !m.Online() && !m.Evacuated() && slices.Contains(readsTheMember, c.Name):
				f.Outcome = Unknown
			case c.Result == admission.Fail:
				f.Outcome = Failing
			default:
				f.Outcome = Passing
			}
			out = append(out, f)
		}
	}
	return append(out, scheduler(m), roles(m, a))
}

func scheduler(m *membership.Member) Finding {
	f := Finding{Check: CheckScheduler, Title: "Placement reaches the member"}
	switch v := m.Scheduler(); v {
	case "", "all":
		f.Outcome, f.Evidence = Passing, "scheduler.instance is unset, as admission left it: automatic placement reaches the member"
	case "manual":
		f.Outcome = Failing
		f.Evidence = fmt.Sprintf("scheduler.instance=manual was set on the member after its admission: automatic placement no longer reaches it; undo with `incus cluster unset %s scheduler.instance`, or removeMember if it is leaving", m.Name)
	case "group":
		f.Outcome = Failing
		f.Evidence = fmt.Sprintf("scheduler.instance=group was set on the member after its admission: placement reaches it only when a request targets one of its groups; undo with `incus cluster unset %s scheduler.instance`", m.Name)
	default:
		f.Outcome = Failing
		f.Evidence = fmt.Sprintf("scheduler.instance=%q was set on the member after its admission; undo with `incus cluster unset %s scheduler.instance`", v, m.Name)
	}
	return f
}

// storedRoles are the roles of rs an administrator sets, sorted.
func storedRoles(rs []string) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(derivedRoles, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func roles(m *membership.Member, a Admission) Finding {
	f := Finding{Check: CheckRoles, Title: "Roles kept since admission"}
	if !a.RolesKnown {
		f.Outcome, f.Evidence = Unknown, "the admission recorded no roles to compare with"
		return f
	}
	then, now := storedRoles(a.Roles), storedRoles(m.Roles)
	var dropped []string
	for _, r := range then {
		if !slices.Contains(now, r) {
			dropped = append(dropped, r)
		}
	}
	switch {
	case len(dropped) > 0:
		f.Outcome = Failing
		f.Evidence = fmt.Sprintf("roles dropped since admission: %s (admitted with %s; now %s); add them back with `incus cluster role add %s %s`",
			strings.Join(dropped, ", "), list(then), list(now), m.Name, strings.Join(dropped, ","))
	case len(then) == 0:
		f.Outcome, f.Evidence = Passing, "admitted with no roles of its own to keep"
	default:
		f.Outcome, f.Evidence = Passing, "keeps the roles it was admitted with: "+strings.Join(then, ", ")
	}
	return f
}

func list(rs []string) string {
	if len(rs) == 0 {
		return "none"
	}
	return strings.Join(rs, ", ")
}

// maxEvidence bounds the evidence kept and pushed: a check's message quotes upstream errors.
const maxEvidence = 1024

// clean makes evidence storable and bounded: valid UTF-8, no NUL (PostgreSQL refuses
// both in text), at most maxEvidence bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if len(s) <= maxEvidence {
		return s
	}
	cut := maxEvidence - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Apply applies one look at a machine to what was known of it (prev: its states) and
// returns its states afterwards and the raises and clears to record. now is when the
// look happened. A failing check is raised once it has failed for its threshold (from
// the first look that saw it fail); a passing one clears; an Unknown one, or one not
// looked at, stays as it was.
func Apply(machine string, prev []State, findings []Finding, now time.Time, l Limits) ([]State, []Event) {
	byCheck := map[string]State{}
	for _, s := range prev {
		byCheck[s.Check] = s
	}
	var events []Event
	seen := map[string]bool{}
	var next []State
	for _, f := range findings {
		if seen[f.Check] {
			continue
		}
		seen[f.Check] = true
		s, known := byCheck[f.Check]
		evidence := clean(f.Evidence)
		switch f.Outcome {
		case Unknown:
			if known {
				next = append(next, s)
			}
		case Passing:
			if known && s.Raised() {
				events = append(events, Event{Machine: machine, Check: f.Check, Title: f.Title, Change: Cleared, At: now, Since: s.FailingSince, Evidence: evidence})
			}
		case Failing:
			if !known {
				s = State{Machine: machine, Check: f.Check, FailingSince: now}
			}
			s.Title, s.Evidence, s.LastChecked = f.Title, evidence, now
			if !s.Raised() && now.Sub(s.FailingSince) >= l.threshold(f.Check) {
				s.RaisedAt = now
				events = append(events, Event{Machine: machine, Check: f.Check, Title: f.Title, Change: Raised, At: now, Since: s.FailingSince, Evidence: evidence})
			}
			next = append(next, s)
		}
	}
	for _, s := range prev {
		if !seen[s.Check] {
			next = append(next, s)
		}
	}
	sortStates(next)
	return next, events
}

// Forget ends what is known of a machine that is no longer admitted (removed, enrolled
// again, unregistered): each raised check clears, saying why.
func Forget(prev []State, now time.Time, why string) []Event {
	var events []Event
	for _, s := range prev {
		if s.Raised() {
			events = append(events, Event{Machine: s.Machine, Check: s.Check, Title: s.Title, Change: Cleared, At: now, Since: s.FailingSince, Evidence: clean(why)})
		}
	}
	return events
}

func sortStates(s []State) {
	slices.SortFunc(s, func(a, b State) int { return strings.Compare(a.Check, b.Check) })
}
