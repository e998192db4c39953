// Package incus is Apelora's small, typed REST client for the parts of the Incus API
// (https://linuxcontainers.org/incus/docs/main/rest-api/) that the control plane uses:
// server and cluster facts, members, join tokens, storage pools, networks, and a few
// helpers that tests and the product need (empty instances, trusted certificates).
//
// It uses only the standard library and its own types; it deliberately does not import
// github.com/lxc/incus.
//
// # Transport
//
// The client talks either HTTPS to one cluster member, presenting Apelora's admin client
// certificate and pinning the cluster certificate by its SHA-256 fingerprint (every member
// presents the same cluster certificate, whose subject alternative names usually do not name
// the member's address, so normal host-name verification cannot be used), or to a local
// daemon over its unix socket (every caller on the socket is a full administrator).
// Every call has a deadline (Config.Timeout unless the caller's context is shorter).
//
// # Errors
//
// Incus answers failures with an error envelope; the client turns it into *Error, which
// carries the HTTP status, Incus's message and the method and path of the request, and
// matches ErrNotFound, ErrConflict, ErrPreconditionFailed and ErrForbidden with errors.Is
// (see IsNotFound and friends). No error ever carries a join token, a secret, a
// certificate key or request headers.
//
// # Join tokens
//
// IssueJoinToken returns a JoinToken whose String, GoString, Format, LogValue and JSON form
// never include the secret or the encoded token; the encoded token is only available from
// JoinToken.Reveal. PendingJoinTokens reads only the member name, the expiry and the
// operation id of pending tokens.
//
// # Hazard
//
// On Incus 6.0.4 and 6.0.5 a PATCH /1.0 that is rejected because of a cluster-wide key
// wipes the calling member's local configuration (see the team's Incus reference,
// section 0). This package sends exactly one: SetPlacementScriptlet, whose only value is
// the placement guard's fixed scriptlet (tested against a live cluster) or "", and which
// re-reads GET /1.0 after a rejection and names the settings lost. Do not add another
// without validating every value first and re-reading GET /1.0 afterwards.
package incus
