package lifecycle

import "testing"

func TestDerive(t *testing.T) {
	cases := []struct {
		name     string
		f        Facts
		want     Phase
		warnings []WarningCode
	}{
		{"record only", Facts{HasRecord: true, IncusKnown: true}, Registered, nil},
		{"pending token", Facts{HasRecord: true, IncusKnown: true, PendingJoinToken: true}, AwaitingJoin, nil},
		{"held member", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual"}, Held, nil},
		{"held member with an old admission", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual", AdmissionRecorded: true}, Held, nil},
		{"admitted", Facts{HasRecord: true, IncusKnown: true, IsMember: true, AdmissionRecorded: true}, Admitted, nil},
		{"scheduler all is no hold", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "all", AdmissionRecorded: true}, Admitted, nil},
		{"joined without hold", Facts{HasRecord: true, IncusKnown: true, IsMember: true}, Unheld, []WarningCode{JoinedWithoutHold}},
		{"group scheduling unadmitted", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "group"}, Unheld, []WarningCode{JoinedWithoutHold, ScheduledByGroup}},
		{"member without record", Facts{IncusKnown: true, IsMember: true}, Unregistered, nil},
		{"member without record, pending token ignored", Facts{IncusKnown: true, IsMember: true, PendingJoinToken: true}, Unregistered, nil},
		{"member and token: membership wins", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual", PendingJoinToken: true}, Held, nil},
		{"pending tokens unknown", Facts{HasRecord: true, IncusKnown: true, PendingProblem: "a member hangs"}, Registered, []WarningCode{JoinTokensUnknown}},
		{"discovered in MAAS", Facts{IncusKnown: true, InMAAS: true}, Discovered, nil},
		{"MAAS machine that joined without a record", Facts{IncusKnown: true, InMAAS: true, IsMember: true}, Unregistered, nil},
		{"incus unknown", Facts{HasRecord: true, IncusProblem: "not configured"}, Unknown, []WarningCode{IncusUnavailable}},
	}
	for _, c := range cases {
		got, warnings := Derive(c.f)
		if got != c.want {
			t.Errorf("%s: phase %s, want %s", c.name, got, c.want)
		}
		var codes []WarningCode
		for _, w := range warnings {
			codes = append(codes, w.Code)
			if w.Message == "" {
				t.Errorf("%s: warning %s has no message", c.name, w.Code)
			}
		}
		if len(codes) != len(c.warnings) {
			t.Errorf("%s: warnings %v, want %v", c.name, codes, c.warnings)
			continue
		}
		for i := range codes {
			if codes[i] != c.warnings[i] {
				t.Errorf("%s: warnings %v, want %v", c.name, codes, c.warnings)
			}
		}
	}
}

func TestTheLatestMembershipStepDecidesAdmission(t *testing.T) {
	latest := map[string]string{"a": StepAdmitMember, "b": StepRemoveMember, "c": StepApproveEnrolment, "d": StepInstallOperatingSystem}
	got := AdmittedMachines(latest)
	if len(got) != 1 || !got["a"] {
		t.Fatalf("admitted %v, want only a", got)
	}
	if Admits("") {
		t.Fatal("a machine with no membership step counts as admitted")
	}
}
