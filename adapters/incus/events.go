package incus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// LifecycleEvent is one lifecycle event of the cluster (GET /1.0/events?type=lifecycle):
// something was created, changed or deleted. A stream opened on one member carries the
// events of every member; Location names the one where it happened.
type LifecycleEvent struct {
	Action    string    // e.g. "cluster-member-updated", "cluster-token-created"
	Source    string    // the object's URL, e.g. "/1.0/cluster/members/m2"
	Location  string    // the member where it happened
	Project   string    // "" outside projects
	Timestamp time.Time // Incus's clock
}

// Lifecycle actions the product reacts to (Incus has many more: instances, images …).
const (
	ActionMemberAdded   = "cluster-member-added"
	ActionMemberUpdated = "cluster-member-updated"
	ActionMemberRemoved = "cluster-member-removed"
	ActionTokenCreated  = "cluster-token-created"
)

const memberSourcePrefix = "/1.0/cluster/members/"

// Member returns the member an event is about when its source is a cluster member
// (/1.0/cluster/members/<name>), else "".
func (e LifecycleEvent) Member() string {
	src, _, _ := strings.Cut(e.Source, "?")
	name, ok := strings.CutPrefix(src, memberSourcePrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return ""
	}
	return name
}

// Keep-alive of an event stream: a ping every eventPing; a stream that has received
// nothing (no event, no pong) for eventPing plus the request timeout is taken for lost,
// so a member that hangs after the handshake is noticed. Variables for tests.
var eventPing = 15 * time.Second

// maxEventSize bounds one event message; a larger one ends the stream.
const maxEventSize = 1 << 20

// EventStream is an open stream of lifecycle events. Next is for one goroutine; Close
// may be called from any.
type EventStream struct {
	conn     *websocket.Conn
	endpoint string
	silence  time.Duration
	logger   *slog.Logger
	done     chan struct{}
	once     sync.Once
}

// Lifecycle opens the cluster's lifecycle event stream on the member the client talks to,
// over the same transport as every call (the pinned cluster certificate and the client
// certificate, or the unix socket). The handshake is bounded like any call
// (Config.Timeout); the stream then stays open until ctx ends, Close is called, or the
// connection is lost.
func (c *Client) Lifecycle(ctx context.Context) (*EventStream, error) {
	parent := ctx
	hctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.eps == nil {
		conn, err := c.openEvents(parent, hctx, c.endpoint)
		if err != nil {
			return nil, err
		}
		return c.eventStream(ctx, conn, c.endpoint), nil
	}
	// Any member's stream carries every member's events: the first that opens one.
	var errs []error
	for _, base := range c.eps.order() {
		conn, err := c.openEvents(parent, hctx, base)
		if err == nil {
			c.eps.answered(base)
			return c.eventStream(ctx, conn, base), nil
		}
		errs = append(errs, err)
		if !isConnectError(err) || hctx.Err() != nil || ownBound(parent, hctx) {
			break
		}
		c.eps.failed(base)
	}
	return nil, errors.Join(errs...)
}

// openEvents opens the event stream at one address (base; the socket when c.eps is nil).
func (c *Client) openEvents(parent, hctx context.Context, base string) (*websocket.Conn, error) {
	const path = "/1.0/events"
	d := &websocket.Dialer{ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10}
	var u string
	if c.socket != "" {
		sock := c.socket
		d.NetDialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dialer.DialContext(ctx, "unix", sock)
		}
		u = "ws://incus" + path
	} else {
		// Its own TLS connection, opened like the REST transport's (the connect bound, the
		// pin) but offering HTTP/1.1 only: a websocket upgrade must be HTTP/1.1.
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			cfg := pinnedTLSConfigFor(c.cert, c.pins, c.pinSource)
			cfg.NextProtos = []string{"http/1.1"}
			return c.dialPinned(ctx, network, addr, cfg)
		}
		u = "wss" + strings.TrimPrefix(base, "https") + path
	}
	u += "?type=lifecycle"
	header := http.Header{"User-Agent": {"apelora-fabric"}}
	start := time.Now()
	conn, resp, err := d.DialContext(hctx, u, header)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if c.logger != nil {
		c.logger.LogAttrs(hctx, slog.LevelDebug, "incus request",
			slog.String("method", http.MethodGet), slog.String("path", path), slog.String("member", base),
			slog.Int("status", status), slog.Duration("took", time.Since(start)))
	}
	if err != nil {
		switch {
		case errors.Is(err, websocket.ErrBadHandshake) && resp != nil:
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			var res result
			if derr := decodeAnswer(http.MethodGet, path, resp.StatusCode, raw, &res, nil); derr != nil {
				err = derr
			} else {
				err = fmt.Errorf("incus GET %s: answered HTTP %d instead of opening the event stream", path, resp.StatusCode)
			}
			return nil, err
		case ownBound(parent, hctx):
			// The dialer turns the handshake's deadline into the connection's, whose read may
			// time out a moment before the context says it is done: both are the bound.
			err = &TimeoutError{After: c.timeout}
		}
		return nil, fmt.Errorf("incus GET %s at %s: %w", path, base, err)
	}
	return conn, nil
}

