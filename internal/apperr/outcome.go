package apperr

import "errors"

// A call that ends with an error is either refused or failed, one rule wherever it is
// said (the audit trail's REFUSED and FAILED, the console's and apeloractl's bulk
// results):
//
//   - refused: the server said no before changing anything: the caller's input, its
//     permission, a plan that changed since it was shown, the state of what it names (not
//     found, already exists, busy, not possible now), or the request itself (too large,
//     too many tries). Asking again unchanged gets the same answer.
//   - failed: it was tried and did not complete: Incus, MAAS or the database did not
//     answer (UNAVAILABLE), or the server failed (INTERNAL). Worth retrying.
//
// Which code is which is web/console/src/lib/bulk-outcomes.json, the one source: `go
// generate ./...` writes it into outcomes_gen.go (internal/apperr/gen), and the console reads the
// file itself.

// Refusal reports whether an error with code is a refusal (else it is a failure). A code
// the table does not know is a failure.
func Refusal(code Code) bool { return refusals[code] }

// IsRefusal reports whether err is a refusal: an *Error whose code is one. Anything else
// (an error that is not an administrator's, which is INTERNAL) is a failure.
func IsRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e) && Refusal(e.Code)
}
