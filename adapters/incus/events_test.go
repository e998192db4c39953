package incus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestLifecycleEventDecoding(t *testing.T) {
	// The shape `incus monitor --format=json` showed on a real 6.0.4 lab.
	ev, ok := decodeLifecycle([]byte(`{"type":"lifecycle","timestamp":"2026-01-02T03:04:05.123456789Z","location":"m1","project":"",
		"metadata":{"action":"cluster-member-updated","source":"/1.0/cluster/members/m2","context":{},"requestor":{"username":"root","protocol":"unix","address":"@"}}}`))
	if !ok || ev.Action != ActionMemberUpdated || ev.Source != "/1.0/cluster/members/m2" || ev.Location != "m1" || ev.Member() != "m2" ||
		!ev.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)) {
		t.Fatalf("decoded %+v %v", ev, ok)
	}
	for _, hostile := range []string{
		``, `null`, `[]`, `"lifecycle"`, `{"type":"logging","metadata":{"action":"x"}}`,
		`{"type":"lifecycle","metadata":{}}`, `{"type":"lifecycle","metadata":"nope"}`,
		`{"type":"lifecycle","timestamp":"yesterday","metadata":{"action":"a"}}`,
		"\x00\xff{", `{"type":"lifecycle","metadata":{"action":"a"}` + strings.Repeat(" ", 10),
	} {
		if ev, ok := decodeLifecycle([]byte(hostile)); ok {
			t.Errorf("decoded %q as %+v", hostile, ev)
		}
	}
	for src, want := range map[string]string{
		"/1.0/cluster/members/node-4":     "node-4",
		"/1.0/cluster/members/node-4?x=1": "node-4",
		"/1.0/cluster/members/":           "",
		"/1.0/cluster/members":            "",
		"/1.0/cluster/members/a/state":    "",
		"/1.0/instances/c1":               "",
		"":                                "",
	} {
		if got := (LifecycleEvent{Source: src}).Member(); got != want {
			t.Errorf("Member(%q) = %q, want %q", src, got, want)
		}
	}
}

// eventServer is a TLS websocket server on loopback standing for a member's /1.0/events.
type eventServer struct {
	addr  string
	certs [][]*x509.Certificate // client certificates seen per connection
	paths []string
	mu    sync.Mutex
	serve func(c *websocket.Conn)
	conns chan *websocket.Conn
}

func (s *eventServer) seen() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...), len(s.certs)
}

// startEventServer serves a websocket at /1.0/events with a self-signed server certificate,
// asking for client certificates as incusd does. It returns the server and a client
// configuration pinned to its certificate.
func startEventServer(t *testing.T, serve func(c *websocket.Conn)) (*eventServer, Config) {
	t.Helper()
	serverCert, serverKey := selfSigned(t, "cluster")
	clientCert, clientKey := selfSigned(t, "apelora")
	dir := t.TempDir()
	write := func(name string, blocks ...*pem.Block) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ClientCertFile: write("client.crt", &pem.Block{Type: "CERTIFICATE", Bytes: clientCert.Raw}),
		ClientKeyFile:  write("client.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		ServerCertFile: write("cluster.crt", &pem.Block{Type: "CERTIFICATE", Bytes: serverCert.Raw}),
		Timeout:        2 * time.Second,
	}
	s := &eventServer{serve: serve, conns: make(chan *websocket.Conn, 16)}
	up := websocket.Upgrader{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.RequestURI())
		if r.TLS != nil {
			s.certs = append(s.certs, r.TLS.PeerCertificates)
		}
		s.mu.Unlock()
		if r.URL.Path != "/1.0/events" {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(errorBody(404, "not found")))
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		s.serve(c)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey}},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"h2", "http/1.1"},
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	s.addr = ln.Addr().String()
	cfg.URL = "https://" + s.addr
	return s, cfg
}

const memberUpdated = `{"type":"lifecycle","timestamp":"2026-01-02T03:04:05Z","location":"m1","metadata":{"action":"cluster-member-updated","source":"/1.0/cluster/members/m2"}}`

