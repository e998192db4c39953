// Package maas is a client for the MAAS 2.0 REST API: MAAS's machine lifecycle
// calls Apelora needs (list, read, commission, test, allocate, deploy,
// release, abort, power) with our own types and typed errors.
//
// Every request is signed with OAuth 1.0 PLAINTEXT, as MAAS expects. The API
// key never leaves this package: not in errors (MAAS's echoes of it are
// redacted), not in fmt or slog output of Config or Client.
package maas

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/dghubble/oauth1"

	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/leader"
)

const userAgent = "apelora-fabric-maas/1"

// Client talks to one MAAS region. It is safe for concurrent use.
type Client struct {
	root  *url.URL
	creds credentials
	cfg   Config // APIKey cleared: the parsed creds are the only copy
	trust *trust
	hc    *http.Client
	log   *slog.Logger
	// sleep waits between retries; replaced in tests that count attempts.
	sleep func(context.Context, time.Duration) error

	writes *plan.Writes // every call but a GET goes through it (see do)
}

// New validates cfg and returns a client. It does not contact MAAS; call
// Version or WhoAmI to check reachability and the key.
func New(cfg Config) (*Client, error) {
	root, err := apiRoot(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	creds, err := parseAPIKey(cfg.APIKey)
	if err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	c.APIKey = ""
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dial := newDialer().DialContext
	tr, err := newTrust(c.CAFile, func(tlsCfg *tls.Config) *http.Transport {
		return &http.Transport{
			Proxy:                 http.ProxyFromEnvironment, // never applies to loopback
			DialContext:           dial,
			TLSClientConfig:       tlsCfg,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}, log)
	if err != nil {
		return nil, err
	}
	signer := plaintextTransport(tr, creds)
	if c.WrapTransport != nil {
		signer = c.WrapTransport(signer)
	}
	writes := c.Writes
	if writes == nil {
		writes = &plan.Writes{}
	}
	return &Client{
		writes: writes,
		root:   root,
		creds:  creds,
		cfg:    c,
		trust:  tr,
		hc: &http.Client{
			Transport: signer,
			// A redirect could lead anywhere, including plain http; MAAS API
			// paths are known exactly, so a redirect is an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:   log,
		sleep: leader.Sleep, // retries wait like every other loop: until d passes or ctx ends
	}, nil
}

// String shows where the client points, never the key.
func (c *Client) String() string { return "maas.Client{" + c.root.Redacted() + "}" }

// GoString is used by %#v.
func (c *Client) GoString() string { return c.String() }

// Format keeps every fmt verb away from the struct fields.
func (c *Client) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps slog away from the struct fields.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// plaintextSigner is OAuth 1.0 PLAINTEXT (RFC 5849 3.4.4): the signature is
// escape(consumer secret)&escape(token secret). MAAS consumer secrets are
// always empty. dghubble/oauth1 ships no PLAINTEXT signer.
type plaintextSigner struct{ consumerSecret string }

func (plaintextSigner) Name() string { return "PLAINTEXT" }

func (s plaintextSigner) Sign(tokenSecret, _ string) (string, error) {
	return oauth1.PercentEncode(s.consumerSecret) + "&" + oauth1.PercentEncode(tokenSecret), nil
}

// plaintextTransport signs each request as it is sent, so every attempt,
// retries included, gets a fresh nonce and timestamp.
func plaintextTransport(base http.RoundTripper, cr credentials) http.RoundTripper {
	oc := oauth1.NewConfig(cr.consumerKey, "")
	oc.Signer = plaintextSigner{}
	oc.Noncer = oauth1.HexNoncer{}
	ctx := context.WithValue(context.Background(), oauth1.HTTPClient, &http.Client{Transport: base})
	return oauth1.NewClient(ctx, oc, oauth1.NewToken(cr.tokenKey, cr.tokenSecret)).Transport
}

// call is one API request.
type call struct {
	method  string // GET or POST
	path    string // relative to api/2.0/, with trailing slash
	op      string
	params  url.Values
	timeout time.Duration // zero: Config.RequestTimeout
	// shownUserData is how a plan shows params' user_data ("": its size and SHA-256).
	shownUserData string
}

// Writes is the seam the client's changes go through: hooks added to it (app's shared
// reads forgetting, metrics) run after every one, made or planned.
func (c *Client) Writes() *plan.Writes { return c.writes }

// do sends c and decodes a 2xx JSON body into out (when out is non-nil). Every call but
// a GET is a write: it goes through the client's plan.Writes, which in a dry run records
// it (describe) instead of sending it, and do answers with the machine as MAAS shows it
// now (a real read).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	if cl.method == http.MethodGet {
		return c.send(ctx, cl, out)
	}
	planned, err := c.writes.Do(ctx, plan.MAAS, func() plan.Call { return describe(cl) }, func() error { return c.send(ctx, cl, out) })
	if planned {
		return c.plannedAnswer(ctx, cl, out)
	}
	return err
}

// send makes cl: only do and the seam's send may use it.
func (c *Client) send(ctx context.Context, cl call, out any) error {
	u := *c.root
	u.Path = c.root.Path + cl.path
	q := url.Values{}
	if cl.op != "" {
		q.Set("op", cl.op)
	}
	var body []byte
	if cl.method == http.MethodGet {
		for k, vs := range cl.params {
			q[k] = append(q[k], vs...)
		}
	} else {
		// Buffered: signing reads form bodies, and retries need them again.
		body = []byte(cl.params.Encode())
	}
	u.RawQuery = q.Encode()
	full := u.String()

	retries := 0
	if cl.method == http.MethodGet {
		retries = c.cfg.MaxRetries // only idempotent reads are retried
	}
	timeout := cl.timeout
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	// One bound for the whole call, retries included: a hung MAAS costs one timeout.
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reloaded := false
	for attempt := 0; ; attempt++ {
		wait, err := c.attempt(ctx, cctx, cl, u.Path, full, body, timeout, out)
		if err == nil {
			return nil
		}
		if !reloaded && refusedCertificate(err) && c.trust.reload(ctx) {
			// The CA file changed since: the request was never sent, try it once with the
			// new trust.
			reloaded = true
			attempt--
			continue
		}
		if wait < 0 || attempt >= retries || cctx.Err() != nil {
			return err
		}
		if wait == 0 {
			wait = 250 * time.Millisecond << attempt
		}
		wait = min(wait, c.cfg.MaxRetryWait)
		if dl, ok := cctx.Deadline(); ok && time.Until(dl) <= wait {
			return err // no time left for another attempt
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "MAAS request failed; retrying",
			slog.String("method", cl.method), slog.String("path", u.Path), slog.String("op", cl.op),
			slog.Int("attempt", attempt+1), slog.Duration("wait", wait), slog.String("error", err.Error()))
		if serr := c.sleep(cctx, wait); serr != nil {
			return err
		}
	}
}

// attempt makes one request within ctx, the call's bound (parent is the caller's context).
// wait < 0 means "do not retry"; wait == 0 means retry with backoff; wait > 0 is MAAS's
// Retry-After.
func (c *Client) attempt(parent, ctx context.Context, cl call, path, full string, body []byte, timeout time.Duration, out any) (time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, full, rd)
	if err != nil {
		return -1, &RequestError{Method: cl.method, Path: path, Op: cl.op, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		err = transportError(err)
		if parent.Err() == nil && ctx.Err() != nil {
			// The call's own bound, not the caller's, ran out.
			err = &TimeoutError{After: timeout}
		}
		rerr := &RequestError{Method: cl.method, Path: path, Op: cl.op, Err: err}
		if ctx.Err() != nil || !retryableNetErr(err) {
			return -1, rerr
		}
		return 0, rerr
	}
	defer resp.Body.Close()
	lr := &capReader{r: resp.Body, left: c.cfg.MaxResponseBytes}

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil {
			_, err = io.Copy(io.Discard, lr)
		} else {
			err = decodeJSON(lr, out)
		}
		if err != nil {
			if !errors.Is(err, ErrResponseTooLarge) {
				err = fmt.Errorf("decode MAAS response: %w (is BaseURL pointing at MAAS's /MAAS path?)", err)
			}
			return -1, &RequestError{Method: cl.method, Path: path, Op: cl.op, Err: err}
		}
		return 0, nil
	}

	errBody, _ := io.ReadAll(&capReader{r: resp.Body, left: min(c.cfg.MaxResponseBytes, 64<<10)})
	msg, fields := messageFrom(resp.StatusCode, resp.Header.Get("Content-Type"), errBody, c.creds)
	apiErr := &APIError{
		Method: cl.method, Path: path, Op: cl.op, StatusCode: resp.StatusCode,
		Message: msg, Fields: fields, kind: kindFor(resp.StatusCode),
	}
	retryAfter, hasRetryAfter := parseRetryAfter(resp.Header.Get("Retry-After"))
	if hasRetryAfter {
		apiErr.RetryAfter = retryAfter
	}
	if cl.op == "query_power_state" && resp.StatusCode == http.StatusBadRequest {
		apiErr.kind = ErrPowerNotQueryable
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return retryAfter, apiErr
	case resp.StatusCode == http.StatusConflict && hasRetryAfter:
		// Only MAAS's exhausted database retries carry Retry-After; a state
		// conflict does not and must not be retried.
		return max(retryAfter, time.Millisecond), apiErr
	}
	return -1, apiErr
}

func parseRetryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false // like gomaasapi: only integer seconds count
	}
	return time.Duration(n) * time.Second, true
}

// transportError strips *url.Error, whose text repeats the full URL with its
// query, and adds what to do about TLS failures.
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalid     x509.CertificateInvalidError
		recErr      tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, ErrCACertificateServed):
		return err
	case errors.As(err, &unknownAuth):
		return fmt.Errorf("%w; trust the CA that signed MAAS's certificate through the MAAS CA file (or pin MAAS's own leaf certificate there)", err)
	case errors.As(err, &hostErr):
		return fmt.Errorf("%w; use a MAAS URL whose host name is in the certificate", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w; MAAS's certificate is expired or not valid for a server", err)
	case errors.As(err, &recErr):
		return fmt.Errorf("%w; the MAAS URL scheme does not match the server (https to a plain-http port?)", err)
	}
	return err
}

func retryableNetErr(err error) bool {
	var (
		verr        *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalid     x509.CertificateInvalidError
		recErr      tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, ErrCACertificateServed), errors.As(err, &verr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &recErr):
		return false // retrying will not change a certificate
	}
	return true
}

// capReader fails with ErrResponseTooLarge instead of silently truncating.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// decodeJSON reads the JSON answer into out, or, for a list asked for as one (listOf),
// one element at a time as it arrives.
func decodeJSON(r io.Reader, out any) error {
	dec := json.NewDecoder(r)
	if l, ok := out.(streamedList); ok {
		return l.decode(dec)
	}
	return dec.Decode(out)
}

