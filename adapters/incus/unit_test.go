package incus

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeRT answers requests from a function, recording them; no network involved.
type fakeRT struct {
	reqs   []*http.Request
	bodies []string
	answer func(r *http.Request) (int, http.Header, string)
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
	}
	f.reqs = append(f.reqs, r)
	f.bodies = append(f.bodies, body)
	status, hdr, text := f.answer(r)
	if hdr == nil {
		hdr = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: hdr, Body: io.NopCloser(strings.NewReader(text)), Request: r}, nil
}

func fakeClient(answer func(r *http.Request) (int, http.Header, string)) (*Client, *fakeRT) {
	rt := &fakeRT{answer: answer}
	return &Client{base: "http://incus", endpoint: "fake", hc: &http.Client{Transport: rt}, timeout: 5 * time.Second}, rt
}

func syncBody(meta string) string {
	return `{"type":"sync","status":"Success","status_code":200,"operation":"","error_code":0,"error":"","metadata":` + meta + `}`
}

func errorBody(code int, msg string) string {
	b, _ := json.Marshal(msg)
	return fmt.Sprintf(`{"type":"error","status":"","status_code":0,"operation":"","error_code":%d,"error":%s,"metadata":null}`, code, b)
}

func TestDecodeAnswer(t *testing.T) {
	var m Member
	res := result{}
	err := decodeAnswer("GET", "/1.0/cluster/members/m2", 200,
		[]byte(syncBody(`{"server_name":"m2","roles":["database"],"groups":["default"],"status":"Online"}`)), &res, &m)
	if err != nil || m.ServerName != "m2" || m.Status != "Online" || res.typ != "sync" {
		t.Fatalf("sync: %v %+v %+v", err, m, res)
	}

	res = result{}
	var op Operation
	async := `{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/abc","error_code":0,"error":"","metadata":{"id":"abc","class":"task","status":"Running","status_code":103}}`
	if err := decodeAnswer("POST", "/1.0/instances", 202, []byte(async), &res, &op); err != nil {
		t.Fatal(err)
	}
	if res.typ != "async" || operationID(res.operation) != "abc" || op.StatusCode != StatusRunning {
		t.Fatalf("async: %+v %+v", res, op)
	}

	err = decodeAnswer("GET", "/1.0/cluster/members/nodeX", 404, []byte(errorBody(404, "Cluster member not found")), &result{}, nil)
	var ie *Error
	if !errors.As(err, &ie) || ie.Status != 404 || ie.Message != "Cluster member not found" || ie.Method != "GET" || ie.Path != "/1.0/cluster/members/nodeX" {
		t.Fatalf("error envelope: %#v", err)
	}
	if !IsNotFound(err) || IsConflict(err) || IsPreconditionFailed(err) || IsForbidden(err) {
		t.Fatalf("helpers disagree for 404: %v", err)
	}
	if got := err.Error(); got != "incus GET /1.0/cluster/members/nodeX: Cluster member not found (404 Not Found)" {
		t.Fatalf("message: %q", got)
	}
	for code, is := range map[int]func(error) bool{409: IsConflict, 412: IsPreconditionFailed, 403: IsForbidden} {
		err := decodeAnswer("PUT", "/x", code, []byte(errorBody(code, "nope")), &result{}, nil)
		if !is(err) || IsNotFound(err) {
			t.Errorf("%d: helper does not match %v", code, err)
		}
	}

	// Not an Incus envelope.
	err = decodeAnswer("GET", "/1.0", 502, []byte("<html>bad gateway</html>"), &result{}, nil)
	if !errors.As(err, &ie) || ie.Status != 502 || !strings.Contains(ie.Message, "bad gateway") {
		t.Fatalf("non-envelope error: %v", err)
	}
	if err := decodeAnswer("GET", "/1.0", 200, []byte("hello"), &result{}, nil); err == nil || !strings.Contains(err.Error(), "not an Incus response") {
		t.Fatalf("non-envelope 200: %v", err)
	}
	// Empty metadata is fine.
	if err := decodeAnswer("DELETE", "/1.0/operations/x", 200, []byte(syncBody(`{}`)), &result{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := decodeAnswer("GET", "/1.0", 200, []byte(syncBody(`null`)), &result{}, &m); err != nil {
		t.Fatal(err)
	}
}

func TestWaitOperationDecidesFromBody(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		check  func(t *testing.T, op Operation, err error)
	}{
		{"success", 200, syncBody(`{"id":"op1","status":"Success","status_code":200}`), func(t *testing.T, op Operation, err error) {
			if err != nil || op.StatusCode != 200 || !op.Final() {
				t.Fatalf("%v %+v", err, op)
			}
		}},
		{"timed out: HTTP 200 with error body", 200, errorBody(500, "context deadline exceeded"), func(t *testing.T, op Operation, err error) {
			if !errors.Is(err, ErrWaitTimeout) {
				t.Fatalf("want ErrWaitTimeout, got %v", err)
			}
			var ie *Error
			if !errors.As(err, &ie) || ie.Status != 500 {
				t.Fatalf("want the *Error inside: %v", err)
			}
		}},
		{"cancelled", 200, syncBody(`{"id":"op1","class":"token","status":"Cancelled","status_code":401}`), func(t *testing.T, op Operation, err error) {
			if !IsCancelled(err) || op.StatusCode != 401 {
				t.Fatalf("%v %+v", err, op)
			}
		}},
		{"failure", 200, syncBody(`{"id":"op1","description":"Creating instance","status":"Failure","status_code":400,"err":"disk full"}`), func(t *testing.T, op Operation, err error) {
			var oe *OperationError
			if !errors.As(err, &oe) || oe.Err != "disk full" || IsCancelled(err) || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("%v", err)
			}
		}},
		{"unknown id", 404, errorBody(404, "Operation not found"), func(t *testing.T, op Operation, err error) {
			if !IsNotFound(err) || errors.Is(err, ErrWaitTimeout) {
				t.Fatalf("%v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, rt := fakeClient(func(*http.Request) (int, http.Header, string) { return tc.status, nil, tc.body })
			op, err := c.WaitOperation(context.Background(), "op1", 1500*time.Millisecond)
			tc.check(t, op, err)
			if got := rt.reqs[0].URL.RequestURI(); got != "/1.0/operations/op1/wait?timeout=2" {
				t.Fatalf("wait URL %q", got)
			}
		})
	}
}

func TestRequestsShape(t *testing.T) {
	c, rt := fakeClient(func(r *http.Request) (int, http.Header, string) {
		h := http.Header{}
		h.Set("Etag", `"abc123"`)
		if r.Method == http.MethodGet {
			return 200, h, syncBody(`{"server_name":"m2","roles":["database-standby","event-hub"],"failure_domain":"rack1","description":"d","config":{"user.x":"1"},"groups":["default","g"]}`)
		}
		return 200, nil, syncBody(`{}`)
	})
	ctx := context.Background()
	m, etag, err := c.Member(ctx, "m2")
	if err != nil || etag != "abc123" {
		t.Fatalf("%v %q", err, etag)
	}
	put := m.Put()
	put.Config["scheduler.instance"] = "manual"
	if m.Config["scheduler.instance"] != "" {
		t.Fatal("Put must copy the config map")
	}
	if err := c.UpdateMember(ctx, "m2", put, etag); err != nil {
		t.Fatal(err)
	}
	r := rt.reqs[1]
	if r.Method != "PUT" || r.URL.Path != "/1.0/cluster/members/m2" || r.Header.Get("If-Match") != `"abc123"` {
		t.Fatalf("PUT %s %s If-Match %q", r.Method, r.URL, r.Header.Get("If-Match"))
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(rt.bodies[1]), &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"config":         map[string]any{"user.x": "1", "scheduler.instance": "manual"},
		"description":    "d",
		"roles":          []any{"database-standby", "event-hub"},
		"failure_domain": "rack1",
		"groups":         []any{"default", "g"},
	}
	if !reflect.DeepEqual(sent, want) {
		t.Fatalf("PUT body\n got %v\nwant %v", sent, want)
	}

	// Refused before sending.
	n := len(rt.reqs)
	if err := c.UpdateMember(ctx, "m2", put, ""); err == nil {
		t.Fatal("update without ETag must be refused")
	}
	bad := put
	bad.Groups = nil
	if err := c.UpdateMember(ctx, "m2", bad, etag); err == nil {
		t.Fatal("update without groups must be refused")
	}
	bad = put
	bad.FailureDomain = ""
	if err := c.UpdateMember(ctx, "m2", bad, etag); err == nil {
		t.Fatal("update without failure domain must be refused")
	}
	bad = m.Put()
	bad.Config["scheduler.instance"] = "sometimes"
	if err := c.UpdateMember(ctx, "m2", bad, etag); err == nil {
		t.Fatal("bad scheduler.instance must be refused")
	}
	if len(rt.reqs) != n {
		t.Fatal("refused updates must not reach Incus")
	}

	// Roles absent are sent as [], never null.
	empty := MemberPut{Groups: []string{"default"}, FailureDomain: "default"}
	if err := c.UpdateMember(ctx, "m3", empty, "e"); err != nil {
		t.Fatal(err)
	}
	if b := rt.bodies[len(rt.bodies)-1]; !strings.Contains(b, `"roles":[]`) || !strings.Contains(b, `"config":{}`) {
		t.Fatalf("body %s", b)
	}

	if err := c.DeleteMember(ctx, "m 3", true); err != nil {
		t.Fatal(err)
	}
	r = rt.reqs[len(rt.reqs)-1]
	if r.Method != "DELETE" || r.URL.RawQuery != "force=1" || r.URL.EscapedPath() != "/1.0/cluster/members/m%203" {
		t.Fatalf("DELETE %s", r.URL)
	}
	if err := c.DeleteMember(ctx, "m3", false); err != nil {
		t.Fatal(err)
	}
	if q := rt.reqs[len(rt.reqs)-1].URL.RawQuery; q != "" {
		t.Fatalf("unforced delete query %q", q)
	}
	if _, err := c.StoragePool(ctx, "local", "m2"); err != nil {
		t.Fatal(err)
	}
	if u := rt.reqs[len(rt.reqs)-1].URL.RequestURI(); u != "/1.0/storage-pools/local?target=m2" {
		t.Fatalf("pool URL %s", u)
	}
}

func TestTokenEncodingMatchesCLI(t *testing.T) {
	exp := time.Date(2026, 12, 2, 16, 57, 34, 742047123, time.UTC)
	got, err := encodeJoinToken(tokenJSON{
		ServerName:  "node3",
		Fingerprint: "22bc45",
		Addresses:   []string{"127.0.0.1:8443", "127.0.0.2:8443"},
		Secret:      "s3cr3t",
		ExpiresAt:   exp,
	})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"server_name":"node3","fingerprint":"22bc45","addresses":["127.0.0.1:8443","127.0.0.2:8443"],"secret":"s3cr3t","expires_at":"2026-12-02T16:57:34.742047123Z"}`
	if want := base64.StdEncoding.EncodeToString([]byte(wantJSON)); got != want {
		t.Fatalf("token\n got %s\nwant %s", got, want)
	}
	// Trailing zeros of the fraction are dropped, and an offset is kept, as time.Time's JSON does.
	got, _ = encodeJoinToken(tokenJSON{ServerName: "a", ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 500000000, time.FixedZone("", 3600))})
	raw, _ := base64.StdEncoding.DecodeString(got)
	if string(raw) != `{"server_name":"a","fingerprint":"","addresses":[],"secret":"","expires_at":"2026-01-02T03:04:05.5+01:00"}` {
		t.Fatalf("raw %s", raw)
	}
	if !strings.HasSuffix(base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)), "=") {
		t.Fatal("std encoding is padded")
	}

	tok, err := ParseJoinToken(base64.StdEncoding.EncodeToString([]byte(wantJSON)))
	if err != nil {
		t.Fatal(err)
	}
	if tok.ServerName != "node3" || tok.Fingerprint != "22bc45" || len(tok.Addresses) != 2 || !tok.ExpiresAt.Equal(exp) {
		t.Fatalf("parsed %+v", tok)
	}
	if tok.Reveal() != base64.StdEncoding.EncodeToString([]byte(wantJSON)) {
		t.Fatal("Reveal must return the encoded token")
	}
	for _, bad := range []string{"!!!", base64.StdEncoding.EncodeToString([]byte("[]")),
		base64.StdEncoding.EncodeToString([]byte(`{"server_name":"x","secret":"s3cr3t","fingerprint":"f"}`))} {
		_, err := ParseJoinToken(bad)
		if err == nil || strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseJoinToken(%q) = %v", bad, err)
		}
	}
}

func TestJoinTokenNeverPrintsSecret(t *testing.T) {
	enc, _ := encodeJoinToken(tokenJSON{ServerName: "node3", Fingerprint: "f", Addresses: []string{"a"}, Secret: "TOPSECRET", ExpiresAt: time.Now()})
	tok := JoinToken{ServerName: "node3", OperationID: "op-1", Fingerprint: "f", Addresses: []string{"a"}, ExpiresAt: time.Now(), reveal: sealToken(enc)}
	type holder struct {
		Tok JoinToken
		tok JoinToken
		Ptr *JoinToken
		ptr *JoinToken
	}
	h := holder{tok, tok, &tok, &tok}
	var outs []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		outs = append(outs, fmt.Sprintf(f, tok), fmt.Sprintf(f, &tok), fmt.Sprintf(f, h), fmt.Sprintf(f, &h),
			fmt.Sprintf(f, []JoinToken{tok}), fmt.Sprintf(f, map[string]JoinToken{"k": tok}))
	}
	outs = append(outs, fmt.Sprint(tok), fmt.Sprintln(tok, &tok), tok.String(), tok.GoString())
	var buf bytes.Buffer
	for _, hnd := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		l := slog.New(hnd)
		l.Info("issued", "token", tok, "ptr", &tok)
		l.Info("issued", slog.Any("token", tok))
	}
	outs = append(outs, buf.String())
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	secretParts := []string{"TOPSECRET", enc, enc[:20], base64.StdEncoding.EncodeToString([]byte("TOPSECRET"))}
	for _, o := range outs {
		for _, s := range secretParts {
			if strings.Contains(o, s) {
				t.Fatalf("output reveals the token: %s", o)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(tok), "node3") || !strings.Contains(buf.String(), "node3") {
		t.Fatalf("the safe description should name the member: %s / %s", fmt.Sprint(tok), buf.String())
	}
	if tok.Reveal() != enc {
		t.Fatal("Reveal")
	}
}

func TestPendingJoinTokensDecodesOnlyNameAndExpiry(t *testing.T) {
	list := syncBody(`{
	 "running":[
	  {"id":"t1","class":"token","status":"Running","status_code":103,"metadata":{"serverName":"node3","secret":"SECRET1","fingerprint":"f","addresses":["127.0.0.1:8443"],"expiresAt":"2026-12-02T16:57:34.742047123Z"}},
	  {"id":"c1","class":"token","status":"Running","status_code":103,"metadata":{"request":{"name":"x"},"secret":"SECRET2","expiresAt":"2026-12-02T16:57:34Z"}},
	  {"id":"w1","class":"task","status":"Running","status_code":103,"metadata":["odd"]},
	  {"id":"w2","class":"websocket","status":"Running","status_code":103,"metadata":"text"},
	  {"id":"a0","class":"token","status":"Running","status_code":103,"metadata":{"serverName":"alpha","secret":"SECRET3","expiresAt":"2026-12-03T00:00:00Z"}}
	 ],
	 "cancelled":[{"id":"t0","class":"token","status":"Cancelled","status_code":401,"metadata":{"serverName":"node3","secret":"SECRET4"}}]
	}`)
	c, rt := fakeClient(func(*http.Request) (int, http.Header, string) { return 200, nil, list })
	got, err := c.PendingJoinTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []PendingJoinToken{
		{ServerName: "alpha", ExpiresAt: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), OperationID: "a0"},
		{ServerName: "node3", ExpiresAt: time.Date(2026, 12, 2, 16, 57, 34, 742047123, time.UTC), OperationID: "t1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s := fmt.Sprintf("%#v", got); strings.Contains(s, "SECRET") {
		t.Fatal(s)
	}
	if rt.reqs[0].URL.RequestURI() != "/1.0/operations?recursion=1" {
		t.Fatal(rt.reqs[0].URL)
	}
	// The type carries nothing else.
	typ := reflect.TypeOf(PendingJoinToken{})
	if typ.NumField() != 3 {
		t.Fatalf("PendingJoinToken has %d fields", typ.NumField())
	}

	// Revoke deletes the operation found by name; no token is a typed not-found.
	c, rt = fakeClient(func(r *http.Request) (int, http.Header, string) {
		if r.Method == http.MethodDelete {
			return 200, nil, syncBody(`{}`)
		}
		return 200, nil, list
	})
	if err := c.RevokeJoinToken(context.Background(), "node3"); err != nil {
		t.Fatal(err)
	}
	if r := rt.reqs[1]; r.Method != "DELETE" || r.URL.Path != "/1.0/operations/t1" {
		t.Fatalf("%s %s", r.Method, r.URL)
	}
	err = c.RevokeJoinToken(context.Background(), "ghost")
	if !errors.Is(err, ErrNoJoinToken) || !IsNotFound(err) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("%v", err)
	}
}

func TestIssueJoinTokenBuildsToken(t *testing.T) {
	c, rt := fakeClient(func(r *http.Request) (int, http.Header, string) {
		return 202, nil, `{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/894e","error_code":0,"error":"","metadata":` +
			`{"id":"894e","class":"token","description":"Executing operation","status":"Running","status_code":103,"resources":{"cluster":null},"may_cancel":true,"err":"","location":"node1",` +
			`"metadata":{"serverName":"node3","secret":"abc123","fingerprint":"22bc45","addresses":["127.0.0.1:8443","127.0.0.2:8443"],"expiresAt":"2026-12-02T16:57:34.742047123Z"}}}`
	})
	tok, err := c.IssueJoinToken(context.Background(), "node3")
	if err != nil {
		t.Fatal(err)
	}
	if rt.reqs[0].Method != "POST" || rt.reqs[0].URL.Path != "/1.0/cluster/members" || rt.bodies[0] != `{"server_name":"node3"}` {
		t.Fatalf("%s %s %s", rt.reqs[0].Method, rt.reqs[0].URL, rt.bodies[0])
	}
	wantJSON := `{"server_name":"node3","fingerprint":"22bc45","addresses":["127.0.0.1:8443","127.0.0.2:8443"],"secret":"abc123","expires_at":"2026-12-02T16:57:34.742047123Z"}`
	if tok.Reveal() != base64.StdEncoding.EncodeToString([]byte(wantJSON)) || tok.OperationID != "894e" {
		t.Fatalf("token %s", tok)
	}
	if _, err := c.IssueJoinToken(context.Background(), "bad name!"); err == nil || len(rt.reqs) != 1 {
		t.Fatal("an invalid name must be refused before sending")
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	_, err := ConfigFromEnv(env())
	if !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("empty env: %v", err)
	}
	if (Config{}).Configured() {
		t.Fatal("zero config is not configured")
	}
	cfg, err := ConfigFromEnv(env(EnvSocket, "/var/lib/incus/unix.socket"))
	if err != nil || !cfg.UsesSocket() || !cfg.Configured() {
		t.Fatalf("socket: %v %+v", err, cfg)
	}
	cfg, err = ConfigFromEnv(env(EnvURL, "https://10.0.0.5:8443/", EnvClientCert, "c", EnvClientKey, "k", EnvServerCert, "s"))
	if err != nil || cfg.URL != "https://10.0.0.5:8443" || cfg.UsesSocket() {
		t.Fatalf("https: %v %+v", err, cfg)
	}
	_, err = ConfigFromEnv(env(EnvURL, "https://10.0.0.5:8443", EnvClientCert, "c"))
	if err == nil || errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), EnvClientKey) || !strings.Contains(err.Error(), EnvServerCert) {
		t.Fatalf("half given: %v", err)
	}
	_, err = ConfigFromEnv(env(EnvClientKey, "k"))
	if err == nil || !strings.Contains(err.Error(), EnvURL) {
		t.Fatalf("key only: %v", err)
	}
	_, err = ConfigFromEnv(env(EnvSocket, "/s", EnvURL, "https://h:8443"))
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("both: %v", err)
	}
	for _, u := range []string{"http://h:8443", "h:8443", "https://h:8443/1.0", "https://u:p@h:8443"} {
		_, err = ConfigFromEnv(env(EnvURL, u, EnvClientCert, "c", EnvClientKey, "k", EnvServerCert, "s"))
		if err == nil || strings.Contains(err.Error(), "u:p") {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("New(zero): %v", err)
	}
}

