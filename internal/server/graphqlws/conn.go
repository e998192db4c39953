package graphqlws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/internal/apperr"
)

// Close codes (graphql-transport-ws and RFC 6455).
const (
	closeGoingAway       = 1001
	closeInternalError   = 1011
	closeTryAgainLater   = 1013
	closeBadRequest      = 4400
	closeUnauthorized    = 4401
	closeForbidden       = 4403
	closeBadSubprotocol  = 4406
	closeInitTimeout     = 4408
	closeDuplicateID     = 4409
	closeTooManyInitials = 4429
)

var (
	msgAck  = []byte(`{"type":"connection_ack"}`)
	msgPing = []byte(`{"type":"ping"}`)
	msgPong = []byte(`{"type":"pong"}`)
)

// outMsg is one message to write: head alone, or head + body + "}" (a `next` message built
// from an operation's head and a payload shared by its stream's subscribers).
type outMsg struct {
	head, body []byte
}

// conn is one socket. Its reader runs in serve; writes are queued and written by flush,
// which runs only while the queue has messages.
type conn struct {
	t     *Transport
	exec  graphql.GraphExecutor
	ws    *websocket.Conn
	start time.Time

	// ctx is the socket's context: the request's values, ended when the socket ends;
	// after connection_init, the one Init returned. Only the reader uses it.
	ctx      context.Context
	cancel   context.CancelFunc
	logCtx   context.Context // the request's values, for log lines from any goroutine
	shutdown context.Context // the server's shutdown signal, if it gave one

	mu           sync.Mutex
	room         sync.Cond // signalled when the queue is taken, or waiting is over
	ops          map[string]*operation
	queue        []outMsg
	writing      bool
	closing      bool
	closeCode    int
	closeReason  string
	initReceived bool
	acked        bool
	unanswered   int         // pings sent since the last pong
	timer        *time.Timer // the init timeout, then the ping interval
	watches      []func() bool
}

// operation is one subscribe message's operation on a socket.
type operation struct {
	conn   *conn
	id     string
	head   []byte // `{"id":"…","type":"next","payload":`
	cancel context.CancelFunc
	// Guarded by conn.mu.
	group *group // the shared stream it is subscribed to, if any
	done  bool   // no more messages are sent for it
	ended func() // from Options.Subscribed: called once when it is done
}

// finishLocked marks op done (no more messages are sent for it) and tells
// Options.Subscribed's ended, once.
func (op *operation) finishLocked() {
	op.done = true
	if op.ended != nil {
		op.ended()
		op.ended = nil
	}
}

func newConn(t *Transport, exec graphql.GraphExecutor, ws *websocket.Conn, r *http.Request) *conn {
	// The socket outlives the HTTP handler (see Transport.Do): keep the request's values
	// (request id, identity), not its end.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	shutdown, _ := r.Context().Value(shutdownKey{}).(context.Context)
	c := &conn{t: t, exec: exec, ws: ws, start: time.Now(), ctx: ctx, cancel: cancel, logCtx: ctx, shutdown: shutdown, ops: map[string]*operation{}}
	c.room.L = &c.mu
	return c
}

// serve reads and handles messages until the socket closes.
func (c *conn) serve() {
	defer c.finish()
	defer c.recover("reading")
	c.ws.SetReadLimit(readLimit)
	if c.ws.Subprotocol() != Subprotocol {
		c.close(closeBadSubprotocol, "Subprotocol not acceptable")
	} else {
		c.mu.Lock()
		c.timer = time.AfterFunc(c.t.opts.InitTimeout, c.tick)
		c.mu.Unlock()
		if c.shutdown != nil {
			c.watch(c.shutdown)
		}
	}
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.tooLarge()
			}
			return
		}
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			continue // waiting for the client's close frame
		}
		if typ != websocket.TextMessage {
			c.close(closeBadRequest, "Invalid message received: binary")
			continue
		}
		c.handle(data)
	}
}

