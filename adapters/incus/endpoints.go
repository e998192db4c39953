package incus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// A cluster reached through any of its members. Every member presents the cluster
// certificate (seen live on 6.0.4: the same fingerprint on each member's core address), so
// a client pinned to it may talk to any of them and Incus forwards what another member must
// answer. The client keeps the addresses it may use:
//
//   - the seeds: the configured URLs (APELORA_INCUS_URL, which may list several), kept as
//     a last resort;
//   - the members: each member's URL from the cluster's own member list, learned at start
//     (Learn) and from every member list the client reads (the API, drift and the worker
//     read it all the time; no call of its own, so upstream calls stay those of the
//     operations);
//   - the current one: the address that answered last, asked first (a member whose daemon
//     is still starting, answering "Server isn't ready yet" to its own requests, has not
//     answered).
//
// A call goes to the current address; when it cannot connect there (refused, no answer
// within the connect bound, a certificate that is not the cluster's, as a removed member
// presents its own), it tries the next address, whatever the method (the request was
// never sent). A GET that was sent but got no answer is tried at the next address too,
// while the call's bound leaves time; a write that got no answer is not (it may have been
// carried out). A member that left the cluster leaves the list with the next member list.
//
// One Client is one cluster: issue 27's registered clusters each get one, made from the
// cluster's record (its URL and pinned certificate) instead of the environment.

// endpoints are the addresses a client may reach its cluster through.
type endpoints struct {
	mu      sync.Mutex
	seeds   []string // configured, in order
	members []string // learned from the cluster's member list, sorted
	current string   // answered last; asked first
	// leaving is the URL of a member whose removal is being sent (Client.leave).
	leaving string
}

func newEndpoints(seeds []string) *endpoints {
	e := &endpoints{seeds: slices.Clone(seeds)}
	if len(seeds) > 0 {
		e.current = seeds[0]
	}
	return e
}

// order is the addresses to try for one call: the current one, then the other members
// (from the one after the current, so successive failures walk the list), then the seeds
// that are not members.
func (e *endpoints) order() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.members)+len(e.seeds)+1)
	add := func(u string) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	add(e.current)
	start := slices.Index(e.members, e.current) + 1
	for i := range e.members {
		add(e.members[(start+i)%len(e.members)])
	}
	for _, s := range e.seeds {
		add(s)
	}
	return out
}

// answered records that u answered: it is asked first from now on.
func (e *endpoints) answered(u string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.current = u
}

// failed records that u could not be reached: the next call starts at the next address.
func (e *endpoints) failed(u string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current != u {
		return
	}
	all := append(slices.Clone(e.members), e.seeds...)
	if i := slices.Index(all, u); i >= 0 && len(all) > 1 {
		e.current = all[(i+1)%len(all)]
	}
}

// learn replaces the member addresses with urls (the members' URLs in the cluster's member
// list). It reports whether the current address is no member any more (it then moves to
// the first member): the caller drops its idle connections, which may still lead to a
// member that has left the cluster.
func (e *endpoints) learn(urls []string) (moved bool) {
	var ms []string
	for _, u := range urls {
		if u = strings.TrimRight(u, "/"); u != "" && !slices.Contains(ms, u) {
			ms = append(ms, u)
		}
	}
	slices.Sort(ms)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(ms) == 0 {
		return false
	}
	e.members = ms
	// A configured address stays first while it answers, even when the cluster lists its
	// members at other addresses (Apelora may reach them on another network than the one
	// they talk on); a learned one that is no member any more moves to a member.
	if !slices.Contains(ms, e.current) && !slices.Contains(e.seeds, e.current) {
		e.current = ms[0]
		return true
	}
	return false
}

// avoid moves the current address off u (to the next member), for a member about to leave.
func (e *endpoints) avoid(u string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current != strings.TrimRight(u, "/") {
		return
	}
	for _, m := range append(slices.Clone(e.members), e.seeds...) {
		if m != e.current {
			e.current = m
			return
		}
	}
}

func (e *endpoints) through() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

func (e *endpoints) known() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.members)
}

// connectError is a failure to open a connection to one address (dial or TLS handshake):
// the request was never sent, so any call may go on to the next address.
type connectError struct {
	addr    string
	err     error
	timeout time.Duration // non-zero: no connection within this bound
}

func (e *connectError) Error() string {
	if e.timeout > 0 {
		return fmt.Sprintf("no connection to %s within %s", e.addr, e.timeout)
	}
	return fmt.Sprintf("connect to %s: %v", e.addr, e.err)
}

func (e *connectError) Unwrap() error { return e.err }

// connectBound is how long connecting to one address (dial and TLS handshake) may take
// while other addresses are left to try: a third of the call's bound, so a member that
// accepts connections and never answers (a hung host) leaves time for two more.
func connectBound(callBound time.Duration, others bool) time.Duration {
	if !others {
		return callBound
	}
	return max(callBound/3, time.Second)
}

// dialTLS opens a pinned TLS connection to addr for the REST transport.
func (c *Client) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dialPinned(ctx, network, addr, c.tlsConfig())
}

// dialPinned opens a TLS connection with cfg to addr within the connect bound.
func (c *Client) dialPinned(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	bound := connectBound(c.timeout, len(c.eps.order()) > 1)
	dctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	fail := func(err error) error {
		ce := &connectError{addr: addr, err: err}
		if ctx.Err() == nil && dctx.Err() != nil {
			ce.timeout = bound
		}
		return ce
	}
	raw, err := c.dialer.DialContext(dctx, network, addr)
	if err != nil {
		return nil, fail(err)
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(dctx); err != nil {
		raw.Close()
		return nil, fail(err)
	}
	return tc, nil
}

// isConnectError reports whether err is a failure to connect to one address.
func isConnectError(err error) bool {
	var ce *connectError
	return errors.As(err, &ce)
}
