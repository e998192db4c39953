package incus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/plan"
)

// maxBody bounds what the client reads from one answer.
const maxBody = 32 << 20

// Client is a typed Incus REST client. It is safe for concurrent use.
type Client struct {
	cluster     string // Endpoint.Cluster
	base        string // "http://incus" for the socket; "" over HTTPS (see eps)
	endpoint    string // what to name in messages for the socket: "unix:<path>"
	eps         *endpoints
	tr          *http.Transport
	hc          *http.Client
	timeout     time.Duration
	logger      *slog.Logger
	fingerprint string // pinned cluster certificate (first one), hex; empty for the socket

	// What the event stream (events.go) dials with: the same identity and pins on a
	// connection of its own (a websocket upgrade needs HTTP/1.1; the REST transport may
	// speak HTTP/2), or the same socket.
	socket string
	cert   tls.Certificate
	pins   []string
	dialer *net.Dialer

	writes *plan.Writes // every request but a GET goes through it (see call)
	// afterWrite run after every write through this client, made or planned (the shared
	// reads of its cluster's ports forget their call in flight: AfterWrite).
	hooks      sync.Mutex
	afterWrite []func()
	// name is the cluster's name for messages ("" for the environment's), pinSource what
	// holds its pinned certificate.
	name, pinSource string
}

// New builds a client from cfg. It reads the certificate files now, so a bad path or a
// key that does not match fails here, not on the first call. It is NewClient with the
// identity and the endpoint cfg's files and URLs name.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.HasCluster() {
		return nil, fmt.Errorf("no Incus cluster configured: %s with %s, or %s, name the cluster to reach (only the client identity is set)", EnvURL, EnvServerCert, EnvSocket)
	}
	ep := Endpoint{Socket: cfg.SocketPath}
	var id *Identity
	if cfg.SocketPath == "" {
		var err error
		if id, err = LoadIdentity(cfg.ClientCertFile, cfg.ClientKeyFile); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(cfg.ServerCertFile)
		if err != nil {
			return nil, fmt.Errorf("read Incus cluster certificate (%s): %w", EnvServerCert, err)
		}
		ep.CertificatePEM = string(data)
		ep.Seeds = append([]string{cfg.URL}, cfg.FallbackURLs...)
		ep.certificateFile = cfg.ServerCertFile
	}
	return NewClient(id, ep, cfg)
}

// Identity is Apelora's Incus client identity: the one client certificate (and its key)
// every HTTPS cluster trusts (APELORA_INCUS_CLIENT_CERT, APELORA_INCUS_CLIENT_KEY). The key
// never leaves the process.
type Identity struct {
	cert        tls.Certificate
	pem         string
	fingerprint string
}

// LoadIdentity reads the client certificate and key (PEM files).
func LoadIdentity(certFile, keyFile string) (*Identity, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load Incus client certificate %s and key %s: %w (check %s and %s)",
			certFile, keyFile, err, EnvClientCert, EnvClientKey)
	}
	return &Identity{cert: cert, fingerprint: Fingerprint(cert.Certificate[0]),
		pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))}, nil
}

// CertificatePEM is the identity's certificate (public): what a cluster must trust.
func (id *Identity) CertificatePEM() string { return id.pem }

// Fingerprint is the certificate's SHA-256 (lower-case hex), as Incus lists it.
func (id *Identity) Fingerprint() string { return id.fingerprint }

// Endpoint is how one cluster is reached: through any of its members over HTTPS, starting
// from Seeds and pinned to every CERTIFICATE block of CertificatePEM; or through the local
// daemon's Socket.
type Endpoint struct {
	Seeds          []string
	CertificatePEM string
	Socket         string
	// Name is the cluster's name for messages ("": the environment's cluster, named by
	// its settings).
	Name string
	// Cluster is the cluster's name as its record says, also for the environment's: the
	// plan shows it beside the member a join token is issued for ("" outside the pool).
	Cluster string
	// certificateFile names where CertificatePEM came from (APELORA_INCUS_SERVER_CERT).
	certificateFile string
}

