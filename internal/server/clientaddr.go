package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the reverse proxies (HAProxy in front of the API replicas) whose
// X-Forwarded-For is believed. Behind a proxy every request's TCP peer is the proxy: keyed
// on it, every client would share one budget of failed sign-ins, and one bad client would
// lock all the others out. From any other peer the header is the client's own words and is
// ignored, so a client cannot pick the address it is limited by.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a comma-separated list of CIDRs or single addresses
// (APELORA_TRUSTED_PROXIES).
func ParseTrustedProxies(v string) (TrustedProxies, error) {
	var out TrustedProxies
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR such as 10.0.0.0/24 or 192.0.2.10", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (t TrustedProxies) trusts(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxForwardedHops bounds how many X-Forwarded-For entries are looked at: a chain of
// trusted proxies is short, and a client's own entries further left are never believed.
const maxForwardedHops = 16

// client is the address a request comes from: its TCP peer, or, when that peer is a
// trusted proxy, the nearest X-Forwarded-For entry (from the right, the one the proxy
// appended) that is not a trusted proxy itself. An entry that is not an address ends the
// walk at the last trusted hop: a proxy never writes one, so it is the client's.
func (t TrustedProxies) client(r *http.Request) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	a := peer.Addr().Unmap()
	if len(t) == 0 || !t.trusts(a) {
		return a, true
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i, n := len(hops)-1, 0; i >= 0 && n < maxForwardedHops; i, n = i-1, n+1 {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		a = h.Unmap()
		if !t.trusts(a) {
			break
		}
	}
	return a, true
}

// clientAddress is the key a request is limited by: its client's IP (see client), or the
// /64 of an IPv6 one (a single host is often given a whole /64).
func (t TrustedProxies) clientAddress(r *http.Request) string {
	a, ok := t.client(r)
	if !ok {
		return r.RemoteAddr
	}
	if a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}
