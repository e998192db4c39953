package maas_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestSignedRequestsAreAccepted(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	v, err := e.client.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != "3.6.2" || len(v.Capabilities) == 0 || v.Capabilities[len(v.Capabilities)-1] != "authenticate-api" {
		t.Fatalf("version = %+v", v)
	}
	u, err := e.client.WhoAmI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "apelora" || !u.IsSuperuser || !u.IsLocal {
		t.Fatalf("whoami = %+v", u)
	}
	// Two reads in a row: each carries a fresh nonce, or the second would be
	// refused as a replay.
	for i := 0; i < 2; i++ {
		if _, err := e.client.Machine(ctx, "k7qpwx"); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	for _, r := range e.sim.Requests() {
		if r.Path != "/MAAS/api/2.0/version/" && r.User != "apelora" {
			t.Fatalf("request %+v was not authenticated as apelora", r)
		}
	}
}

func TestWrongCredentialsAreRejected(t *testing.T) {
	e := newEnv(t)
	consumer, token, secret := splitKey(e.key)
	other := sim.NewAPIKey()
	oc, ot, osec := splitKey(other)
	cases := []struct {
		name, key, reason string
	}{
		{"wrong secret", consumer + ":" + token + ":" + osec, "invalid signature"},
		{"wrong consumer", oc + ":" + token + ":" + secret, "invalid API key"},
		{"wrong token", consumer + ":" + ot + ":" + secret, "invalid access token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.clientWith(t, func(c *maas.Config) { c.APIKey = tc.key })
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.WhoAmI(ctx)
			ae := apiError(t, err, http.StatusUnauthorized)
			if !errors.Is(err, maas.ErrUnauthorized) {
				t.Fatalf("not ErrUnauthorized: %v", err)
			}
			if !strings.Contains(ae.Message, tc.reason) {
				t.Fatalf("message %q, want it to contain %q", ae.Message, tc.reason)
			}
			// MAAS echoes the token key (wrong token) and, for PLAINTEXT,
			// its own expected signature, i.e. the real secret (wrong
			// secret). Neither may reach the error.
			for _, part := range []string{consumer, token, secret, oc, ot, osec} {
				if strings.Contains(err.Error(), part) {
					t.Fatalf("error %q contains a key part", err)
				}
			}
		})
	}
	if n := e.sim.CountRequests(http.MethodGet, "whoami"); n != 3 {
		t.Fatalf("simulator saw %d whoami requests, want 3 (401s are not retried)", n)
	}
}

// The simulator itself must answer as MAAS does; these checks use raw,
// hand-signed requests.
func TestOAuthChecksAsMAAS(t *testing.T) {
	e := newEnv(t)
	consumer, token, secret := splitKey(e.key)
	url := e.ep.BaseURL + "/api/2.0/users/?op=whoami"
	now := time.Now().Unix()

	t.Run("percent-encoded and literal ampersand both verify", func(t *testing.T) {
		for i, sig := range []string{"%26" + secret, "&" + secret} {
			code, body := rawGet(t, url, plaintextHeader(consumer, token, sig, fmt.Sprintf("lit-%d", i), now))
			if code != http.StatusOK || !strings.Contains(body, `"username":"apelora"`) {
				t.Fatalf("signature %d: %d %s", i, code, body)
			}
		}
	})
	t.Run("nonce reuse", func(t *testing.T) {
		h := plaintextHeader(consumer, token, "%26"+secret, "nonce-once", now)
		if code, body := rawGet(t, url, h); code != http.StatusOK {
			t.Fatalf("first use: %d %s", code, body)
		}
		code, body := rawGet(t, url, h)
		if code != http.StatusUnauthorized || body != "Authorization Error: 'Nonce already used: nonce-once'" {
			t.Fatalf("replay: %d %q", code, body)
		}
	})
	t.Run("expired timestamp", func(t *testing.T) {
		code, body := rawGet(t, url, plaintextHeader(consumer, token, "%26"+secret, "old", now-301))
		if code != http.StatusUnauthorized || !strings.HasPrefix(body, "Authorization Error: 'Expired timestamp: given ") {
			t.Fatalf("%d %q", code, body)
		}
		// Future timestamps pass, as in piston.
		if code, body := rawGet(t, url, plaintextHeader(consumer, token, "%26"+secret, "future", now+3600)); code != http.StatusOK {
			t.Fatalf("future timestamp: %d %q", code, body)
		}
	})
	t.Run("unknown consumer and token", func(t *testing.T) {
		code, body := rawGet(t, url, plaintextHeader("nosuchconsumer", token, "%26"+secret, "c1", now))
		if code != http.StatusUnauthorized || body != "Authorization Error: Invalid API key." {
			t.Fatalf("%d %q", code, body)
		}
		code, body = rawGet(t, url, plaintextHeader(consumer, "nosuchtoken", "%26"+secret, "t1", now))
		if code != http.StatusUnauthorized || body != "Authorization Error: 'Invalid access token: nosuchtoken'" {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("bad signature", func(t *testing.T) {
		code, body := rawGet(t, url, plaintextHeader(consumer, token, "%26wrong", "s1", now))
		if code != http.StatusUnauthorized || !strings.HasPrefix(body, "Authorization Error: 'Invalid signature.") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("missing parameter", func(t *testing.T) {
		h := strings.Replace(plaintextHeader(consumer, token, "%26"+secret, "m1", now), `oauth_nonce="m1", `, "", 1)
		code, body := rawGet(t, url, h)
		if code != http.StatusBadRequest || !strings.Contains(body, "oauth_nonce") {
			t.Fatalf("%d %q", code, body)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		if code, body := rawGet(t, url, ""); code != http.StatusUnauthorized || body != "Forbidden" {
			t.Fatalf("whoami: %d %q", code, body)
		}
		if code, body := rawGet(t, e.ep.BaseURL+"/api/2.0/machines/", ""); code != http.StatusBadRequest ||
			body != "Unrecognised signature: method=GET op=None" {
			t.Fatalf("machines: %d %q", code, body)
		}
		if code, _ := rawGet(t, e.ep.BaseURL+"/api/2.0/version/", ""); code != http.StatusOK {
			t.Fatalf("version: %d", code)
		}
	})
}