// NewClient builds a client of the cluster ep reaches with identity id (nil for the
// socket), and cfg's options (Timeout, Logger, WrapTransport, Writes; its endpoint fields
// are not read).
func NewClient(id *Identity, ep Endpoint, cfg Config) (*Client, error) {
	if cfg.Timeout < 0 {
		return nil, errors.New("Incus timeout must not be negative")
	}
	c := &Client{timeout: cfg.Timeout, logger: cfg.Logger, writes: cfg.Writes, name: ep.Name, cluster: ep.Cluster}
	if c.writes == nil {
		c.writes = &plan.Writes{}
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	// No dial or handshake timeout of their own: each call's bound (Config.Timeout) covers
	// connecting, the handshake and the answer, so a hung member is reported one way.
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	c.dialer = dialer
	tr := &http.Transport{
		Proxy:                 nil, // Incus is reached directly, never through an environment proxy
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	if ep.Socket != "" {
		sock := ep.Socket
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", sock)
		}
		c.base = "http://incus"
		c.endpoint = "unix:" + sock
		c.socket = sock
	} else {
		if id == nil {
			return nil, fmt.Errorf("no Incus client identity to reach %s with: set %s and %s", ep.describe(), EnvClientCert, EnvClientKey)
		}
		pins, err := pinsOf(ep)
		if err != nil {
			return nil, err
		}
		var seeds []string
		for _, u := range ep.Seeds {
			if u = strings.TrimRight(u, "/"); u != "" && !slices.Contains(seeds, u) {
				if err := validURL(u); err != nil {
					return nil, err
				}
				seeds = append(seeds, u)
			}
		}
		if len(seeds) == 0 {
			return nil, fmt.Errorf("no member URL to reach %s through", ep.describe())
		}
		c.fingerprint = pins[0]
		c.cert, c.pins = id.cert, pins
		// Connections are opened by dialTLS (each address within its connect bound, the
		// failures marked as never sent); the transport still speaks HTTP/2 over them, with
		// the ALPN it adds to this configuration.
		tr.DialTLSContext = c.dialTLS
		tr.ForceAttemptHTTP2 = true
		c.pinSource = ep.pinSource()
		tr.TLSClientConfig = pinnedTLSConfigFor(id.cert, pins, c.pinSource)
		c.eps = newEndpoints(seeds)
	}
	c.tr = tr
	var rt http.RoundTripper = tr
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	c.hc = &http.Client{
		Transport: rt,
		// Incus never redirects the calls we make; following one would leave the pinned member.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

func (ep Endpoint) describe() string {
	if ep.Name != "" {
		return "Incus cluster " + ep.Name
	}
	return "the Incus cluster"
}

// pinSource names, in a certificate mismatch, what holds the pinned certificate.
func (ep Endpoint) pinSource() string {
	if ep.Name != "" {
		return "the certificate registered for cluster " + ep.Name
	}
	return EnvServerCert
}

// readPins returns the SHA-256 fingerprints (hex) of every certificate in a PEM file.
func readPins(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read Incus cluster certificate (%s): %w", EnvServerCert, err)
	}
	return pinsOf(Endpoint{CertificatePEM: string(data), certificateFile: file})
}

// pinsOf returns the SHA-256 fingerprints (hex) of every certificate of the endpoint's PEM.
func pinsOf(ep Endpoint) ([]string, error) {
	file := ep.certificateFile
	if file == "" {
		file = ep.pinSource()
	}
	var pins []string
	for rest := []byte(ep.CertificatePEM); ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("Incus cluster certificate %s: %w", file, err)
		}
		pins = append(pins, Fingerprint(block.Bytes))
	}
	if len(pins) == 0 {
		return nil, fmt.Errorf("Incus cluster certificate %s holds no PEM CERTIFICATE block (%s must be $INCUS_DIR/cluster.crt of a member)", file, EnvServerCert)
	}
	return pins, nil
}

// Fingerprint returns the SHA-256 fingerprint, lower-case hex, of a DER certificate: the
// form Incus uses for certificate_fingerprint and in join tokens.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// pinnedTLSConfig presents cert and accepts only a server whose leaf certificate has one of
// the pinned fingerprints. Host-name verification is off on purpose: every member presents
// the cluster certificate, whose SANs need not name the member. No session cache is set,
// so every connection runs VerifyPeerCertificate.
func pinnedTLSConfig(cert tls.Certificate, pins []string) *tls.Config {
	return pinnedTLSConfigFor(cert, pins, EnvServerCert)
}

// pinnedTLSConfigFor is pinnedTLSConfig naming source (what holds the pinned certificate)
// in a mismatch.
func pinnedTLSConfigFor(cert tls.Certificate, pins []string, source string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			if len(rawCerts) == 0 {
				return &PinError{Pinned: pins[0], Source: source}
			}
			got := Fingerprint(rawCerts[0])
			if slices.Contains(pins, got) {
				return nil
			}
			return &PinError{Presented: got, Pinned: pins[0], Source: source}
		},
	}
}

