package provisioning

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/machines"
)

func TestStepsSayWhatTheStateAllowsAndWhy(t *testing.T) {
	rec := &machines.Record{Name: "node-a", Provisioner: machines.MAAS, MAASSystemID: "aaaa01", HardwareUUID: "u-1"}
	manual := &machines.Record{Name: "node-m", Provisioner: machines.Manual}
	m := func(s Status, name string) MAASMachine {
		return MAASMachine{SystemID: "aaaa01", Hostname: "node-a", Status: s, StatusName: name, HardwareUUID: "u-1"}
	}
	why := func(av []Availability) map[Step]string {
		out := map[Step]string{}
		for _, a := range av {
			out[a.Step] = a.Reason
		}
		return out
	}
	for _, c := range []struct {
		name   string
		cur    MAASMachine
		rec    *machines.Record
		member string
		want   map[Step]string // step → substring of the reason, "" for allowed
	}{
		{"ready and registered", m(Ready, "Ready"), rec, "", map[Step]string{StepCommission: "", StepInstall: "", StepHardwareTests: "", StepRelease: ""}},
		{"discovered", m(Ready, "Ready"), nil, "", map[Step]string{StepCommission: "register it first", StepInstall: "register it first", StepHardwareTests: "register it first", StepRelease: "register it first"}},
		{"discovered new", m(New, "New"), nil, "", map[Step]string{StepCommission: "register it first", StepInstall: "register it first", StepHardwareTests: "register it first", StepRelease: "register it first"}},
		{"registered new, no UUID yet", MAASMachine{SystemID: "aaaa01", Status: New, StatusName: "New"}, &machines.Record{Name: "node-n", Provisioner: machines.MAAS, MAASSystemID: "aaaa01"}, "",
			map[Step]string{StepCommission: "", StepInstall: "install needs a Ready machine"}},
		{"deployed member", m(Deployed, "Deployed"), rec, "node-a", map[Step]string{
			StepCommission: "is an Incus member", StepInstall: "already an Incus member", StepHardwareTests: "release it first", StepRelease: "remove the member first"}},
		{"failed testing", m(FailedTesting, "Failed testing"), rec, "", map[Step]string{StepCommission: "commissions only", StepInstall: "install needs a Ready machine", StepHardwareTests: ""}},
		{"new", m(New, "New"), rec, "", map[Step]string{StepCommission: "", StepHardwareTests: "only on Ready, Broken or Failed testing"}},
		{"manual record", m(Ready, "Ready"), manual, "", map[Step]string{StepInstall: "MANUAL machine"}},
		{"replaced hardware", MAASMachine{SystemID: "aaaa01", Status: Ready, StatusName: "Ready", HardwareUUID: "u-2"}, rec, "", map[Step]string{StepInstall: "reports hardware UUID"}},
	} {
		got := why(Steps(c.cur, c.rec, c.member))
		if len(got) != 4 {
			t.Errorf("%s: %d steps, want 4", c.name, len(got))
		}
		for step, want := range c.want {
			if want == "" && got[step] != "" || !strings.Contains(got[step], want) {
				t.Errorf("%s: %s: reason %q, want %q", c.name, step, got[step], want)
			}
		}
	}
}