// recover turns a panic in the transport's own code into a log line and a closed socket
// (the goroutines of a socket are not the HTTP server's, which would recover it).
func (c *conn) recover(doing string) {
	if r := recover(); r != nil {
		c.t.opts.Log.ErrorContext(c.logCtx, "panic in the websocket transport", "while", doing, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		c.close(closeInternalError, "Internal server error")
	}
}

// watch closes the socket when ctx ends: with 4403 and the cause's message when the cause
// is an identity's refusal (revoked or expired), otherwise as going away (shutdown).
func (c *conn) watch(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		if e, ok := apperr.As(context.Cause(ctx)); ok && (e.Code == apperr.Unauthenticated || e.Code == apperr.Forbidden) {
			c.close(closeForbidden, e.Message)
			return
		}
		c.close(closeGoingAway, "The server is shutting down")
	})
	c.mu.Lock()
	c.watches = append(c.watches, stop)
	c.mu.Unlock()
}

type message struct {
	ID      *string         `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

type subscribePayload struct {
	Query         *string        `json:"query"`
	OperationName *string        `json:"operationName"`
	Variables     map[string]any `json:"variables"`
	Extensions    map[string]any `json:"extensions"`
}

func (c *conn) handle(data []byte) {
	start := graphql.Now()
	var m message
	if err := json.Unmarshal(data, &m); err != nil || m.Type == "" {
		c.close(closeBadRequest, "Invalid message received")
		return
	}
	switch m.Type {
	case "connection_init":
		var payload InitPayload
		if !objectOrNull(m.Payload) || json.Unmarshal(orNull(m.Payload), &payload) != nil {
			c.close(closeBadRequest, "Invalid message received: connection_init payload")
			return
		}
		c.init(payload)
	case "ping":
		if !objectOrNull(m.Payload) {
			c.close(closeBadRequest, "Invalid message received: ping payload")
			return
		}
		pong := msgPong
		if len(m.Payload) > 0 && !bytes.Equal(m.Payload, []byte("null")) {
			pong, _ = json.Marshal(struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}{"pong", m.Payload})
		}
		c.send(outMsg{head: pong})
	case "pong":
		if !objectOrNull(m.Payload) {
			c.close(closeBadRequest, "Invalid message received: pong payload")
			return
		}
		c.mu.Lock()
		c.unanswered = 0
		c.mu.Unlock()
	case "subscribe":
		c.mu.Lock()
		acked := c.acked
		c.mu.Unlock()
		if !acked {
			c.close(closeUnauthorized, "Unauthorized")
			return
		}
		if m.ID == nil || *m.ID == "" {
			c.close(closeBadRequest, "Invalid message received: subscribe without an id")
			return
		}
		var p subscribePayload
		dec := json.NewDecoder(bytes.NewReader(m.Payload))
		dec.UseNumber()
		if len(m.Payload) == 0 || m.Payload[0] != '{' || dec.Decode(&p) != nil || p.Query == nil {
			c.close(closeBadRequest, "Invalid message received: subscribe payload")
			return
		}
		params := &graphql.RawParams{Query: *p.Query, Variables: p.Variables, Extensions: p.Extensions}
		if p.OperationName != nil {
			params.OperationName = *p.OperationName
		}
		params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
		c.subscribe(*m.ID, params)
	case "complete":
		if m.ID == nil || *m.ID == "" {
			c.close(closeBadRequest, "Invalid message received: complete without an id")
			return
		}
		c.stop(*m.ID)
	default:
		c.close(closeBadRequest, "Invalid message received: type "+m.Type)
	}
}

// objectOrNull is true for an absent payload, null, or a JSON object.
func objectOrNull(raw json.RawMessage) bool {
	return len(raw) == 0 || raw[0] == '{' || bytes.Equal(raw, []byte("null"))
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func (c *conn) init(payload InitPayload) {
	c.mu.Lock()
	again := c.initReceived
	c.initReceived = true
	c.mu.Unlock()
	if again {
		c.close(closeTooManyInitials, "Too many initialisation requests")
		return
	}
	ctx := c.ctx
	if c.t.opts.Init != nil {
		// Init (a database lookup) runs on a goroutine of its own so that the reader's
		// stack, which every idle socket keeps, stays small.
		type result struct {
			ctx context.Context
			err error
		}
		done := make(chan result, 1)
		go func() {
			r := result{err: errors.New("init panicked")}
			defer func() { done <- r }()
			defer c.recover("authenticating")
			r.ctx, r.err = c.t.opts.Init(ctx, payload)
		}()
		r := <-done
		if r.err != nil {
			// A client over its limit of failed authentications hears why and when to come
			// back; graphql-ws clients treat 4429 as final, so they stop instead of retrying.
			if e, ok := apperr.As(r.err); ok && e.Code == apperr.RateLimited {
				c.close(closeTooManyInitials, e.Message)
				return
			}
			c.close(closeForbidden, "Forbidden")
			return
		}
		ctx = r.ctx
	}
	c.ctx = ctx
	c.watch(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.acked = true
	c.enqueueLocked(outMsg{head: msgAck})
	c.timer.Reset(c.t.opts.PingInterval)
}

// tick is the socket's timer: before the acknowledgement the init timeout, after it the
// keep-alive ping, which also drops a client that answered none of the last two.
func (c *conn) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing:
	case !c.initReceived:
		c.closeLocked(closeInitTimeout, "Connection initialisation timeout")
	case !c.acked:
		// Init is running; it sets the ping timer when it is done.
	case c.unanswered >= 2:
		c.closeLocked(closeTryAgainLater, "No pong to the last two pings")
	default:
		c.unanswered++
		c.enqueueLocked(outMsg{head: msgPing})
		c.timer.Reset(c.t.opts.PingInterval)
	}
}

func (c *conn) subscribe(id string, params *graphql.RawParams) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if _, dup := c.ops[id]; dup {
		c.mu.Unlock()
		c.close(closeDuplicateID, "Subscriber for "+id+" already exists")
		return
	}
	head, _ := json.Marshal(id)
	head = append(append([]byte(`{"id":`), head...), `,"type":"next","payload":`...)
	if len(c.ops) >= maxOperations {
		c.enqueueLocked(errorMessage(id, gqlerror.List{{
			Message:    "too many operations on one socket: complete some before starting more",
			Extensions: map[string]any{"code": "TOO_MANY_OPERATIONS", "limit": maxOperations},
		}}))
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	op := &operation{conn: c, id: id, head: head, cancel: cancel}
	c.ops[id] = op
	c.mu.Unlock()
	go c.run(ctx, op, params)
}

// run starts an operation: it joins its shared stream, or executes it on its own until it
// ends.
func (c *conn) run(ctx context.Context, op *operation, params *graphql.RawParams) {
	defer c.recover("starting an operation")
	ctx = graphql.StartOperationTrace(ctx)
	rc, errs := c.exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := c.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			c.fail(op, resp.Errors)
			return
		}
		c.next(op, resp)
		c.completed(op)
		return
	}
	if rc.Operation.Operation == ast.Subscription {
		var ends []func()
		if c.t.opts.AdmitSubscription != nil {
			release, refusal := c.t.opts.AdmitSubscription(ctx)
			if refusal != nil {
				c.fail(op, gqlerror.List{refusal})
				op.cancel()
				return
			}
			ends = append(ends, release)
		}
		if c.t.opts.Subscribed != nil {
			ends = append(ends, c.t.opts.Subscribed(ctx, rc))
		}
		if len(ends) > 0 {
			ended := func() {
				for _, f := range ends {
					f()
				}
			}
			c.mu.Lock()
			if op.done {
				ended()
			} else {
				op.ended = ended
			}
			c.mu.Unlock()
		}
	}
	if key, ok := c.t.shareKey(rc); ok && c.t.opts.Authorize(ctx) == nil {
		g := c.t.streams.join(key, ctx, rc, c.exec, op)
		c.mu.Lock()
		gone := op.done
		if !gone {
			op.group = g
		}
		c.mu.Unlock()
		if gone {
			c.t.streams.leave(g, op)
		}
		// The stream runs in the group's context; this one is no longer needed.
		op.cancel()
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.fail(op, recovered(ctx, rc, c.exec, r))
		}
	}()
	responses, ctx := c.exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		c.next(op, resp)
	}
	c.completed(op)
	op.cancel()
}

// recovered turns a panic while executing rc into the errors sent to the client.
func recovered(ctx context.Context, rc *graphql.OperationContext, exec graphql.GraphExecutor, r any) gqlerror.List {
	err := rc.Recover(ctx, r)
	if err == nil {
		err = errors.New("internal error")
	}
	return exec.DispatchError(graphql.WithOperationContext(ctx, rc), gqlerror.List{gqlerror.WrapIfUnwrapped(err)}).Errors
}

// next sends one result of an operation that runs on its own. Unlike a shared stream,
// which never waits for one socket, it waits while the socket's queue is half full: its
// results (a replay, say) come as fast as the socket takes them, and only this operation
// waits.
func (c *conn) next(op *operation, resp *graphql.Response) {
	payload, err := json.Marshal(resp)
	if err != nil {
		c.fail(op, gqlerror.List{{Message: "the result could not be encoded"}})
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) >= maxQueued/2 && !op.done && !c.closing {
		c.room.Wait()
	}
	if !op.done {
		c.enqueueLocked(outMsg{head: op.head, body: payload})
	}
}

// sendNext sends op a `next` message with payload, which may be shared with other
// subscribers and must not be changed.
func (c *conn) sendNext(op *operation, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !op.done {
		c.enqueueLocked(outMsg{head: op.head, body: payload})
	}
}

// completed ends op from the server's side with a `complete` message.
func (c *conn) completed(op *operation) {
	msg, _ := json.Marshal(struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}{op.id, "complete"})
	c.end(op, msg)
}

// fail ends op with an `error` message.
func (c *conn) fail(op *operation, errs gqlerror.List) {
	c.end(op, errorMessage(op.id, errs).head)
}

func errorMessage(id string, errs gqlerror.List) outMsg {
	msg, _ := json.Marshal(struct {
		ID      string        `json:"id"`
		Type    string        `json:"type"`
		Payload gqlerror.List `json:"payload"`
	}{id, "error", errs})
	return outMsg{head: msg}
}

func (c *conn) end(op *operation, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op.done {
		return
	}
	op.finishLocked()
	if c.ops[op.id] == op {
		delete(c.ops, op.id)
	}
	c.enqueueLocked(outMsg{head: msg})
}

// stop ends the operation id at the client's request (its `complete`); unknown ids are
// ignored, as the protocol allows.
func (c *conn) stop(id string) {
	c.mu.Lock()
	op := c.ops[id]
	if op == nil {
		c.mu.Unlock()
		return
	}
	op.finishLocked()
	delete(c.ops, id)
	g := op.group
	c.room.Broadcast()
	c.mu.Unlock()
	op.cancel()
	if g != nil {
		c.t.streams.leave(g, op)
	}
}

// send queues msg.
func (c *conn) send(msg outMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enqueueLocked(msg)
}

// enqueueLocked queues msg and makes sure a writer runs. A socket whose queue is full has
// fallen behind and is closed: nobody waits for it.
func (c *conn) enqueueLocked(msg outMsg) {
	if c.closing {
		return
	}
	if len(c.queue) >= maxQueued {
		c.t.opts.Log.InfoContext(c.logCtx, "websocket closed: the client fell behind", "queued", len(c.queue))
		c.closeLocked(closeTryAgainLater, "Fell behind: reconnect")
		return
	}
	c.queue = append(c.queue, msg)
	if !c.writing {
		c.writing = true
		go c.flush()
	}
}

// flush writes the queue until it is empty.
func (c *conn) flush() {
	defer c.recover("writing")
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		c.room.Broadcast()
		if len(batch) == 0 || c.closing {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, m := range batch {
			if err := c.write(m); err != nil {
				c.mu.Lock()
				c.writing = false
				c.closing = true
				c.room.Broadcast()
				c.mu.Unlock()
				_ = c.ws.NetConn().Close() // the reader ends and cleans up
				return
			}
		}
	}
}

var closeBrace = []byte("}")

func (c *conn) write(m outMsg) error {
	w, err := c.ws.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	_, err = w.Write(m.head)
	if err == nil && m.body != nil {
		if _, err = w.Write(m.body); err == nil {
			_, err = w.Write(closeBrace)
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

func (c *conn) close(code int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(code, reason)
}

// closeLocked starts closing the socket: nothing more is sent, the close frame goes out,
// and the reader waits a moment for the client's before it drops the connection.
func (c *conn) closeLocked(code int, reason string) {
	if !c.stopLocked(code, reason) {
		return
	}
	frame := websocket.FormatCloseMessage(code, truncate(reason, 123))
	go func() {
		_ = c.ws.WriteControl(websocket.CloseMessage, frame, time.Now().Add(time.Second))
		_ = c.ws.SetReadDeadline(time.Now().Add(closeWait))
	}()
}

// stopLocked marks the socket closing with code and reason: nothing more is sent and every
// operation is done. False when it was closing already.
func (c *conn) stopLocked(code int, reason string) bool {
	if c.closing {
		return false
	}
	c.closing = true
	c.closeCode, c.closeReason = code, reason
	c.queue = nil
	c.room.Broadcast()
	for _, op := range c.ops {
		op.finishLocked()
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	return true
}

// tooLarge ends a socket whose client sent a message over readLimit. gorilla has already
// sent the close frame, 1009 (Message Too Big), on seeing the frame's length; the rest of
// the message may still be arriving. It is read and dropped until the client closes or
// closeWait passes: a connection closed with unread data is reset, and a client whose
// writes fail under a reset (Node's ws, browsers) reports 1006 without reading the close
// frame that came first.
func (c *conn) tooLarge() {
	c.mu.Lock()
	c.stopLocked(websocket.CloseMessageTooBig, fmt.Sprintf("Message too big: at most %d bytes", readLimit))
	c.mu.Unlock()
	nc := c.ws.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(closeWait))
	_, _ = io.Copy(io.Discard, nc)
}

// truncate shortens s to at most n bytes, cut on a character boundary and marked with an
// ellipsis (a close reason is at most 123 bytes).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// finish releases everything the socket holds once its reader has ended.
func (c *conn) finish() {
	c.mu.Lock()
	c.closing = true
	c.room.Broadcast()
	ops := c.ops
	c.ops = nil
	c.queue = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	watches := c.watches
	c.watches = nil
	var shared []*operation
	for _, op := range ops {
		op.finishLocked()
		if op.group != nil {
			shared = append(shared, op)
		}
	}
	c.mu.Unlock()
	for _, stop := range watches {
		stop()
	}
	for _, op := range ops {
		op.cancel()
	}
	for _, op := range shared {
		c.t.streams.leave(op.group, op)
	}
	c.cancel()
	_ = c.ws.NetConn().Close()
	c.mu.Lock()
	code, reason := c.closeCode, c.closeReason
	c.mu.Unlock()
	c.t.opts.Log.InfoContext(c.logCtx, "websocket closed", "duration_ms", time.Since(c.start).Milliseconds(), "operations", len(ops), "close_code", code, "close_reason", reason)
}