// tlsConfig is the pinned configuration the transport holds (with its ALPN).
func (c *Client) tlsConfig() *tls.Config { return c.tr.TLSClientConfig }

// PinnedFingerprint returns the fingerprint of the pinned cluster certificate, or "" for
// a unix-socket client. Join tokens carry the same value.
func (c *Client) PinnedFingerprint() string { return c.fingerprint }

// Endpoint names what the client talks to now: the member URL it asks first or
// "unix:<socket path>".
func (c *Client) Endpoint() string {
	if c.eps == nil {
		return c.endpoint
	}
	return c.eps.through()
}

// Through is the URL of the member the client talks through (asked first), "" for the
// unix socket: a plan that removes that member says so.
func (c *Client) Through() string {
	if c.eps == nil {
		return ""
	}
	return c.eps.through()
}

// Timeout is the bound of each call (Config.Timeout, else DefaultTimeout).
func (c *Client) Timeout() time.Duration { return c.timeout }

// Seeds are the configured member URLs (APELORA_INCUS_URL's list), nil for the socket.
func (c *Client) Seeds() []string {
	if c.eps == nil {
		return nil
	}
	return slices.Clone(c.eps.seeds)
}

// Addresses are the member URLs the client learned from the cluster's member list (none
// yet, or for the unix socket: nil).
func (c *Client) Addresses() []string {
	if c.eps == nil {
		return nil
	}
	return c.eps.known()
}

// Avoid moves the client's calls off the member at url (to another member it knows), and
// drops its idle connections: for a member about to leave the cluster, so the calls after
// its removal do not go to a daemon that is no member any more.
func (c *Client) Avoid(url string) {
	if c.eps == nil {
		return
	}
	c.eps.avoid(url)
	c.hc.CloseIdleConnections()
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Response types and operation status codes.
const (
	typeSync  = "sync"
	typeAsync = "async"
	typeError = "error"

	StatusCreated    = 100
	StatusRunning    = 103
	StatusCancelling = 104
	StatusPending    = 105
	StatusSuccess    = 200
	StatusFailure    = 400
	StatusCancelled  = 401
)

// envelope is Incus's response wrapper.
type envelope struct {
	Type       string          `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation"`
	ErrorCode  int             `json:"error_code"`
	Error      string          `json:"error"`
	Metadata   json.RawMessage `json:"metadata"`
}

// request describes one call.
type request struct {
	method  string
	path    string     // "/1.0/..." unescaped segments must be escaped by the caller
	query   url.Values // may be nil
	body    any        // JSON-encoded when non-nil
	ifMatch string     // ETag without quotes
	timeout time.Duration
	leaving string // the member this request removes (see Client.leave)
}

func (r request) uri() string {
	if len(r.query) == 0 {
		return r.path
	}
	return r.path + "?" + r.query.Encode()
}

// result is what a successful call returns besides the metadata.
type result struct {
	httpStatus int
	etag       string
	typ        string
	operation  string // operation URL for async answers
}

// Writes is the seam the client's changes go through: hooks added to it (the metrics) run
// after every one, made or planned, whichever client made it.
func (c *Client) Writes() *plan.Writes { return c.writes }

// AfterWrite has fn run after every write through this client (its cluster), made or
// planned: its ports' shared reads forget their call in flight, so a read after the write
// starts anew. Writes to other clusters, through their clients, leave them be.
func (c *Client) AfterWrite(fn func()) {
	c.hooks.Lock()
	defer c.hooks.Unlock()
	c.afterWrite = append(c.afterWrite, fn)
}

// write makes (or, in a dry run, plans) one change through the process's seam, then runs
// this client's own hooks.
func (c *Client) write(ctx context.Context, describe func() plan.Call, send func() error) (bool, error) {
	defer func() {
		c.hooks.Lock()
		hooks := c.afterWrite
		c.hooks.Unlock()
		for _, fn := range hooks {
			fn()
		}
	}()
	return c.writes.Do(ctx, plan.Incus, describe, send)
}

// call sends req and decodes the metadata of a sync or async answer into out (when out
// is non-nil). Error envelopes become *Error. Every request but a GET is a write: it goes
// through the client's plan.Writes, which in a dry run records it (describe) and answers
// an empty success instead of sending it.
func (c *Client) call(ctx context.Context, req request, out any) (result, error) {
	if req.method == http.MethodGet {
		return c.send(ctx, req, out)
	}
	var res result
	planned, err := c.write(ctx, func() plan.Call { return c.describe(ctx, req) }, func() (err error) {
		if req.leaving != "" {
			c.leave(ctx, req.leaving)
		}
		res, err = c.send(ctx, req, out)
		return err
	})
	if planned {
		return result{typ: typeSync, httpStatus: http.StatusOK}, nil
	}
	return res, err
}

// send makes req: only call and the seam's send may use it. Over HTTPS it goes to the
// member asked first, and on to the next when one cannot be reached (see endpoints.go),
// all within the call's one bound.
func (c *Client) send(ctx context.Context, req request, out any) (result, error) {
	timeout := req.timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body []byte
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return result{}, fmt.Errorf("incus %s %s: encode request: %w", req.method, req.path, err)
		}
		body = b
	}
	if c.eps == nil {
		return c.attempt(parent, ctx, timeout, c.base, c.endpoint, req, body, out)
	}
	var errs []error
	order := c.eps.order()
	for i, base := range order {
		res, err := c.attemptAt(parent, ctx, timeout, req, body, out, base, i < len(order)-1)
		if err == nil || !c.unreached(ctx, req, err) {
			if res.httpStatus != 0 {
				c.eps.answered(base)
			} else {
				c.eps.failed(base)
			}
			if err != nil && len(errs) > 0 {
				err = fmt.Errorf("%w (before it: %w)", err, errors.Join(errs...))
			}
			return res, err
		}
		c.eps.failed(base)
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return result{}, errs[0]
	}
	if parent.Err() == nil && ctx.Err() != nil {
		// The call's bound ran out across the members: that bound is the answer's.
		return result{}, fmt.Errorf("incus %s %s: %w from any member (%w)", req.method, req.path, &TimeoutError{After: timeout}, errors.Join(errs...))
	}
	return result{}, fmt.Errorf("no member of the cluster could be reached: %w", errors.Join(errs...))
}

