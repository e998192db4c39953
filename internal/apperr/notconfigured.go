package apperr

import "errors"

// Upstream is a system the server may be started without: the ports to it are then nil,
// and whatever needs one says so with NotConfigured.
type Upstream string

const (
	Incus Upstream = "Incus"
	MAAS  Upstream = "MAAS"
)

// configure says, for each upstream, what an administrator sets to configure it.
var configure = map[Upstream]string{
	Incus: "set APELORA_INCUS_URL, APELORA_INCUS_CLIENT_CERT, APELORA_INCUS_CLIENT_KEY and APELORA_INCUS_SERVER_CERT (or APELORA_INCUS_SOCKET) and restart",
	MAAS:  "set APELORA_MAAS_URL and APELORA_MAAS_API_KEY (and APELORA_MAAS_CA_FILE for a private CA) and restart",
}

// errNotConfigured marks every NotConfigured error for IsNotConfigured.
var errNotConfigured = errors.New("the server was started without it")

// NotConfigured is the one way to say that a step needs an upstream the server was
// started without: FAILED_PRECONDITION, "<upstream> is not configured: <what to set>".
// The convention behind it: a port to an upstream that is not configured is nil (app
// leaves it unset), and code that can go without the upstream checks for nil; code
// that cannot returns this.
func NotConfigured(u Upstream) *Error {
	return &Error{Code: FailedPrecondition, Message: string(u) + " is not configured: " + configure[u], Cause: errNotConfigured}
}

// IsNotConfigured reports whether err is (or wraps) a NotConfigured error.
func IsNotConfigured(err error) bool { return errors.Is(err, errNotConfigured) }
