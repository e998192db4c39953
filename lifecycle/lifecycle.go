// Package lifecycle derives a machine's phase from what the machine record and Incus say
// right now. Nothing here is stored: the phase is computed on every read, so it can never
// disagree with Incus, which is the truth for membership.
package lifecycle

// Phase is where a machine is in its lifecycle.
type Phase string

const (
	Registered   Phase = "REGISTERED"    // record; no member, no pending join token
	AwaitingJoin Phase = "AWAITING_JOIN" // record; a pending join token for the name
	Held         Phase = "HELD"          // record; member with scheduler.instance=manual
	Admitted     Phase = "ADMITTED"      // record; member without the key; admission recorded
	Unheld       Phase = "UNHELD"        // record; member without the key; no admission recorded
	Unregistered Phase = "UNREGISTERED"  // member with no record
	Unknown      Phase = "UNKNOWN"       // Incus could not be asked
)

// WarningCode names a condition an administrator should look at.
type WarningCode string

const (
	JoinedWithoutHold WarningCode = "JOINED_WITHOUT_HOLD"
	IncusUnavailable  WarningCode = "INCUS_UNAVAILABLE"
	ScheduledByGroup  WarningCode = "SCHEDULED_BY_GROUP"
)

// Warning is a condition with a message for the administrator.
type Warning struct {
	Code    WarningCode
	Message string
}

// SchedulerKey is the Incus member config key that holds a member out of placement.
const SchedulerKey = "scheduler.instance"

// Facts are what the sources say about one name.
type Facts struct {
	HasRecord bool
	// IncusKnown is false when Incus could not be asked (not configured or unreachable);
	// IncusProblem then says why.
	IncusKnown   bool
	IncusProblem string
	IsMember     bool
	// Scheduler is the member's scheduler.instance value ("" when the key is absent).
	Scheduler         string
	PendingJoinToken  bool
	AdmissionRecorded bool
}

// Derive returns the phase and warnings for one name.
func Derive(f Facts) (Phase, []Warning) {
	if !f.IncusKnown {
		return Unknown, []Warning{{IncusUnavailable, "Incus could not be asked, so membership is unknown: " + f.IncusProblem}}
	}
	if !f.HasRecord {
		return Unregistered, nil
	}
	if !f.IsMember {
		if f.PendingJoinToken {
			return AwaitingJoin, nil
		}
		return Registered, nil
	}
	var warnings []Warning
	switch f.Scheduler {
	case "manual":
		return Held, nil
	case "group":
		warnings = append(warnings, Warning{ScheduledByGroup, "scheduler.instance=group: placement reaches this member when a request targets one of its groups"})
	}
	if f.AdmissionRecorded {
		return Admitted, warnings
	}
	return Unheld, append([]Warning{{JoinedWithoutHold, "joined without being held: placement can reach this member, but no admission was recorded; run the admission checks"}}, warnings...)
}
