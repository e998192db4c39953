package maas

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParseAPIKey(t *testing.T) {
	c, err := parseAPIKey(" Fq2LmN8xRt4vBc7KpZ:Wd3sHj9QeA6yUo1GiT:r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya\n")
	if err != nil || c.consumerKey != "Fq2LmN8xRt4vBc7KpZ" || c.tokenKey != "Wd3sHj9QeA6yUo1GiT" || c.tokenSecret != "r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya" {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"", "a", "a:b", "a:b:c:d", ":b:c", "a::c", "a:b:", "a:b c:d", "a:b:c\x00"} {
		_, err := parseAPIKey(bad)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "consumer_key:token_key:token_secret") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestAPIRoot(t *testing.T) {
	for in, want := range map[string]string{
		"https://maas.example:5240/MAAS":  "https://maas.example:5240/MAAS/api/2.0/",
		"https://maas.example:5240/MAAS/": "https://maas.example:5240/MAAS/api/2.0/",
		"http://127.0.0.1:5240/MAAS":      "http://127.0.0.1:5240/MAAS/api/2.0/",
		"http://[::1]:5240/MAAS":          "http://[::1]:5240/MAAS/api/2.0/",
	} {
		u, err := apiRoot(in)
		if err != nil || u.String() != want {
			t.Errorf("%s: %v %v", in, u, err)
		}
	}
	for _, bad := range []string{"", "maas.example", "ftp://maas/MAAS", "https://user:pw@maas/MAAS", "https://maas/MAAS?x=1", "http://0.0.0.0/MAAS", "http://[::ffff:10.0.0.1]/MAAS"} {
		if _, err := apiRoot(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q accepted: %v", bad, err)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: error shows the URL password: %v", bad, err)
		}
	}
	if !isLoopbackIP("::ffff:127.0.0.9") || isLoopbackIP("localhost") {
		t.Fatal("loopback detection")
	}
}

func TestPlaintextSignature(t *testing.T) {
	got, err := plaintextSigner{}.Sign("r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya", "ignored base string")
	if err != nil || got != "&r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya" {
		t.Fatalf("%q %v", got, err)
	}
	if got, _ := (plaintextSigner{consumerSecret: "a b"}).Sign("c&d", ""); got != "a%20b&c%26d" {
		t.Fatalf("escaping: %q", got)
	}
	if (plaintextSigner{}).Name() != "PLAINTEXT" {
		t.Fatal("name")
	}
}

func TestMessageFrom(t *testing.T) {
	creds := credentials{consumerKey: "ck", tokenKey: "tk", tokenSecret: "sekrit"}
	msg, fields := messageFrom(http.StatusBadRequest, "application/json",
		[]byte(`{"testing_scripts": ["Select a valid choice."], "__all__": ["Not now."]}`), creds)
	if msg != "Not now.; testing_scripts: Select a valid choice." || len(fields) != 2 {
		t.Fatalf("%q %v", msg, fields)
	}
	msg, _ = messageFrom(http.StatusConflict, "text/plain", []byte("Can't deploy\n  a machine sekrit"), creds)
	if msg != "Can't deploy a machine [redacted]" {
		t.Fatalf("%q", msg)
	}
	msg, _ = messageFrom(http.StatusUnauthorized, "text/html", []byte("Authorization Error: 'Invalid signature. Expected signature base string: &realsecret'"), creds)
	if strings.Contains(msg, "realsecret") || !strings.Contains(msg, "invalid signature") {
		t.Fatalf("%q", msg)
	}
	long := strings.Repeat("x", 5000)
	if msg, _ = messageFrom(500, "text/plain", []byte(long), creds); len(msg) > maxMessage+4 {
		t.Fatalf("message not bounded: %d", len(msg))
	}
}

func TestStatusLabels(t *testing.T) {
	if StatusFailedReleasing.String() != "Releasing failed" || StatusFailedReleasing.FilterName() != "failed_releasing" ||
		StatusFailedTesting.String() != "Failed testing" || Status(23).Valid() {
		t.Fatal("status labels")
	}
	if ScriptStatusUnknown.String() != "Unknown" || ScriptStatusDegraded.String() != "Degraded" ||
		ScriptStatusFailedApplyingNetconf.String() != "Failed to apply custom network configuration" {
		t.Fatal("script labels")
	}
}

func TestDecodeTolerantOfNulls(t *testing.T) {
	var w wireMachine
	err := json.Unmarshal([]byte(`{"system_id":"k7qpwx","status":1,"zone":null,"pool":null,"domain":null,
		"hardware_uuid":null,"owner":null,"architecture":null,"status_message":null,"hardware_info":null,
		"power_state":"","cpu_count":0,"memory":0,"storage":0.0}`), &w)
	if err != nil {
		t.Fatal(err)
	}
	m := w.machine()
	if m.Zone != "" || m.HardwareUUID != "" || m.Owner != "" || m.PowerState != PowerUnknown ||
		m.TestingStatus != ScriptStatusUnknown || m.CommissioningStatus != ScriptStatusUnknown || m.Status != StatusCommissioning {
		t.Fatalf("%+v", m)
	}
}
