package sim

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// oauthWindow is piston's timestamp threshold: older requests are refused,
// future timestamps pass.
const oauthWindow = 300

var requiredOAuth = []string{
	"oauth_consumer_key", "oauth_token", "oauth_signature",
	"oauth_signature_method", "oauth_timestamp", "oauth_nonce",
}

// apiError is an answer other than 2xx.
type apiError struct {
	status      int
	contentType string
	body        string
	header      map[string]string
}

func textError(status int, body string) *apiError {
	return &apiError{status: status, contentType: "text/plain; charset=utf-8", body: body}
}

// formError is MAAS's JSON form validation error.
func formError(field string, msgs ...string) *apiError {
	b, _ := json.Marshal(map[string][]string{field: msgs})
	return &apiError{status: http.StatusBadRequest, contentType: "application/json; charset=utf-8", body: string(b)}
}

func oauthUnauthorized(msg string) *apiError {
	// Piston leaves the content type at Django's default and adds the
	// challenge header.
	return &apiError{
		status: http.StatusUnauthorized, contentType: "text/html; charset=utf-8",
		body:   "Authorization Error: " + msg,
		header: map[string]string{"WWW-Authenticate": `OAuth realm="OAuth"`},
	}
}

// splitOAuthHeader parses the header the way piston's _split_header does:
// split on ",", skip pieces mentioning realm, strip quotes, percent-decode.
func splitOAuthHeader(h string) map[string]string {
	h = strings.TrimPrefix(h, "OAuth ")
	out := map[string]string{}
	for _, piece := range strings.Split(h, ",") {
		if strings.Contains(piece, "realm") {
			continue
		}
		piece = strings.TrimSpace(piece)
		k, v, ok := strings.Cut(piece, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		if dec, err := url.PathUnescape(v); err == nil {
			v = dec
		}
		out[k] = v
	}
	return out
}

// authenticate returns the caller, or nil for an unsigned request. params
// are the request's query and form values (OAuth may travel there too).
func (s *Server) authenticate(r *http.Request, params url.Values) (*userKey, *apiError) {
	var p map[string]string
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "OAuth ") {
		p = splitOAuthHeader(h)
	} else {
		p = map[string]string{}
		for k, vs := range params {
			if strings.HasPrefix(k, "oauth_") && len(vs) > 0 {
				p[k] = vs[0]
			}
		}
		if len(p) == 0 {
			return nil, nil
		}
	}
	if v, ok := p["oauth_version"]; ok && v != "1.0" {
		return nil, oauthUnauthorized(fmt.Sprintf("'OAuth version %s not supported.'", v))
	}
	var missing []string
	for _, k := range requiredOAuth {
		if p[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, textError(http.StatusBadRequest, "Bad Request: Missing OAuth parameters: "+strings.Join(missing, ", "))
	}
	ts, err := strconv.ParseInt(p["oauth_timestamp"], 10, 64)
	if err != nil {
		return nil, textError(http.StatusBadRequest, "Bad Request: Invalid oauth_timestamp: not an integer")
	}
	if m := p["oauth_signature_method"]; m != "PLAINTEXT" {
		return nil, oauthUnauthorized(fmt.Sprintf("'Signature method %s not supported try one of the following: PLAINTEXT'", m))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[p["oauth_consumer_key"]]
	if !ok {
		return nil, oauthUnauthorized("Invalid API key.")
	}
	if p["oauth_token"] != u.token {
		return nil, oauthUnauthorized(fmt.Sprintf("'Invalid access token: %s'", p["oauth_token"]))
	}
	now := s.authNow()
	if now.Unix()-ts > oauthWindow {
		return nil, oauthUnauthorized(fmt.Sprintf("'Expired timestamp: given %d and now %d has a greater difference than threshold %d'", ts, now.Unix(), oauthWindow))
	}
	nonceKey := u.consumer + "\x00" + u.token + "\x00" + p["oauth_nonce"]
	if _, used := s.nonces[nonceKey]; used {
		return nil, oauthUnauthorized(fmt.Sprintf("'Nonce already used: %s'", p["oauth_nonce"]))
	}
	// Piston stores the nonce before checking the signature.
	s.nonces[nonceKey] = now
	s.pruneNonces(now)

	want := "&" + percentEncode(u.secret) // consumer secret is always ""
	if subtle.ConstantTimeCompare([]byte(p["oauth_signature"]), []byte(want)) != 1 {
		// Faithful to piston (python-oauth PLAINTEXT): the message carries
		// the expected "base string", which for PLAINTEXT is the correct
		// signature, i.e. the token secret. Clients must never surface it.
		return nil, oauthUnauthorized(fmt.Sprintf("'Invalid signature. Expected signature base string: %s'", want))
	}
	return u, nil
}

// pruneNonces forgets nonces whose timestamps can no longer pass the window
// (MAAS's nonces_cleanup does the same job).
func (s *Server) pruneNonces(now time.Time) {
	if now.Sub(s.lastPrune) < time.Minute {
		return
	}
	s.lastPrune = now
	for k, t := range s.nonces {
		if now.Sub(t) > 2*oauthWindow*time.Second {
			delete(s.nonces, k)
		}
	}
}

func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
