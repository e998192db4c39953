package provisioning

import (
	"fmt"
	"slices"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Step is a MAAS step Apelora takes on an administrator's approval.
type Step string

const (
	StepCommission    Step = "COMMISSION"
	StepInstall       Step = "INSTALL"
	StepHardwareTests Step = "HARDWARE_TESTS"
	StepRelease       Step = "RELEASE"
)

// Availability says whether a step may be asked for now; Reason says why not (empty:
// allowed). Permissions are not considered: they belong to the caller.
type Availability struct {
	Step   Step
	Reason string
}

// Steps says which steps the machine's state allows, by the rules the steps apply when
// asked (they read MAAS and Incus again then). rec is the machine's record (nil when it
// has none); member names the Incus member it is, or "".
func Steps(cur MAASMachine, rec *machines.Record, member string) []Availability {
	memberWhy := func(step string) string {
		if member == "" {
			return ""
		}
		return memberRefusal(member, step)
	}
	first := func(reasons ...string) string {
		for _, r := range reasons {
			if r != "" {
				return r
			}
		}
		return ""
	}
	if rec == nil {
		why := UnregisteredRefusal(cur.SystemID)
		return []Availability{{StepCommission, why}, {StepInstall, why}, {StepHardwareTests, why}, {StepRelease, why}}
	}
	install := ""
	switch {
	case member != "":
		install = fmt.Sprintf("%s is already an Incus member", member)
	default:
		install = installRefusal(rec, cur)
	}
	return []Availability{
		{StepCommission, first(memberWhy("commissioning"), commissionRefusal(cur))},
		{StepInstall, install},
		{StepHardwareTests, testRefusal(cur)},
		{StepRelease, memberWhy("releasing it")},
	}
}

// UnregisteredRefusal is why no MAAS step is taken on a machine Apelora has no record of.
func UnregisteredRefusal(systemID string) string {
	return fmt.Sprintf("MAAS machine %s has no machine record in Apelora: register it first (registerMachine with provisioner MAAS and this system id; a machine registers in any MAAS state), so that every step is in its history", systemID)
}

func memberRefusal(name, step string) string {
	return fmt.Sprintf("%s is an Incus member: %s would take it from under the cluster; remove the member first (removeMember)", name, step)
}

func commissionRefusal(cur MAASMachine) string {
	if !slices.Contains(commissionable, cur.Status) {
		return describe(cur) + ": MAAS commissions only New, Failed commissioning, Ready or Broken machines"
	}
	return ""
}

func installRefusal(rec *machines.Record, cur MAASMachine) string {
	switch {
	case rec.Provisioner != machines.MAAS:
		return fmt.Sprintf("%s is a MANUAL machine: Apelora cannot install it; install it by hand and approve its enrolment", rec.Name)
	case rec.HardwareUUID != "" && cur.HardwareUUID != rec.HardwareUUID:
		return fmt.Sprintf("MAAS machine %s reports hardware UUID %s, but %s was registered with %s: the machine was replaced or the record is wrong; check it before installing", cur.SystemID, apperr.Quote(cur.HardwareUUID), rec.Name, apperr.Quote(rec.HardwareUUID))
	case cur.Status != Ready && cur.Status != Allocated:
		return describe(cur) + ": install needs a Ready machine (commission it first) or one already allocated"
	}
	return ""
}

func testRefusal(cur MAASMachine) string {
	switch {
	case cur.Status == Allocated || cur.Status == Deployed:
		return describe(cur) + ": testing would disturb a machine allocated or in use; release it first"
	case !slices.Contains(testable, cur.Status):
		return describe(cur) + ": hardware tests run only on Ready, Broken or Failed testing machines"
	}
	return ""
}
