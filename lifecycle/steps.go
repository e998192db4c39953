package lifecycle

// Whether a member counts as admitted (ADMITTED rather than UNHELD) is not stored: it is
// the machine's latest successful membership step in the audit trail. These are those
// steps, named as the audit trail names them: after the mutation that took them (the
// gate names each audit event after its mutation, server/gate.go). server's tests check
// that each is a mutation of the schema, so renaming one fails there instead of silently
// changing every machine's phase. The store only finds the latest of the steps it is
// given; the rule of which step admits is here.
const (
	StepApproveEnrolment       = "approveEnrolment"
	StepInstallOperatingSystem = "installOperatingSystem"
	StepAdmitMember            = "admitMember"
	StepRemoveMember           = "removeMember"
)

// MembershipSteps are the audited steps that change whether a member counts as admitted:
// admitting begins an admission; a new join (approved, or installed from MAAS) and
// removing the member end it.
var MembershipSteps = []string{StepApproveEnrolment, StepInstallOperatingSystem, StepAdmitMember, StepRemoveMember}

// Admits reports whether latest, a machine's latest successful membership step ("" for
// none), leaves it admitted.
func Admits(latest string) bool { return latest == StepAdmitMember }

// AdmittedMachines applies Admits to each machine's latest membership step.
func AdmittedMachines(latest map[string]string) map[string]bool {
	out := make(map[string]bool, len(latest))
	for machine, step := range latest {
		if Admits(step) {
			out[machine] = true
		}
	}
	return out
}
