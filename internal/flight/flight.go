// Package flight shares one in-flight upstream call among the callers that ask while it
// runs (single-flight). A caller arriving after the call finished starts a new one, so
// every answer is as fresh as the call it shared: nothing is cached, errors included.
package flight

import (
	"context"
	"sync"
)

// Call shares one call at a time. The zero value is ready to use.
//
// The shared call runs on a context detached from any one caller's cancellation (it keeps
// the first caller's values: request id, tracing). A caller whose context ends stops
// waiting and gets its context's error; the call goes on for the others, and is cancelled
// only when every caller waiting on it has gone. Deadlines are the upstream client's own
// (every client bounds each call), not a caller's.
//
// The value is handed to every caller as is: callers must treat it as read-only.
type Call[V any] struct {
	mu  sync.Mutex
	cur *call[V]
}

type call[V any] struct {
	done    chan struct{}
	val     V
	err     error
	waiting int // callers still waiting; at 0 the call is cancelled
	// panicked is what fn panicked with: each caller panics with it in its own goroutine
	// (where the server's recovery reports it), rather than the process dying.
	panicked any
	cancel   context.CancelFunc
}

// Do returns the result of fn, run once for every caller that arrives while it runs.
func (c *Call[V]) Do(ctx context.Context, fn func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	cl := c.cur
	if cl == nil {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		cl = &call[V]{done: make(chan struct{}), cancel: cancel}
		c.cur = cl
		go c.run(cl, cctx, fn)
	}
	cl.waiting++
	c.mu.Unlock()

	select {
	case <-cl.done:
		if cl.panicked != nil {
			panic(cl.panicked)
		}
		return cl.val, cl.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	cl.waiting--
	if cl.waiting == 0 {
		// Nobody wants this answer any more: stop asking, and let the next caller start
		// afresh rather than join a cancelled call.
		if c.cur == cl {
			c.cur = nil
		}
		cl.cancel()
	}
	c.mu.Unlock()
	var zero V
	return zero, context.Cause(ctx)
}

// Waiting is how many callers wait on the call in flight (0: none in flight), for tests
// and diagnostics.
func (c *Call[V]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return 0
	}
	return c.cur.waiting
}

// Forget makes the next caller start a new call even while one is in flight (its callers
// still get its answer). A writer calls it once its write is done, so that a read after
// the write never shares a call that started before it.
func (c *Call[V]) Forget() {
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
}

func (c *Call[V]) run(cl *call[V], ctx context.Context, fn func(context.Context) (V, error)) {
	defer cl.cancel()
	var v V
	var err error
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		v, err = fn(ctx)
	}()
	c.mu.Lock()
	cl.val, cl.err, cl.panicked = v, err, panicked
	if c.cur == cl {
		c.cur = nil // the next caller starts a new call: nothing is remembered
	}
	c.mu.Unlock()
	close(cl.done)
}

// Group is a Call per key: callers of the same key share its call in flight, callers of
// different keys do not wait for each other. A key is kept only while its call has
// callers, so the group holds no more than what is in flight.
type Group[V any] struct {
	mu    sync.Mutex
	calls map[string]*Call[V]
}

// Do runs fn for key, or waits for the call of key already in flight, as Call.Do does.
func (g *Group[V]) Do(ctx context.Context, key string, fn func(context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*Call[V]{}
	}
	c := g.calls[key]
	if c == nil {
		c = &Call[V]{}
		g.calls[key] = c
	}
	g.mu.Unlock()
	v, err := c.Do(ctx, fn)
	g.mu.Lock()
	if g.calls[key] == c && c.Waiting() == 0 {
		delete(g.calls, key)
	}
	g.mu.Unlock()
	return v, err
}

// Forget makes every caller from now on start a new call, whatever its key.
func (g *Group[V]) Forget() {
	g.mu.Lock()
	for _, c := range g.calls {
		c.Forget()
	}
	g.calls = nil
	g.mu.Unlock()
}

// Keys is how many keys have a call in flight (for tests).
func (g *Group[V]) Keys() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}
