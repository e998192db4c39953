// Package apperr carries errors meant for administrators: a stable code that clients can
// branch on, a message that says what is wrong and what to do next, and optionally the input
// field at fault. Anything that is not an *Error is an internal error and is never shown.
package apperr

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Code is the stable machine-readable kind of an error, returned in GraphQL
// `extensions.code` and in REST error bodies.
type Code string

const (
	Unauthenticated    Code = "UNAUTHENTICATED"
	Forbidden          Code = "FORBIDDEN"
	InvalidInput       Code = "INVALID_INPUT"
	NotFound           Code = "NOT_FOUND"
	AlreadyExists      Code = "ALREADY_EXISTS"
	Busy               Code = "BUSY"
	FailedPrecondition Code = "FAILED_PRECONDITION"
	Unavailable        Code = "UNAVAILABLE"
	Internal           Code = "INTERNAL"
	// RequestTooLarge is a request body over the server's limit (HTTP 413).
	RequestTooLarge Code = "REQUEST_TOO_LARGE"
	// RateLimited is a client address that failed authentication too often (HTTP 429).
	RateLimited Code = "RATE_LIMITED"
	// PlanChanged is a change confirmed with a plan hash that is no longer its plan: the
	// plan shown went stale (another change, a member gone offline); nothing was changed.
	PlanChanged Code = "PLAN_CHANGED"
)

// Codes lists every code the API answers with, in the order docs/api.md documents them.
var Codes = []Code{Unauthenticated, Forbidden, InvalidInput, NotFound, AlreadyExists, Busy,
	FailedPrecondition, Unavailable, Internal, RequestTooLarge, RateLimited, PlanChanged}

// Error is an error an administrator can act on.
type Error struct {
	Code    Code
	Message string
	// Field names the input field at fault, for InvalidInput.
	Field string
	// Details are small, secret-free facts returned beside the message (for example the
	// admission checks that failed).
	Details map[string]any
	// Cause is kept for the server log and errors.Is; it is never shown to clients.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an error with the given code and message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with the given code and message that keeps cause for the log.
func Wrap(cause error, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// Invalid reports bad input in the named field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: InvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// CodeOf returns the code of err, or Internal when err carries none.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }

// PublicMessage is what a client (and the audit trail) may see of err: the message of an
// administrator's error, and a pointer to the server log for anything else.
func PublicMessage(err error) string {
	if e, ok := As(err); ok && e.Code != Internal {
		return e.Message
	}
	return "internal error: the server log has the details"
}

// Text is err's message for an administrator when it is one of ours, and its plain text
// otherwise: for messages that quote a cause inside another message.
func Text(err error) string {
	if e, ok := As(err); ok {
		return e.Message
	}
	return err.Error()
}

// QuoteLimit is how many bytes of a value an error message quotes.
const QuoteLimit = 64

// Quote returns s quoted for an error message: at most QuoteLimit bytes of it, with NUL,
// control characters and invalid UTF-8 escaped, and its length when it was cut. Every
// message that echoes a caller's value uses it, so a megabyte value is never sent back
// (or stored in the audit trail) whole.
func Quote(s string) string {
	if len(s) <= QuoteLimit {
		return strconv.Quote(s)
	}
	cut := QuoteLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut == 0 {
		cut = QuoteLimit
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
