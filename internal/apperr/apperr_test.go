package apperr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	cases := map[string]string{
		"node-1":                      `"node-1"`,
		"a\x00b":                      `"a\x00b"`,
		"\xff":                        `"\xff"`,
		strings.Repeat("a", 8<<20):    `"` + strings.Repeat("a", QuoteLimit) + `"… (8388608 bytes)`,
		strings.Repeat("é", 40):       `"` + strings.Repeat("é", 32) + `"… (80 bytes)`,
		"x" + strings.Repeat("é", 40): `"x` + strings.Repeat("é", 31) + `"… (81 bytes)`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%.20q) = %.80s, want %.80s", in, got, want)
		}
	}
}

// FuzzQuote: a quoted value is short, printable, and starts with the value's start.
func FuzzQuote(f *testing.F) {
	f.Add("node-1")
	f.Add(`a"… (3 bytes)`)
	f.Add("a\x00b\xff\u202e" + strings.Repeat("x", 100))
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if len(q) > 4*QuoteLimit+32 || !utf8.ValidString(q) || strings.ContainsAny(q, "\x00\n\r\x1b") {
			t.Fatalf("Quote(%q) = %q", s, q)
		}
		quoted := q
		if i := strings.LastIndex(q, `"… (`); i >= 0 && strings.HasSuffix(q, " bytes)") {
			quoted = q[:i+1]
		}
		un, err := strconv.Unquote(quoted)
		if err != nil || !strings.HasPrefix(s, un) || len(un) > QuoteLimit {
			t.Fatalf("Quote(%q) = %q: not a quoted prefix (%v)", s, q, err)
		}
	})
}

func TestNotConfiguredIsOneKindWithWhatToSet(t *testing.T) {
	for u, setting := range map[Upstream]string{Incus: "APELORA_INCUS_URL", MAAS: "APELORA_MAAS_URL"} {
		e := NotConfigured(u)
		if e.Code != FailedPrecondition || !strings.HasPrefix(e.Message, string(u)+" is not configured: set ") || !strings.Contains(e.Message, setting) {
			t.Errorf("%s: %+v", u, e)
		}
		if !IsNotConfigured(e) || !IsNotConfigured(fmt.Errorf("approve: %w", e)) || !IsNotConfigured(Wrap(e, Unavailable, "x")) {
			t.Errorf("%s: not recognised through wrapping", u)
		}
	}
	if IsNotConfigured(New(FailedPrecondition, "Incus is not configured")) {
		t.Error("a look-alike message is not the kind")
	}
}

// Every code the API answers with is a refusal or a failure by the one table
// (bulk-outcomes.json): the caller's input, permission, plan and the state of what it
// names are refusals; an upstream or the database not answering, or the server failing,
// are failures.
func TestEveryCodeIsRefusedOrFailedByTheOneTable(t *testing.T) {
	for _, c := range Codes {
		if _, ok := refusals[c]; !ok {
			t.Errorf("web/console/src/lib/bulk-outcomes.json does not say whether %s is refused or failed", c)
		}
	}
	for _, c := range []Code{InvalidInput, Forbidden, Unauthenticated, PlanChanged, FailedPrecondition, NotFound, AlreadyExists, Busy} {
		if !Refusal(c) {
			t.Errorf("%s is not a refusal", c)
		}
	}
	for _, c := range []Code{Unavailable, Internal, "SOMETHING_NEW"} {
		if Refusal(c) {
			t.Errorf("%s is a refusal", c)
		}
	}
	if IsRefusal(errors.New("plain")) || !IsRefusal(fmt.Errorf("wrapped: %w", New(Busy, "busy"))) {
		t.Error("IsRefusal: a plain error is a failure, a wrapped refusal a refusal")
	}
}
