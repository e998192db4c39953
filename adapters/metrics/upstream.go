package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// outcomeOf names how a call without an HTTP status ended.
func outcomeOf(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "error"
	}
}

// statusClass names an HTTP answer by its class: "2xx" … "5xx".
func statusClass(code int) string {
	switch {
	case code >= 200 && code < 300:
		return "2xx"
	case code >= 300 && code < 400:
		return "3xx"
	case code >= 400 && code < 500:
		return "4xx"
	case code >= 500 && code < 600:
		return "5xx"
	default:
		return "error"
	}
}

// Transport returns what the wiring installs around an upstream client's transport
// (incus.Config.WrapTransport, maas.Config.WrapTransport): every request is counted by
// upstream, by operation (the adapter's bounded name for it: method and path template,
// never an id or a query value) and by outcome, with its latency to the end of the
// answer's body. Nil m wraps nothing.
func (m *Metrics) Transport(upstream string, operation func(*http.Request) string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		if m == nil {
			return next
		}
		return &counted{next: next, m: m, upstream: upstream, operation: operation}
	}
}

type counted struct {
	next      http.RoundTripper
	m         *Metrics
	upstream  string
	operation func(*http.Request) string
}

func (c *counted) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	op := c.operation(r)
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		c.m.Upstream(c.upstream, op, outcomeOf(err), time.Since(start))
		return nil, err
	}
	// The call ends when its answer has been read: a large MAAS list takes its time there.
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func(readErr error) {
		outcome := statusClass(resp.StatusCode)
		if readErr != nil {
			outcome = outcomeOf(readErr)
		}
		c.m.Upstream(c.upstream, op, outcome, time.Since(start))
	}}
	return resp, nil
}

// timedBody reports once: at the end of the body, at a read error, or at Close.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func(readErr error)
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.once.Do(func() { b.done(nil) })
	case err != nil:
		b.once.Do(func() { b.done(err) })
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(func() { b.done(nil) })
	return b.ReadCloser.Close()
}

// CloseIdleConnections passes through, so the client's Close still frees connections.
func (c *counted) CloseIdleConnections() {
	if ci, ok := c.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
