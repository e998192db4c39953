package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/errgroup"
)

const (
	subprotocol       = "graphql-transport-ws"
	subscriptionQuery = `subscription($n: String!) { admissionChecks(name: $n) { runId at checks { name result } verdict } }`
	reportQuery       = `query($n: String!) { admissionReport(name: $n) { runId verdict } }`
	closeRefused      = 4403
)

// load is a crowd of graphql-transport-ws subscribers on admissionChecks(name: machine),
// spoken directly over gorilla/websocket, and the trigger that makes the server push to them.
type load struct {
	base    string // http://127.0.0.1:port
	token   string
	machine string
	http    *http.Client

	subs    []*websocket.Conn
	closing atomic.Bool
	readers sync.WaitGroup

	mu          sync.Mutex
	verdicts    map[string][]delivery // run id → verdict deliveries
	live        map[int]bool          // subscribers that have received a verdict
	failures    []error               // subscribers that broke (closed, errors, complete)
	checks      atomic.Int64          // check results received
	checkEvents atomic.Int64          // messages with results and no verdict
	wakeWaits   chan struct{}         // signalled on every verdict
}

// delivery is one subscriber's receipt of a run's verdict.
type delivery struct {
	sub  int
	at   time.Time // the event's server timestamp
	recv time.Time // when the subscriber had read it
}

func newLoad(base, token, machine string) *load {
	return &load{
		base: base, token: token, machine: machine,
		http:      &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}},
		verdicts:  map[string][]delivery{},
		live:      map[int]bool{},
		wakeWaits: make(chan struct{}, 1),
	}
}

// connect opens n subscribers, parallel connections at a time, each authenticated and
// subscribed; their readers run until close.
func (l *load) connect(ctx context.Context, n, parallel int) error {
	u, err := url.Parse(l.base + "/graphql")
	if err != nil {
		return err
	}
	u.Scheme = "ws"
	l.subs = make([]*websocket.Conn, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error {
			c, err := l.dial(gctx, u.String())
			if err != nil {
				return fmt.Errorf("subscriber %d: %w", i, err)
			}
			l.subs[i] = c
			l.readers.Add(1)
			go l.read(i, c)
			return nil
		})
	}
	return g.Wait()
}

