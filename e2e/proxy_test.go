package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/producttest"
)

// Behind a reverse proxy the sign-in limit keys on the real client, not on the proxy: a
// client that exhausts its tries through the proxy is refused while another client
// through the same proxy still signs in; X-Forwarded-For is believed only from the
// configured proxy, so a client talking to the server directly cannot spend another's
// tries, nor escape its own, by forging the header. The proxy is Go's reverse proxy, which
// appends the peer's address to X-Forwarded-For as HAProxy's `option forwardfor` does
// (deploy/ha/haproxy.cfg); it connects from 127.0.0.90, the one trusted address.
func TestSignInLimitKeysOnTheClientBehindATrustedProxy(t *testing.T) {
	parallel(t)
	const proxyAddr = "127.0.0.90"
	trusted, err := server.ParseTrustedProxies(proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	e := producttest.Start(t, producttest.WithAuthFailureLimit(server.DefaultAuthFailureLimit), producttest.WithTrustedProxies(trusted))
	from := func(ip string) *http.Transport {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Transport{DialContext: d.DialContext}
	}
	backend, err := url.Parse(e.Base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.Transport = from(proxyAddr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxySrv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go proxySrv.Serve(ln)
	t.Cleanup(func() { proxySrv.Close() })
	viaProxy, direct := "http://"+ln.Addr().String(), e.Base

	signIn := func(base, ip, token, forwardedFor string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/session", strings.NewReader(`{"token":"`+token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		resp, err := (&http.Client{Transport: from(ip), Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Error.Code
	}
	burst := server.DefaultAuthFailureLimit.Burst
	exhaust := func(base, ip, forwardedFor string) {
		t.Helper()
		for i := range burst {
			if status, code := signIn(base, ip, fmt.Sprintf("apl_guess%03d", i), forwardedFor); code != "UNAUTHENTICATED" {
				t.Fatalf("%s: wrong token %d within the burst: %d %s", ip, i, status, code)
			}
		}
		if status, code := signIn(base, ip, "apl_one_more", forwardedFor); status != http.StatusTooManyRequests || code != "RATE_LIMITED" {
			t.Fatalf("%s: past the burst: %d %s, want 429 RATE_LIMITED", ip, status, code)
		}
	}
	// Through the proxy: 127.0.0.81 (which also tries to pass for 127.0.0.82, in vain: the
	// proxy appends its real address) runs out; 127.0.0.82 has all its tries.
	exhaust(viaProxy, "127.0.0.81", "127.0.0.82")
	if status, code := signIn(viaProxy, "127.0.0.82", "apl_neighbour", ""); code != "UNAUTHENTICATED" {
		t.Fatalf("another client behind the same proxy: %d %s, want a plain refusal (not limited)", status, code)
	}
	// Directly, from a peer that is not the proxy: the header is ignored. 127.0.0.83 claims
	// to be 127.0.0.84 and runs out of its own tries; 127.0.0.84 is untouched, and naming a
	// fresh address in the header does not give 127.0.0.83 new ones.
	exhaust(direct, "127.0.0.83", "127.0.0.84")
	if status, code := signIn(direct, "127.0.0.84", "apl_victim", ""); code != "UNAUTHENTICATED" {
		t.Fatalf("the address a forged X-Forwarded-For named: %d %s, want not limited", status, code)
	}
	if status, _ := signIn(direct, "127.0.0.83", "apl_again", "198.51.100.7"); status != http.StatusTooManyRequests {
		t.Fatalf("a forged X-Forwarded-For escaped the limit: %d", status)
	}
	// The audit names the clients, never the proxy.
	var proxyRows int64
	if err := e.DB.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE details->>'address' = $1`, proxyAddr).Scan(&proxyRows); err != nil {
		t.Fatal(err)
	}
	var clientRows int64
	if err := e.DB.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM audit_events WHERE details->>'address' = '127.0.0.81'`).Scan(&clientRows); err != nil {
		t.Fatal(err)
	}
	if proxyRows != 0 || clientRows == 0 {
		t.Fatalf("audit rows naming the proxy: %d, the limited client: %d", proxyRows, clientRows)
	}
}
