package provisioning

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr/apperrtest"
)

// FuzzMAASNames: test names, series and system ids the rules accept are what MAAS takes
// (one comma-separated list, a series name, a system id); refusals are INVALID_INPUT with
// a short message.
func FuzzMAASNames(f *testing.F) {
	f.Add("smartctl-validate", "noble", "abc123")
	f.Add("a,b", "ubuntu/noble", "ABC")
	f.Add(strings.Repeat("t", 5000), "../x\x00", strings.Repeat("0", 5000))
	f.Fuzz(func(t *testing.T, test, series, systemID string) {
		if err := ValidateTests("tests", []string{test, test + "2"}); err == nil {
			if strings.ContainsAny(test, ", \t\r\n\x00") || test == "" {
				t.Fatalf("accepted test name %q", test)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
		if err := ValidateSeries(series); err == nil {
			if strings.Count(series, "/") > 1 || len(series) > 61 || strings.Trim(series, "abcdefghijklmnopqrstuvwxyz0123456789./") != "" {
				t.Fatalf("accepted series %q", series)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
		if err := validateSystemID(systemID); err == nil {
			if len(systemID) < 4 || len(systemID) > 16 || strings.Trim(systemID, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
				t.Fatalf("accepted system id %q", systemID)
			}
		} else {
			apperrtest.CheckRefusal(t, err)
		}
	})
}