// dial opens one subscriber: connection_init with the bearer token, wait for
// connection_ack (answering pings), then subscribe.
func (l *load) dial(ctx context.Context, wsURL string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, Subprotocols: []string{subprotocol}, Proxy: nil}
	c, resp, err := d.DialContext(ctx, wsURL, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("open websocket: %w (HTTP %s)", err, resp.Status)
		}
		return nil, fmt.Errorf("open websocket: %w", err)
	}
	fail := func(err error) (*websocket.Conn, error) { c.Close(); return nil, err }
	if c.Subprotocol() != subprotocol {
		return fail(fmt.Errorf("server chose subprotocol %q, want %s", c.Subprotocol(), subprotocol))
	}
	if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + l.token}}); err != nil {
		return fail(fmt.Errorf("send connection_init: %w", err))
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for acked := false; !acked; {
		_, msg, err := c.ReadMessage()
		if websocket.IsCloseError(err, closeRefused) {
			return fail(errors.New("the server refused the token (4403): give a token with view-infrastructure"))
		}
		if err != nil {
			return fail(fmt.Errorf("wait for connection_ack: %w", err))
		}
		switch t := messageType(msg); t {
		case "connection_ack":
			acked = true
		case "ping":
			if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`)); err != nil {
				return fail(fmt.Errorf("answer ping: %w", err))
			}
		case "pong":
		default:
			return fail(fmt.Errorf("unexpected %q before connection_ack: %.200s", t, msg))
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	sub := map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": subscriptionQuery, "variables": map[string]string{"n": l.machine}}}
	if err := c.WriteJSON(sub); err != nil {
		return fail(fmt.Errorf("send subscribe: %w", err))
	}
	return c, nil
}

func messageType(msg []byte) string {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.Type
}

// read handles one subscriber's messages until the connection ends. The receipt time is
// taken as soon as a message has been read, before decoding it. Only this goroutine
// writes to the connection once it runs (pongs), as gorilla allows one writer.
func (l *load) read(i int, c *websocket.Conn) {
	defer l.readers.Done()
	for {
		_, msg, err := c.ReadMessage()
		recv := time.Now()
		if err != nil {
			if !l.closing.Load() {
				l.fail(fmt.Errorf("subscriber %d: connection ended: %w", i, err))
			}
			return
		}
		// Check results are only counted: the cheap test keeps the bench's own CPU use
		// (which competes with the server's) low.
		nChecks := int64(bytes.Count(msg, []byte(`"result":`)))
		if bytes.Contains(msg, []byte(`"verdict":null`)) && bytes.Contains(msg, []byte(`"type":"next"`)) {
			l.checks.Add(nChecks)
			l.checkEvents.Add(1)
			continue
		}
		// A verdict: its run id and time are read without decoding the whole message.
		if v, ok := quickVerdict(msg); ok {
			l.checks.Add(nChecks)
			l.verdict(i, v.run, v.at, recv)
			continue
		}
		var m struct {
			Type    string `json:"type"`
			Payload struct {
				Data struct {
					AdmissionChecks struct {
						RunID   string    `json:"runId"`
						At      time.Time `json:"at"`
						Verdict *string   `json:"verdict"`
					} `json:"admissionChecks"`
				} `json:"data"`
				Errors []struct {
					Message string `json:"message"`
				} `json:"errors"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			l.fail(fmt.Errorf("subscriber %d: undecodable message %.200q: %w", i, msg, err))
			continue
		}
		switch m.Type {
		case "ping":
			if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`)); err != nil && !l.closing.Load() {
				l.fail(fmt.Errorf("subscriber %d: answer ping: %w", i, err))
			}
		case "pong":
		case "next":
			if len(m.Payload.Errors) > 0 {
				l.fail(fmt.Errorf("subscriber %d: %s", i, m.Payload.Errors[0].Message))
				continue
			}
			e := m.Payload.Data.AdmissionChecks
			l.checks.Add(nChecks)
			if e.Verdict == nil {
				l.checkEvents.Add(1)
				continue
			}
			l.verdict(i, e.RunID, e.At, recv)
		case "error":
			l.fail(fmt.Errorf("subscriber %d: subscription error: %.300s", i, msg))
			return
		case "complete":
			l.fail(fmt.Errorf("subscriber %d: the server completed the subscription (it fell behind, or the server is stopping)", i))
			return
		default:
			l.fail(fmt.Errorf("subscriber %d: unexpected message %.200s", i, msg))
		}
	}
}

// verdict records subscriber i's receipt of run's verdict.
func (l *load) verdict(i int, run string, at, recv time.Time) {
	l.mu.Lock()
	l.verdicts[run] = append(l.verdicts[run], delivery{sub: i, at: at, recv: recv})
	l.live[i] = true
	l.mu.Unlock()
	select {
	case l.wakeWaits <- struct{}{}:
	default:
	}
}

type quick struct {
	run string
	at  time.Time
}

// quickVerdict reads a verdict's run id and time from a `next` message of the bench's own
// subscription (whose fields come in its order: runId, at, checks, verdict) without a full
// JSON decode; anything unexpected is left to the decoder.
func quickVerdict(msg []byte) (quick, bool) {
	if !bytes.Contains(msg, []byte(`"type":"next"`)) || bytes.Contains(msg, []byte(`"errors"`)) || !bytes.Contains(msg, []byte(`"verdict":"`)) {
		return quick{}, false
	}
	run, ok := stringField(msg, `"runId":"`)
	if !ok {
		return quick{}, false
	}
	at, ok := stringField(msg, `"at":"`)
	if !ok {
		return quick{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return quick{}, false
	}
	return quick{run: run, at: t}, true
}

// stringField returns the plain string (no escapes) after the first key in msg.
func stringField(msg []byte, key string) (string, bool) {
	i := bytes.Index(msg, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := msg[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return "", false
	}
	return string(rest[:j]), true
}

func (l *load) fail(err error) {
	l.mu.Lock()
	l.failures = append(l.failures, err)
	l.mu.Unlock()
}

// Failures returns what went wrong with subscribers so far.
func (l *load) Failures() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.failures...)
}

// Live returns how many subscribers have received at least one verdict.
func (l *load) Live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}

// trigger runs an admission report, whose check results and verdict the server pushes
// to every subscriber; it returns the run id and when the request was sent.
func (l *load) trigger(ctx context.Context) (string, time.Time, error) {
	body, _ := json.Marshal(map[string]any{"query": reportQuery, "variables": map[string]string{"n": l.machine}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	sent := time.Now()
	resp, err := l.http.Do(req)
	if err != nil {
		return "", sent, fmt.Errorf("admissionReport: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct {
		Data struct {
			AdmissionReport struct {
				RunID   string `json:"runId"`
				Verdict string `json:"verdict"`
			} `json:"admissionReport"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", sent, fmt.Errorf("admissionReport: HTTP %s, not JSON: %.200s", resp.Status, raw)
	}
	if len(r.Errors) > 0 {
		return "", sent, fmt.Errorf("admissionReport(name: %q): %s", l.machine, r.Errors[0].Message)
	}
	if r.Data.AdmissionReport.RunID == "" {
		return "", sent, fmt.Errorf("admissionReport: no run id in %.200s", raw)
	}
	return r.Data.AdmissionReport.RunID, sent, nil
}

// wait returns the verdict deliveries of run once want subscribers have it, or what
// arrived by the timeout.
func (l *load) wait(ctx context.Context, run string, want int, timeout time.Duration) []delivery {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		got := l.verdicts[run]
		l.mu.Unlock()
		if len(got) >= want {
			return got
		}
		select {
		case <-l.wakeWaits:
		case <-time.After(10 * time.Millisecond):
		case <-deadline.C:
			return got
		case <-ctx.Done():
			return got
		}
	}
}

// close ends every subscriber with a normal close.
func (l *load) close() {
	l.closing.Store(true)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bench done")
	for _, c := range l.subs {
		if c != nil {
			_ = c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			_ = c.Close()
		}
	}
	l.readers.Wait()
}
