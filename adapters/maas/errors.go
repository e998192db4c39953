package maas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Sentinel errors. Every *APIError matches exactly one of the status
// sentinels through errors.Is, so callers never compare status codes.
var (
	ErrUnauthorized = errors.New("MAAS rejected the API key")
	ErrForbidden    = errors.New("MAAS refused the request for this user")
	ErrNotFound     = errors.New("MAAS does not know this object")
	ErrConflict     = errors.New("MAAS refused the request in the machine's current state")
	ErrBadRequest   = errors.New("MAAS refused the request as invalid")
	ErrUnavailable  = errors.New("MAAS is unavailable")
	ErrServer       = errors.New("MAAS failed internally")
	// ErrPowerNotQueryable: the machine's power type (typically "manual")
	// has no controller MAAS can ask, so its power state cannot be known.
	ErrPowerNotQueryable = errors.New("MAAS cannot query this machine's power state")
	// ErrResponseTooLarge: the body exceeded Config.MaxResponseBytes.
	ErrResponseTooLarge = errors.New("MAAS response exceeds the configured size limit")
)

// APIError is a non-2xx answer from MAAS. It names the request by method,
// URL path and op only: never the query values, headers or key.
type APIError struct {
	Method     string
	Path       string // URL path, e.g. /MAAS/api/2.0/machines/k7qpwx/
	Op         string // MAAS operation, "" for plain reads
	StatusCode int
	// Message is MAAS's own text. JSON form errors are flattened to
	// "field: msg; field: msg" ("__all__" messages carry no field name).
	Message string
	// Fields holds the form errors MAAS returned as JSON, if any.
	Fields map[string][]string
	// RetryAfter is MAAS's Retry-After, zero when absent.
	RetryAfter time.Duration

	kind error // one of the sentinels
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "MAAS %s %s", e.Method, e.Path)
	if e.Op != "" {
		fmt.Fprintf(&b, " (op=%s)", e.Op)
	}
	fmt.Fprintf(&b, ": %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if h := e.hint(); h != "" {
		b.WriteString(" (")
		b.WriteString(h)
		b.WriteString(")")
	}
	return b.String()
}

// hint says what an administrator can do next.
func (e *APIError) hint() string {
	switch e.kind {
	case ErrUnauthorized:
		return "check the configured MAAS API key; generate a new one with `maas apikey --generate --username=<user>` if it was revoked"
	case ErrForbidden:
		return "the MAAS user behind the API key lacks permission for this, or the machine is locked in MAAS"
	case ErrNotFound:
		return "check the system ID; the machine may have been deleted from MAAS"
	case ErrConflict:
		return "wait for the machine to reach a state that allows this, then retry"
	case ErrPowerNotQueryable:
		return "the machine's power type has no controller MAAS can query; check its power state by hand or configure a power driver in MAAS"
	case ErrUnavailable:
		return "MAAS or its rack controller is unreachable; retry later"
	}
	return ""
}

// Is matches the sentinel for the status code; a power-state refusal is
// also a bad request.
func (e *APIError) Is(target error) bool {
	return e.kind == target || (e.kind == ErrPowerNotQueryable && target == ErrBadRequest)
}

// Unwrap lets errors.Is reach the sentinel also through wrappers.
func (e *APIError) Unwrap() error { return e.kind }

func kindFor(status int) error {
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status == http.StatusForbidden:
		return ErrForbidden
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout, status == http.StatusBadGateway:
		return ErrUnavailable
	case status >= 400 && status < 500:
		return ErrBadRequest
	default:
		return ErrServer
	}
}

// maxMessage bounds how much of a MAAS error body goes into an error: a 500
// can carry a whole traceback.
const maxMessage = 1024

// messageFrom turns an error body into a one-line message. For 401s MAAS's
// text is replaced by a fixed reason: piston's "Invalid signature. Expected
// signature base string: …" carries, for PLAINTEXT, the server's expected
// "&<token secret>", and "Invalid access token: …" echoes the token key.
func messageFrom(status int, contentType string, body []byte, creds credentials) (string, map[string][]string) {
	if status == http.StatusUnauthorized {
		return unauthorizedReason(string(body)), nil
	}
	text := strings.TrimSpace(string(body))
	var fields map[string][]string
	if strings.HasPrefix(text, "{") && (strings.Contains(contentType, "json") || json.Valid(body)) {
		if err := json.Unmarshal(body, &fields); err == nil && len(fields) > 0 {
			text = flattenFieldErrors(fields)
		} else {
			fields = nil
		}
	}
	text = strings.Join(strings.Fields(text), " ") // one line for logs
	text = redactCredentials(text, creds)
	if len(text) > maxMessage {
		text = text[:maxMessage] + "…"
	}
	return text, fields
}

func flattenFieldErrors(fields map[string][]string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	// __all__ first, then fields in a stable order.
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "__all__") != (keys[j] == "__all__") {
			return keys[i] == "__all__"
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		for _, msg := range fields[k] {
			if k == "__all__" {
				parts = append(parts, msg)
			} else {
				parts = append(parts, k+": "+msg)
			}
		}
	}
	return strings.Join(parts, "; ")
}

func unauthorizedReason(body string) string {
	switch {
	case strings.Contains(body, "Invalid API key"):
		return "invalid API key (unknown consumer key)"
	case strings.Contains(body, "Invalid access token"):
		return "invalid access token (unknown or revoked token key)"
	case strings.Contains(body, "Invalid signature"):
		return "invalid signature (wrong token secret)"
	case strings.Contains(body, "Expired timestamp"):
		return "expired timestamp (check this host's clock against MAAS)"
	case strings.Contains(body, "Nonce already used"):
		return "nonce already used (replayed request)"
	default:
		return "authorization refused"
	}
}

// redactCredentials removes any part of our own key that MAAS echoed back.
func redactCredentials(s string, c credentials) string {
	for _, p := range []string{c.tokenSecret, c.tokenKey, c.consumerKey} {
		if p != "" {
			s = strings.ReplaceAll(s, p, "[redacted]")
		}
	}
	return s
}

// RequestError is a failure to get any answer from MAAS (network, TLS,
// timeout, oversized or undecodable response).
type RequestError struct {
	Method string
	Path   string
	Op     string
	Err    error
}

func (e *RequestError) Error() string {
	op := ""
	if e.Op != "" {
		op = " (op=" + e.Op + ")"
	}
	return fmt.Sprintf("MAAS %s %s%s: %v", e.Method, e.Path, op, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// TimeoutError is a call that got no answer within its bound (Config.RequestTimeout or
// PowerQueryTimeout, retries included). It matches context.DeadlineExceeded.
type TimeoutError struct{ After time.Duration }

func (e *TimeoutError) Error() string { return fmt.Sprintf("MAAS did not answer within %s", e.After) }

// Is makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