// attemptAt sends req to base within the call's context. A read with other addresses
// left gets half of the time left, so a member that accepted the connection and never
// answers (a hung host, or a pooled connection to one) leaves time to ask the next; the
// last address, and every write, get all of it.
func (c *Client) attemptAt(parent, ctx context.Context, timeout time.Duration, req request, body []byte, out any, base string, others bool) (result, error) {
	if req.method != http.MethodGet || !others {
		return c.attempt(parent, ctx, timeout, base, base, req, body, out)
	}
	dl, _ := ctx.Deadline()
	bound := time.Until(dl) / 2
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return c.attempt(ctx, actx, bound, base, base, req, body, out)
}

// unreached reports whether err means the address did not answer req, so the next one may
// be asked: a connection that never opened (the request was not sent), or a GET that got
// no answer while the call's bound still runs.
func (c *Client) unreached(ctx context.Context, req request, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ie *Error
	if errors.As(err, &ie) {
		// A member whose own daemon is still starting (back from a reboot) answers every
		// request of its own so: not an answer. One about another member (?target=) is
		// that member's matter.
		return IsNotReady(err) && ie.Message == NotReadyMessage && req.query.Get("target") == ""
	}
	if isConnectError(err) {
		return true
	}
	return req.method == http.MethodGet
}

