package main

// The errors apeloractl prints, and its exit statuses: a usage error (2), an API error as
// CODE: message (3 for UNAUTHENTICATED, 4 for FORBIDDEN, else 1), a server it cannot reach
// as UNAVAILABLE.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/Khan/genqlient/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// errNoToken is what a request without a token gets.
var errNoToken = &apiError{errs: []codedMessage{{"UNAUTHENTICATED", "APELORA_TOKEN is not set: create a token with `apelora identity create` and export it, or sign in through single sign-on with `apeloractl login`"}}}

// noToken answers every request with errNoToken (apeloractl has no token to send).
type noToken struct{}

func (noToken) RoundTrip(*http.Request) (*http.Response, error) { return nil, errNoToken }

// usageError is a command line apeloractl cannot run.
type usageError string

func (e usageError) Error() string { return "usage: " + string(e) }

// codedMessage is one error of the API: its extensions.code and message.
type codedMessage struct{ code, message string }

// apiError is what the API refused, one CODE: message line per error.
type apiError struct{ errs []codedMessage }

func (e *apiError) Error() string {
	lines := make([]string, len(e.errs))
	for i, m := range e.errs {
		lines[i] = m.code + ": " + m.message
	}
	return strings.Join(lines, "\n")
}

// explain turns the client's errors (a GraphQL error list, or an HTTP error carrying one)
// into an *apiError, so that they print as CODE: message and never as gqlparser's
// "input:3:2: …".
func explain(base string, err error) error {
	var list gqlerror.List
	var httpErr *graphql.HTTPError
	var api *apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &api):
		return api
	case unreachable(base, err) != nil:
		return unreachable(base, err)
	case errors.As(err, &list):
	case errors.As(err, &httpErr):
		list = httpErr.Response.Errors
		if len(list) == 0 || list[0].Extensions["code"] == nil {
			msg := fmt.Sprintf("the server answered HTTP %d", httpErr.StatusCode)
			if len(list) > 0 {
				msg += ": " + truncate(list[0].Message, 200)
			}
			return &apiError{errs: []codedMessage{{"UNAVAILABLE", msg}}}
		}
	default:
		return err
	}
	out := &apiError{}
	for _, e := range list {
		code, _ := e.Extensions["code"].(string)
		if code == "" {
			code = "INTERNAL"
		}
		out.errs = append(out.errs, codedMessage{code, e.Message})
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// The exit statuses, in the usage text and docs/api.md.
const (
	exitError           = 1
	exitUsage           = 2
	exitUnauthenticated = 3
	exitForbidden       = 4
)

func exitStatus(err error) int {
	var api *apiError
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &api):
		for _, e := range api.errs {
			switch e.code {
			case "UNAUTHENTICATED":
				return exitUnauthenticated
			case "FORBIDDEN":
				return exitForbidden
			}
		}
	}
	return exitError
}

// unreachable turns a request that reached no server (refused, no route, no such host,
// timed out, a TLS handshake that failed) into UNAVAILABLE, naming APELORA_URL and the
// cause; nil for any other error. A request cancelled by apeloractl itself (Ctrl-C) is
// not the server's fault.
func unreachable(base string, err error) *apiError {
	var uerr *url.Error
	if !errors.As(err, &uerr) || errors.Is(err, context.Canceled) {
		return nil
	}
	return &apiError{errs: []codedMessage{{"UNAVAILABLE", fmt.Sprintf("cannot reach APELORA_URL (%s: %s): is apelora serve running?", base, cause(uerr.Err))}}}
}

// cause is the words of the innermost reason a connection failed ("connection refused"),
// without Go's wrapping ("dial tcp 127.0.0.1:8080: connect: …").
func cause(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		return dns.Error()
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	return err.Error()
}
