package lifecycle

import "testing"

func TestDerive(t *testing.T) {
	mark7, admission7 := AdmissionMark(7, "req-7"), &Admission{ID: 7}
	cases := []struct {
		name     string
		f        Facts
		want     Phase
		warnings []WarningCode
	}{
		{"record only", Facts{HasRecord: true, IncusKnown: true}, Registered, nil},
		{"pending token", Facts{HasRecord: true, IncusKnown: true, PendingJoinToken: true}, AwaitingJoin, nil},
		{"held member", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual"}, Held, nil},
		{"held member with an old admission", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual", Marked: true, Mark: mark7, Admission: admission7}, Held, nil},
		{"admitted", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Marked: true, Mark: mark7, Admission: admission7}, Admitted, nil},
		{"scheduler all is no hold", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "all", Marked: true, Mark: mark7, Admission: admission7}, Admitted, nil},
		{"recorded but not marked", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Admission: admission7}, Unheld, []WarningCode{JoinedWithoutHold}},
		{"carried over, not marked yet", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Admission: &Admission{ID: 7, CarriedOver: true}}, Admitted, nil},
		{"carried over, marked", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Marked: true, Mark: mark7, Admission: &Admission{ID: 7, CarriedOver: true}}, Admitted, nil},
		{"mark without record", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Marked: true, Mark: mark7}, Unheld, []WarningCode{AdmissionNotRecorded}},
		{"mark of another admission", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Marked: true, Mark: AdmissionMark(6, "r"), Admission: admission7}, Unheld, []WarningCode{AdmissionNotRecorded}},
		{"mark written by hand", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Marked: true, Mark: "", Admission: admission7}, Unheld, []WarningCode{AdmissionNotRecorded}},
		{"mark with group scheduling", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "group", Marked: true, Mark: "x"}, Unheld, []WarningCode{AdmissionNotRecorded, ScheduledByGroup}},
		{"held member carrying a stray mark", Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: "manual", Marked: true, Mark: "x"}, Held, nil},
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

func TestAdmissionMarkNamesItsRecord(t *testing.T) {
	mark := AdmissionMark(42, "01JREQ")
	if mark != "admission 42, request 01JREQ" {
		t.Fatalf("mark %q", mark)
	}
	if got := MarkedAdmission(mark); got != 42 {
		t.Fatalf("mark %q names admission %d, want 42", mark, got)
	}
	for _, hostile := range []string{"", "yes", "admission", "admission x, request y", "admission -3, request y", "admission 0", "ADMISSION 4"} {
		if got := MarkedAdmission(hostile); got != 0 {
			t.Errorf("mark %q names admission %d, want none", hostile, got)
		}
	}
}