func TestPinnedTLSConfig(t *testing.T) {
	certA, keyA := selfSigned(t, "a")
	certB, _ := selfSigned(t, "b")
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "cluster.crt")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certA.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	pins, err := readPins(pemFile)
	if err != nil || len(pins) != 1 || pins[0] != Fingerprint(certA.Raw) {
		t.Fatalf("%v %v", err, pins)
	}
	_ = keyA
	conf := pinnedTLSConfig(tlsCertificate(certA), pins)
	if err := conf.VerifyPeerCertificate([][]byte{certA.Raw}, nil); err != nil {
		t.Fatalf("pinned cert refused: %v", err)
	}
	err = conf.VerifyPeerCertificate([][]byte{certB.Raw, certA.Raw}, nil)
	if !errors.Is(err, ErrCertificateMismatch) {
		t.Fatalf("other cert accepted: %v", err)
	}
	if err := conf.VerifyPeerCertificate(nil, nil); !errors.Is(err, ErrCertificateMismatch) {
		t.Fatalf("no cert accepted: %v", err)
	}
	if err := os.WriteFile(pemFile, []byte("not a pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPins(pemFile); err == nil || !strings.Contains(err.Error(), EnvServerCert) {
		t.Fatalf("bad pem: %v", err)
	}
}

