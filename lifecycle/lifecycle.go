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
	// Scheduler is the member's scheduler.instance value ("" when the key is absent).
	Scheduler        string
	PendingJoinToken bool
	// PendingProblem says why pending join tokens could not be listed ("" when they were).
	PendingProblem    string
	AdmissionRecorded bool
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
	var warnings []Warning
	switch f.Scheduler {
	case "manual":
		return Held, nil
	case "group":
		warnings = append(warnings, Warning{Code: ScheduledByGroup, Message: "scheduler.instance=group: placement reaches this member when a request targets one of its groups"})
	}
	if f.AdmissionRecorded {
		return Admitted, warnings
	}
	return Unheld, append([]Warning{{Code: JoinedWithoutHold, Message: "joined without being held: placement can reach this member, but no admission was recorded; run the admission checks"}}, warnings...)
}
