package incus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors. An *Error matches the one that fits its HTTP status with errors.Is.
var (
	// ErrNotFound matches a 404 from Incus (unknown member, pool, operation, target…) and
	// the client's own "nothing to act on" answers, such as revoking a token that is not
	// pending.
	ErrNotFound = errors.New("not found")
	// ErrConflict matches a 409 from Incus, for example a certificate that is already trusted.
	ErrConflict = errors.New("conflict")
	// ErrPreconditionFailed matches a 412 from Incus: the ETag sent with If-Match is stale;
	// read the object again and retry.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrForbidden matches a 403 from Incus: the client certificate is not trusted, or not
	// allowed to do this.
	ErrForbidden = errors.New("forbidden")

	// ErrNotConfigured is returned by ConfigFromEnv and New when no Incus endpoint is
	// configured at all.
	ErrNotConfigured = errors.New("no Incus endpoint configured: set APELORA_INCUS_URL, " +
		"APELORA_INCUS_CLIENT_CERT, APELORA_INCUS_CLIENT_KEY and APELORA_INCUS_SERVER_CERT, " +
		"or APELORA_INCUS_SOCKET")
	// ErrCertificateMismatch is returned (wrapped) when the server presents a certificate
	// whose fingerprint is not the pinned cluster certificate.
	ErrCertificateMismatch = errors.New("Incus server certificate does not match the pinned cluster certificate")
	// ErrUntrusted is returned (wrapped) by ServerInfo when Incus answers but does not trust
	// the client certificate.
	ErrUntrusted = errors.New("Incus does not trust the client certificate")
	// ErrWaitTimeout is returned (wrapped) when waiting for an operation ran out of time
	// before the operation finished. The operation itself goes on.
	ErrWaitTimeout = errors.New("operation still running after the wait timeout")
	// ErrNoJoinToken is returned (wrapped) by RevokeJoinToken when no join token is pending
	// for the name. It matches ErrNotFound.
	ErrNoJoinToken = fmt.Errorf("no pending join token: %w", ErrNotFound)
)

// Error is an error answer from Incus.
type Error struct {
	// Status is Incus's error_code, which equals the HTTP status except for a timed-out
	// operation wait (HTTP 200 with an error body carrying 500).
	Status int
	// Message is Incus's error text.
	Message string
	// Method and Path name the request (Path includes the query string).
	Method string
	Path   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("incus %s %s: %s (%d %s)", e.Method, e.Path, e.Message, e.Status, http.StatusText(e.Status))
}

// Is makes errors.Is(err, ErrNotFound) and friends work on *Error.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrPreconditionFailed:
		return e.Status == http.StatusPreconditionFailed
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	}
	return false
}

// IsNotFound reports whether err says the object (member, pool, operation, pending join
// token…) does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// NotReadyMessage is what Incus answers (500) for a member whose daemon is still starting,
// and, on 6.0.4 (seen live), what another member answers for a request it should forward
// to a member it cannot reach (a dead one, after "Unable to connect" and "Missing event
// connection with target cluster member"; one back from a power cycle, for seconds).
const NotReadyMessage = "Server isn't ready yet"

// noEventConnection is what 6.0.4 answers first for a request to forward to a member it
// has lost (seen live): the same condition, seen from the forwarding member.
const noEventConnection = "Missing event connection with target cluster member"

// IsNotReady reports whether Incus answered NotReadyMessage, or that it has no connection
// to the member it should forward to.
func IsNotReady(err error) bool {
	var ie *Error
	return errors.As(err, &ie) && (ie.Message == NotReadyMessage || ie.Message == noEventConnection)
}

// IsConflict reports whether Incus answered 409 Conflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsPreconditionFailed reports whether Incus refused a write because the ETag was stale.
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }

// IsForbidden reports whether Incus answered 403 (client certificate not trusted or not allowed).
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// OperationError reports an operation that finished without success (Failure or Cancelled).
type OperationError struct {
	ID          string
	Description string
	Status      string // "Failure" or "Cancelled"
	StatusCode  int    // 400 or 401
	Err         string // Incus's message for a failure
}

func (e *OperationError) Error() string {
	msg := fmt.Sprintf("incus operation %s (%s) ended %s", e.ID, e.Description, e.Status)
	if e.Err != "" {
		msg += ": " + e.Err
	}
	return msg
}

// IsCancelled reports whether err is an operation that ended Cancelled (a join token that
// was used, revoked, replaced or expired ends this way too).
func IsCancelled(err error) bool {
	var oe *OperationError
	return errors.As(err, &oe) && oe.StatusCode == StatusCancelled
}

// TimeoutError is a call that got no answer within its bound (Config.Timeout). It matches
// context.DeadlineExceeded.
type TimeoutError struct{ After time.Duration }

func (e *TimeoutError) Error() string { return fmt.Sprintf("no answer within %s", e.After) }

// Is makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// PinError is a member that presented another certificate than the pinned cluster
// certificate (or none). It matches ErrCertificateMismatch.
type PinError struct {
	Presented string // its fingerprint; "" when it sent none
	Pinned    string // the first pinned fingerprint
	Source    string // what holds the pinned certificate (APELORA_INCUS_SERVER_CERT, a cluster's record)
}

func (e *PinError) Error() string {
	if e.Presented == "" {
		return fmt.Sprintf("%v: the server sent no certificate", ErrCertificateMismatch)
	}
	return fmt.Sprintf("%v: server presented %s, pinned %s; check %s", ErrCertificateMismatch, e.Presented, e.Pinned, e.Source)
}

// Is makes errors.Is(err, ErrCertificateMismatch) hold.
func (e *PinError) Is(target error) bool { return target == ErrCertificateMismatch }