func selfSigned(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func tlsCertificate(c *x509.Certificate) tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Raw}}
}

func TestResourcesDecodesHardwareAndTargetsTheMember(t *testing.T) {
	// The shape a real incusd 6.0.4 answered (trimmed), plus a physical card with two ports.
	body := syncBody(`{
	 "cpu":{"architecture":"x86_64","sockets":[{"socket":0,"cores":[{"core":0,"threads":[{"id":0,"online":true}]},{"core":1,"threads":[{"id":1,"online":true}]}]}],"total":2},
	 "memory":{"hugepages_size":2097152,"nodes":[{"numa_node":0,"total":25769803776,"used":1873166336}],"total":25769803776,"used":801058816},
	 "storage":{"disks":[
	   {"block_size":0,"device":"254:0","id":"vda","numa_node":0,"partitions":[],"pci_address":"0000:00:02.0","read_only":false,"removable":false,"rpm":1,"size":274877906944,"type":"virtio"},
	   {"id":"sr0","type":"cdrom","size":0,"removable":true,"read_only":true,"model":"QEMU DVD-ROM"}],"total":2},
	 "network":{"cards":[
	   {"driver":"virtio_net","pci_address":"0000:00:03.0","ports":[{"address":"02:fc:00:00:00:01","auto_negotiation":false,"id":"eth0","link_detected":true,"port":0,"port_type":"other","protocol":"ethernet"}]},
	   {"driver":"ice","pci_address":"0000:41:00.0","ports":[{"id":"eno1","address":"b4:96:91:00:00:01","link_detected":true,"link_speed":25000},{"id":"eno2","address":"b4:96:91:00:00:02","link_detected":false}]}],"total":2},
	 "system":{"type":"physical","uuid":"4c4c4544-0042-3510-8052-b7c04f4e0001"},
	 "gpu":{"cards":[],"total":0},"usb":{"devices":[],"total":0},"pci":{"devices":[],"total":0},"load":{"processes":100}}`)
	c, rt := fakeClient(func(*http.Request) (int, http.Header, string) { return 200, nil, body })
	r, err := c.Resources(context.Background(), "node-3")
	if err != nil {
		t.Fatal(err)
	}
	if u := rt.reqs[0].URL.RequestURI(); rt.reqs[0].Method != "GET" || u != "/1.0/resources?target=node-3" {
		t.Fatalf("request %s %s", rt.reqs[0].Method, u)
	}
	want := Resources{
		Architecture: "x86_64", CPUs: 2, MemoryBytes: 25769803776, SystemType: "physical",
		Disks: []ResourceDisk{{ID: "vda", Type: "virtio", SizeBytes: 274877906944}, {ID: "sr0", Type: "cdrom", Model: "QEMU DVD-ROM", Removable: true, ReadOnly: true}},
		NetworkCards: []NetworkCard{
			{Driver: "virtio_net", PCIAddress: "0000:00:03.0", Ports: []NetworkPort{{ID: "eth0", MAC: "02:fc:00:00:00:01", LinkDetected: true}}},
			{Driver: "ice", PCIAddress: "0000:41:00.0", Ports: []NetworkPort{{ID: "eno1", MAC: "b4:96:91:00:00:01", LinkDetected: true, LinkSpeedMbps: 25000}, {ID: "eno2", MAC: "b4:96:91:00:00:02"}}},
		},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("resources\n got %+v\nwant %+v", r, want)
	}
	if _, err := c.Resources(context.Background(), ""); err != nil || rt.reqs[1].URL.RequestURI() != "/1.0/resources" {
		t.Fatalf("untargeted: %v %s", err, rt.reqs[1].URL.RequestURI())
	}

	missing, _ := fakeClient(func(*http.Request) (int, http.Header, string) {
		return 404, nil, errorBody(404, "Cluster member not found")
	})
	if _, err := missing.Resources(context.Background(), "nope"); !IsNotFound(err) {
		t.Fatalf("unknown member: %v", err)
	}
}
