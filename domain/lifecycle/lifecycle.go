// Package lifecycle derives a machine's phase from what the machine record, Incus and
// Apelora's admissions say right now. The phase itself is not stored: it is computed on
// every read, so it can never disagree with Incus, which is the truth for membership.
package lifecycle

import (
	"fmt"
	"strconv"
	"strings"
)

// Phase is where a machine is in its lifecycle.
type Phase string

const (
	Registered   Phase = "REGISTERED"    // record; no member, no pending join token
	AwaitingJoin Phase = "AWAITING_JOIN" // record; a pending join token for the name
	Held         Phase = "HELD"          // record; member with scheduler.instance=manual
	Admitted     Phase = "ADMITTED"      // record; member without the key, carrying the mark of its recorded admission
	Unheld       Phase = "UNHELD"        // record; member without the key; no mark, or a mark Apelora has no record of
	Evacuated    Phase = "EVACUATED"     // record; Incus lists the member Evacuated (maintenance)
	Unregistered Phase = "UNREGISTERED"  // member with no record
	Discovered   Phase = "DISCOVERED"    // a MAAS machine with no record and no member
	Unknown      Phase = "UNKNOWN"       // Incus could not be asked
)

// WarningCode names a condition an administrator should look at.
type WarningCode string

const (
	JoinedWithoutHold WarningCode = "JOINED_WITHOUT_HOLD"
	IncusUnavailable  WarningCode = "INCUS_UNAVAILABLE"
	ScheduledByGroup  WarningCode = "SCHEDULED_BY_GROUP"
	JoinTokensUnknown WarningCode = "JOIN_TOKENS_UNKNOWN"
	MAASUnavailable   WarningCode = "MAAS_UNAVAILABLE"
	MAASMachineGone   WarningCode = "MAAS_MACHINE_MISSING"
	HardwareMismatch  WarningCode = "HARDWARE_UUID_MISMATCH"
	// A member carries an admission mark that names no admission Apelora has recorded.
	AdmissionNotRecorded WarningCode = "ADMISSION_NOT_RECORDED"
	// Drift: an admitted member fails a check it passed at admission (package drift).
	Drift WarningCode = "DRIFT"
)

// Warning is a condition with a message for the administrator.
type Warning struct {
	Code    WarningCode
	Message string
	// Check names the check a warning is about, for those that are (DRIFT).
	Check string
}

// SchedulerKey is the Incus member config key that holds a member out of placement.
const SchedulerKey = "scheduler.instance"

// AdmissionKey is the Incus member config key that marks a member admitted: admitMember
// sets it in the same member update that removes SchedulerKey. Its presence is what
// Incus-side placement rules test (the name is relied on outside this repository: never
// rename it); its value names the admission (AdmissionMark).
const AdmissionKey = "user.apelora.admission"

// AdmissionMark is the value of AdmissionKey for the admission with record id id, made by
// the request requestID. The audit event's id is not in it: that id is only drawn when the
// event is inserted, after the Incus update (the admission record keeps it).
//
// A dry run records no admission (id 0): its plan shows a mark that names neither a
// record nor its request, so two plans of the same admission are the same plan (a
// confirmation's planHash compares them).
func AdmissionMark(id int64, requestID string) string {
	if id == 0 {
		return "admission (its record id and request once admitted)"
	}
	return fmt.Sprintf("admission %d, request %s", id, requestID)
}

// MarkedAdmission returns the admission record id a mark names (AdmissionMark), 0 when
// the value names none (written by hand, or by something else).
func MarkedAdmission(mark string) int64 {
	rest, ok := strings.CutPrefix(mark, "admission ")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, ",")
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// Admission is what Apelora recorded of a machine's open admission (ended admissions are
// not facts the phase reads).
type Admission struct {
	ID int64
	// CarriedOver is an admission carried over from the audit trail of a release that did
	// not mark members, whose member Incus does not carry the mark yet: it counts as
	// admitted without the mark until the server has marked the member.
	CarriedOver bool
}

// Facts are what the sources say about one name.
type Facts struct {
	HasRecord bool
	// InMAAS is true for a machine MAAS reports.
	InMAAS bool
	// IncusKnown is false when Incus could not be asked (not configured or unreachable);
	// IncusProblem then says why.
	IncusKnown   bool
	IncusProblem string
	IsMember     bool
	// Evacuated is true when Incus lists the member's status as Evacuated (by
	// evacuateMember or by `incus cluster evacuate`): it is in maintenance.
	Evacuated bool
	// Scheduler is the member's scheduler.instance value ("" when the key is absent).
	Scheduler        string
	PendingJoinToken bool
	// PendingProblem says why pending join tokens could not be listed ("" when they were).
	PendingProblem string
	// Marked is true when the member carries AdmissionKey; Mark is its value.
	Marked bool
	Mark   string
	// Admission is the machine's open admission record, nil for none.
	Admission *Admission
}

// Derive returns the phase and warnings for one name.
func Derive(f Facts) (Phase, []Warning) {
	if !f.IncusKnown {
		return Unknown, []Warning{{Code: IncusUnavailable, Message: "Incus could not be asked, so membership is unknown: " + f.IncusProblem}}
	}
	if !f.HasRecord {
		if !f.IsMember && f.InMAAS {
			return Discovered, nil
		}
		return Unregistered, nil
	}
	if !f.IsMember {
		if f.PendingJoinToken {
			return AwaitingJoin, nil
		}
		if f.PendingProblem != "" {
			return Registered, []Warning{{Code: JoinTokensUnknown, Message: "a join token may be pending for this machine (AWAITING_JOIN): " + f.PendingProblem}}
		}
		return Registered, nil
	}
	if f.Evacuated {
		// Maintenance outranks the placement state: nothing is placed on an evacuated
		// member, and restoreMember brings it back to the phase its mark and hold say.
		return Evacuated, nil
	}
	var warnings []Warning
	switch f.Scheduler {
	case "manual":
		return Held, nil
	case "group":
		warnings = append(warnings, Warning{Code: ScheduledByGroup, Message: "scheduler.instance=group: placement reaches this member when a request targets one of its groups"})
	}
	recorded := f.Admission != nil
	switch {
	case f.Marked && recorded && MarkedAdmission(f.Mark) == f.Admission.ID:
		return Admitted, warnings
	case !f.Marked && recorded && f.Admission.CarriedOver:
		return Admitted, warnings
	case f.Marked:
		what := "no admission of this machine is recorded"
		if recorded {
			what = fmt.Sprintf("the recorded admission is %d", f.Admission.ID)
		}
		return Unheld, append([]Warning{{Code: AdmissionNotRecorded, Message: fmt.Sprintf("the member carries the admission mark %s=%q, but %s, so placement reaches a member Apelora did not admit: run admitMember to check and admit it (or hold it: set %s=manual)", AdmissionKey, f.Mark, what, SchedulerKey)}}, warnings...)
	}
	return Unheld, append([]Warning{{Code: JoinedWithoutHold, Message: "joined without being held: placement can reach this member, but it carries no admission mark (" + AdmissionKey + "); run the admission checks, then admitMember"}}, warnings...)
}