// attempt sends req to one address (base, named endpoint in errors).
func (c *Client) attempt(parent, ctx context.Context, timeout time.Duration, base, endpoint string, req request, body []byte, out any) (result, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, base+req.uri(), rd)
	if err != nil {
		return result{}, fmt.Errorf("incus %s %s: %w", req.method, req.path, err)
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "apelora-fabric")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if req.ifMatch != "" {
		hreq.Header.Set("If-Match", `"`+strings.Trim(req.ifMatch, `"`)+`"`)
	}

	start := time.Now()
	resp, err := c.hc.Do(hreq)
	if err != nil {
		err = unwrapURLError(err)
		if parent.Err() == nil && ctx.Err() != nil {
			// The call's own bound ran out, not the caller's.
			err = &TimeoutError{After: timeout}
		}
		return result{}, fmt.Errorf("incus %s %s at %s: %w", req.method, req.path, endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	// Answers may carry secrets (join token operations); wipe the buffer once decoded.
	defer clear(raw)
	if c.logger != nil {
		c.logger.LogAttrs(ctx, slog.LevelDebug, "incus request",
			slog.String("method", req.method), slog.String("path", req.path), slog.String("member", endpoint),
			slog.Int("status", resp.StatusCode), slog.Duration("took", time.Since(start)))
	}
	res := result{httpStatus: resp.StatusCode, etag: strings.Trim(resp.Header.Get("Etag"), `"`)}
	if err != nil {
		return res, fmt.Errorf("incus %s %s: read answer: %w", req.method, req.path, err)
	}
	if len(raw) > maxBody {
		return res, fmt.Errorf("incus %s %s: answer larger than %d bytes", req.method, req.path, maxBody)
	}
	return res, decodeAnswer(req.method, req.uri(), resp.StatusCode, raw, &res, out)
}

// Learn reads the cluster's member list, from which the client learns whom it may ask
// (every member list it reads does the same): app calls it once at start, so the addresses
// are known before the member talked through first is ever lost.
func (c *Client) Learn(ctx context.Context) error {
	if c.eps == nil {
		return nil
	}
	_, err := c.Members(ctx)
	return err
}

// decodeAnswer interprets an Incus answer. It is separate from call for unit tests.
func decodeAnswer(method, uri string, httpStatus int, raw []byte, res *result, out any) error {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Type == "" {
		// Not an Incus envelope (a proxy, a crash page, an empty body).
		if httpStatus >= 400 {
			return &Error{Status: httpStatus, Message: snippet(raw, http.StatusText(httpStatus)), Method: method, Path: uri}
		}
		return fmt.Errorf("incus %s %s: answer (HTTP %d) is not an Incus response", method, uri, httpStatus)
	}
	defer clear(env.Metadata)
	res.typ = env.Type
	res.operation = env.Operation
	switch env.Type {
	case typeError:
		status := env.ErrorCode
		if status == 0 {
			status = httpStatus
		}
		msg := env.Error
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &Error{Status: status, Message: msg, Method: method, Path: uri}
	case typeSync, typeAsync:
		if httpStatus >= 400 {
			return &Error{Status: httpStatus, Message: "unexpected " + env.Type + " answer with an error status", Method: method, Path: uri}
		}
		if out == nil || len(env.Metadata) == 0 || string(env.Metadata) == "null" {
			return nil
		}
		if err := json.Unmarshal(env.Metadata, out); err != nil {
			return fmt.Errorf("incus %s %s: decode %s answer: %w", method, uri, env.Type, err)
		}
		return nil
	default:
		return fmt.Errorf("incus %s %s: unknown answer type %q", method, uri, env.Type)
	}
}

// snippet returns a short printable excerpt of a non-Incus body.
func snippet(raw []byte, fallback string) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || !utf8.ValidString(s) {
		return fallback
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// unwrapURLError drops *url.Error's "Get \"https://…\":" prefix (the URL is named by the caller).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// get is a GET with sync metadata decoded into out.
//
// A read aimed at one member (?target=) right after that member joined is refused 403
// "Client certificate not found" until the member has loaded the cluster's trust store: tens
// of milliseconds on an idle machine, seconds on a loaded one (seen as a member's admission
// checks failing as "not trusted" when run the moment it joined). Such a read is asked again,
// within joinedTrustWait; any other refusal is answered at once.
func (c *Client) get(ctx context.Context, p string, query url.Values, out any) (result, error) {
	req := request{method: http.MethodGet, path: p, query: query}
	res, err := c.call(ctx, req, out)
	if query.Get("target") == "" || !refusedByJoiner(err) {
		return res, err
	}
	deadline := time.Now().Add(joinedTrustWait)
	for refusedByJoiner(err) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(joinedTrustStep):
		}
		res, err = c.call(ctx, req, out)
	}
	return res, err
}

// refusedByJoiner reports the 403 a member gives a forwarded request before it has loaded
// the cluster's trust store (Incus 6.0: "Client certificate not found").
func refusedByJoiner(err error) bool {
	var ie *Error
	return IsForbidden(err) && errors.As(err, &ie) && strings.Contains(ie.Message, "Client certificate not found")
}

// joinedTrustWait bounds how long a targeted read refused 403 is asked again (get).
const (
	joinedTrustWait = 5 * time.Second
	joinedTrustStep = 250 * time.Millisecond
)

// targetQuery returns ?target=member (nil for "").
func targetQuery(target string) url.Values {
	if target == "" {
		return nil
	}
	return url.Values{"target": {target}}
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// operationID extracts the id from "/1.0/operations/<id>".
func operationID(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return path.Base(u)
}
