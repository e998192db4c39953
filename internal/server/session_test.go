package server

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSameOriginRefusesWhatAnotherSiteCouldSend(t *testing.T) {
	req := func(method, ct string, h map[string]string) *http.Request {
		r := httptest.NewRequest(method, "http://apelora.example:8080/graphql", strings.NewReader("{}"))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return r
	}
	origins := []string{"console.example:*"}
	for _, c := range []struct {
		name string
		r    *http.Request
		ok   bool
	}{
		{"same-origin JSON", req("POST", "application/json; charset=utf-8", map[string]string{"Origin": "http://apelora.example:8080", "Sec-Fetch-Site": "same-origin"}), true},
		{"JSON without browser headers", req("POST", "application/json", nil), true},
		{"allowed extra origin", req("POST", "application/json", map[string]string{"Origin": "https://console.example:443"}), true},
		{"GET read", req("GET", "", map[string]string{"Sec-Fetch-Site": "same-origin"}), true},
		{"DELETE sign-out", req("DELETE", "", map[string]string{"Origin": "http://apelora.example:8080"}), true},
		{"text/plain", req("POST", "text/plain", nil), false},
		{"form", req("POST", "application/x-www-form-urlencoded", nil), false},
		{"multipart", req("POST", "multipart/form-data; boundary=x", nil), false},
		{"no content type", req("POST", "", nil), false},
		{"cross-site", req("POST", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}), false},
		{"same-site", req("GET", "", map[string]string{"Sec-Fetch-Site": "same-site"}), false},
		{"foreign origin", req("POST", "application/json", map[string]string{"Origin": "http://evil.example"}), false},
		{"null origin", req("POST", "application/json", map[string]string{"Origin": "null"}), false},
		{"look-alike origin", req("POST", "application/json", map[string]string{"Origin": "http://apelora.example:8080.evil.example"}), false},
	} {
		err := sameOrigin(c.r, origins)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: error quotes too much: %d bytes", c.name, len(err.Error()))
		}
	}
}

func TestSessionCookieIsSecureUnderTLS(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	plain := httptest.NewRequest("POST", "http://a/api/v1/session", nil)
	tlsReq := httptest.NewRequest("POST", "https://a/api/v1/session", nil)
	tlsReq.TLS = &tls.ConnectionState{}
	for _, c := range []struct {
		name   string
		api    sessionAPI
		r      *http.Request
		secure bool
	}{
		{"plain http", sessionAPI{}, plain, false},
		{"TLS", sessionAPI{}, tlsReq, true},
		{"https public URL (TLS ends in front)", sessionAPI{secure: true}, plain, true},
	} {
		ck := c.api.cookie(c.r, "aps_x", exp)
		if ck.Secure != c.secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge < 3590 {
			t.Errorf("%s: %+v", c.name, ck)
		}
	}
	if del := (&sessionAPI{}).cookie(plain, "", time.Time{}); del.MaxAge >= 0 {
		t.Errorf("sign-out cookie does not delete: %+v", del)
	}
}