type streamedList interface{ decode(dec *json.Decoder) error }

// listOf asks for a JSON array answer to be decoded into *into one element at a time, as it
// arrives, rather than read whole and then decoded: a machine list, 1.6 MB for 300
// machines, is then decoded while MAAS still sends the rest of it, and never held whole
// (0.7 instead of 4.9 MB allocated per list). It reads what Decode would read into *into.
func listOf[T any](into *[]T) streamedList { return list[T]{into} }

type list[T any] struct{ into *[]T }

func (l list[T]) decode(dec *json.Decoder) error {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return err
	case tok == nil: // null
		*l.into = nil
		return nil
	case tok != json.Delim('['):
		return &json.UnmarshalTypeError{Value: jsonKind(tok), Type: reflect.TypeFor[[]T](), Offset: dec.InputOffset()}
	}
	if *l.into == nil {
		*l.into = []T{} // [] is an empty list, not null
	}
	*l.into = (*l.into)[:0]
	for dec.More() {
		var zero T
		*l.into = append(*l.into, zero)
		if err := dec.Decode(&(*l.into)[len(*l.into)-1]); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ]
	return err
}

// jsonKind names a JSON value that is not an array as encoding/json's errors do.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "object"
	case string:
		return "string"
	case bool:
		return "bool"
	}
	return "number"
}