// eventStream wraps an open stream.
func (c *Client) eventStream(ctx context.Context, conn *websocket.Conn, endpoint string) *EventStream {
	conn.SetReadLimit(maxEventSize)
	s := &EventStream{conn: conn, endpoint: endpoint, silence: eventPing + c.timeout, logger: c.logger, done: make(chan struct{})}
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(s.silence)) })
	_ = conn.SetReadDeadline(time.Now().Add(s.silence))
	go s.ping()
	return s
}

func (s *EventStream) ping() {
	t := time.NewTicker(eventPing)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			// WriteControl may run beside Next's reads; a failure shows up there.
			_ = s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(eventPing))
		}
	}
}

// Close ends the stream; Next then returns an error. Safe to call more than once.
func (s *EventStream) Close() error {
	s.once.Do(func() {
		close(s.done)
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = s.conn.Close()
	})
	return nil
}

// ErrStreamClosed is returned by Next after Close (or the stream's context ended).
var ErrStreamClosed = errors.New("Incus event stream closed")

// eventJSON is the part of an event Apelora reads. Requestor (who did it) and context are
// left out: nothing here needs them.
type eventJSON struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Location  string    `json:"location"`
	Project   string    `json:"project"`
	Metadata  struct {
		Action string `json:"action"`
		Source string `json:"source"`
	} `json:"metadata"`
}

// Next waits for the next lifecycle event. It returns an error when the stream ends: closed
// (ErrStreamClosed), the connection lost, or nothing received for the keep-alive period.
// Messages that are not lifecycle events, or not JSON, are skipped.
func (s *EventStream) Next() (LifecycleEvent, error) {
	for {
		_, data, err := s.conn.ReadMessage()
		if err != nil {
			select {
			case <-s.done:
				return LifecycleEvent{}, ErrStreamClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("nothing received for %s (not even a keep-alive answer): %w", s.silence, err)
			}
			return LifecycleEvent{}, fmt.Errorf("incus event stream at %s: %w", s.endpoint, err)
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(s.silence))
		ev, ok := decodeLifecycle(data)
		if !ok {
			if s.logger != nil {
				s.logger.Debug("incus event stream: skipped a message that is not a lifecycle event", "bytes", len(data))
			}
			continue
		}
		return ev, nil
	}
}

// decodeLifecycle reads one event message; false for anything that is not a lifecycle
// event with an action.
func decodeLifecycle(data []byte) (LifecycleEvent, bool) {
	var e eventJSON
	if err := json.Unmarshal(data, &e); err != nil || e.Type != "lifecycle" || e.Metadata.Action == "" {
		return LifecycleEvent{}, false
	}
	return LifecycleEvent{Action: e.Metadata.Action, Source: e.Metadata.Source, Location: e.Location,
		Project: e.Project, Timestamp: e.Timestamp}, true
}

// LifecycleWatch says what WatchLifecycle does with what it sees. Every function is
// optional and called from WatchLifecycle's goroutine.
type LifecycleWatch struct {
	// Connected is called after each (re)connection: events may have been missed before
	// it, so a watcher that must not miss any reads the state again.
	Connected func()
	// Event is called for each lifecycle event.
	Event func(LifecycleEvent)
	// Lost is called when a connection attempt fails or an open stream ends, with the
	// wait before the next attempt.
	Lost func(err error, retryIn time.Duration)
	// MinBackoff and MaxBackoff bound the wait between attempts (default 1 s and 30 s);
	// it doubles after each failed attempt and starts again after a stream that opened.
	MinBackoff, MaxBackoff time.Duration
}

// WatchLifecycle keeps a lifecycle stream open until ctx ends, reconnecting after a loss.
func (c *Client) WatchLifecycle(ctx context.Context, w LifecycleWatch) {
	minB, maxB := w.MinBackoff, w.MaxBackoff
	if minB <= 0 {
		minB = time.Second
	}
	if maxB < minB {
		maxB = max(30*time.Second, minB)
	}
	backoff := minB
	for ctx.Err() == nil {
		s, err := c.Lifecycle(ctx)
		if err == nil {
			backoff = minB
			if w.Connected != nil {
				w.Connected()
			}
			for {
				ev, nerr := s.Next()
				if nerr != nil {
					err = nerr
					break
				}
				if w.Event != nil {
					w.Event(ev)
				}
			}
			s.Close()
		}
		if ctx.Err() != nil {
			return
		}
		if w.Lost != nil {
			w.Lost(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxB)
	}
}

// ownBound reports whether the handshake ended because its own bound (hctx, derived from
// parent with the request timeout) ran out, not the caller's: hctx's deadline is its own
// when parent has none or a later one, and it has passed (or hctx says so).
func ownBound(parent, hctx context.Context) bool {
	if parent.Err() != nil {
		return false
	}
	d, _ := hctx.Deadline()
	if pd, ok := parent.Deadline(); ok && !pd.After(d) {
		return false
	}
	return hctx.Err() != nil || !time.Now().Before(d)
}
