package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/admission"
)

// A blocked report ends with the words admit's refusal (and admit -dry-run) uses:
// admission.BlockedBy, one wording for BLOCKED.
func TestBlockedReportSaysWhatAdmitSays(t *testing.T) {
	check := func(name, title string, res client.CheckResult, msg string) client.AdmissionReportFieldsChecksAdmissionCheck {
		return client.AdmissionReportFieldsChecksAdmissionCheck{AdmissionCheckFields: client.AdmissionCheckFields{Name: name, Title: title, Result: res, Message: msg}}
	}
	r := &client.AdmissionReportFields{Verdict: client.AdmissionVerdictBlocked, Checks: []client.AdmissionReportFieldsChecksAdmissionCheck{
		check("online", "Member online", client.CheckResultPass, "ok"),
		check("kernel", "Kernel", client.CheckResultFail, "kernel 6.1 is older than 6.12"),
	}}
	var out bytes.Buffer
	if err := (&cli{out: &out}).printReport(r); err != nil {
		t.Fatal(err)
	}
	want := admission.BlockedBy([]admission.Check{{Title: "Kernel", Message: "kernel 6.1 is older than 6.12"}})
	if !strings.HasSuffix(strings.TrimSpace(out.String()), want) || want != "admission blocked by Kernel: kernel 6.1 is older than 6.12" {
		t.Fatalf("report:\n%s\nwant it to end with %q", out.String(), want)
	}
	r.Verdict = client.AdmissionVerdictAdmissible
	out.Reset()
	if err := (&cli{out: &out}).printReport(r); err != nil || strings.Contains(out.String(), "blocked") {
		t.Fatalf("an admissible report: %v\n%s", err, out.String())
	}
}
