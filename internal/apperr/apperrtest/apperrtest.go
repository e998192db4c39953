// Package apperrtest checks, in tests, that refusals of input follow apperr's rules.
package apperrtest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apelora/fabric/internal/apperr"
)

// MaxMessage is the longest message a refusal of input may have: its own words and at
// most one apperr.Quote of the value (escaping can make a quote four times its bytes).
const MaxMessage = 4*apperr.QuoteLimit + 300

// CheckMessage fails unless msg is short, valid UTF-8 and one line.
func CheckMessage(t testing.TB, msg string) {
	t.Helper()
	if len(msg) > MaxMessage || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x00\r\n") {
		t.Fatalf("message %q is too long or unprintable", msg)
	}
}

// CheckRefusal fails unless err is INVALID_INPUT naming a field, with a message that
// CheckMessage accepts.
func CheckRefusal(t testing.TB, err error) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.InvalidInput || e.Field == "" {
		t.Fatalf("refusal %v is not INVALID_INPUT with a field", err)
	}
	CheckMessage(t, e.Message)
}