func TestLifecycleStreamOverPinnedTLS(t *testing.T) {
	srv, cfg := startEventServer(t, func(c *websocket.Conn) {
		// What a member may send besides lifecycle events, then one; then wait for the client.
		for _, m := range []string{`{"type":"logging","metadata":{"message":"hi"}}`, "not json", memberUpdated} {
			if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
				return
			}
		}
		_, _, _ = c.ReadMessage()
	})
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Lifecycle(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Next()
	if err != nil || ev.Action != ActionMemberUpdated || ev.Member() != "m2" || ev.Location != "m1" {
		t.Fatalf("Next = %+v, %v", ev, err)
	}
	s.Close()
	if _, err := s.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("after Close: %v", err)
	}
	paths, certs := srv.seen()
	if len(paths) != 1 || paths[0] != "/1.0/events?type=lifecycle" || certs != 1 {
		t.Fatalf("server saw %v with %d client certificates", paths, certs)
	}
	srv.mu.Lock()
	presented := srv.certs[0]
	srv.mu.Unlock()
	if len(presented) != 1 {
		t.Fatal("the client presented no certificate")
	}

	// Another certificate at the address is refused, whatever its names.
	other := cfg
	other.ServerCertFile = filepath.Join(t.TempDir(), "other.crt")
	oc, _ := selfSigned(t, "other")
	_ = os.WriteFile(other.ServerCertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: oc.Raw}), 0o600)
	ocl, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ocl.Lifecycle(t.Context()); !errors.Is(err, ErrCertificateMismatch) {
		t.Fatalf("unpinned server: %v", err)
	}
}

func TestLifecycleHandshakeRefusedAndTimedOut(t *testing.T) {
	// An Incus error answer instead of the upgrade becomes *Error (here on the unix socket).
	forbidden := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(403)
		_, _ = w.Write([]byte(errorBody(403, "not authorized")))
	})}
	ln, _ := net.Listen("unix", filepath.Join(t.TempDir(), "unix.socket"))
	go func() { _ = forbidden.Serve(ln) }()
	t.Cleanup(func() { _ = forbidden.Close() })
	sock, err := New(Config{SocketPath: ln.Addr().String(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sock.Lifecycle(t.Context()); !IsForbidden(err) {
		t.Fatalf("403 answer: %v", err)
	}

	// A member that accepts the connection and says nothing: the request timeout ends it.
	_, cfg := startEventServer(t, nil)
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	cfg.URL, cfg.Timeout = "https://"+silent.Addr().String(), 300*time.Millisecond
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Lifecycle(t.Context())
	var te *TimeoutError
	if !errors.As(err, &te) || te.After != 300*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent member: %v", err)
	}
	// The caller's own end is not the request timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	cfg.Timeout = time.Minute
	cl, _ = New(cfg)
	if _, err := cl.Lifecycle(ctx); err == nil || errors.As(err, &te) {
		t.Fatalf("caller's deadline: %v", err)
	}
}

func TestLifecycleStreamEndsOnSilenceAndOversizedEvents(t *testing.T) {
	old := eventPing
	eventPing = 100 * time.Millisecond
	t.Cleanup(func() { eventPing = old })

	// A peer that stops reading never answers pings: the stream ends instead of hanging.
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	_, cfg := startEventServer(t, func(c *websocket.Conn) { <-stuck })
	cfg.Timeout = 200 * time.Millisecond
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Lifecycle(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "nothing received") {
		t.Fatalf("silent stream: %v", err)
	}
	s.Close()

	// A peer that reads (and so answers pings) keeps the stream open past the silence.
	_, cfg = startEventServer(t, func(c *websocket.Conn) {
		go func() {
			time.Sleep(5 * eventPing)
			_ = c.WriteMessage(websocket.TextMessage, []byte(memberUpdated))
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"lifecycle","metadata":{"action":"`+strings.Repeat("x", maxEventSize)+`"}}`))
		}()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	})
	cfg.Timeout = 200 * time.Millisecond
	if cl, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if s, err = cl.Lifecycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Action != ActionMemberUpdated {
		t.Fatalf("kept alive: %+v %v", ev, err)
	}
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Fatalf("oversized event: %v", err)
	}
}

func TestWatchLifecycleReconnects(t *testing.T) {
	var mu sync.Mutex
	n := 0
	_, cfg := startEventServer(t, func(c *websocket.Conn) {
		mu.Lock()
		n++
		mu.Unlock()
		// One event per connection, then hang up.
		_ = c.WriteMessage(websocket.TextMessage, []byte(memberUpdated))
	})
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var log []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.WatchLifecycle(ctx, LifecycleWatch{
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			Connected: func() { log = append(log, "connected") },
			Event: func(e LifecycleEvent) {
				log = append(log, e.Member())
				if len(log) >= 6 {
					cancel()
				}
			},
			Lost: func(err error, retry time.Duration) {
				if retry < 10*time.Millisecond || retry > 20*time.Millisecond {
					t.Errorf("backoff %s outside its bounds", retry)
				}
			},
		})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("WatchLifecycle did not return after its context ended")
	}
	if strings.Join(log[:6], ",") != "connected,m2,connected,m2,connected,m2" {
		t.Fatalf("watch saw %v", log)
	}
}
