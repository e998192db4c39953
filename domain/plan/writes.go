package plan

import (
	"context"
	"sync"
)

// Writes is the one seam every outbound change goes through: an Incus or MAAS request
// other than a read, a SQL write of a change, a NOTIFY, a join token. The gate chooses,
// once per request, whether the request's changes are made or planned (With puts the
// Recorder of a dry run in its context); Do obeys that choice, so no caller decides it
// again. Either way Do then tells every hook added with AfterEach: the shared reads in
// flight are forgotten and the call is counted whether it was made or planned, so no
// caller can forget either.
//
// One Writes serves a process (app's wiring hands the same one to every adapter); the
// zero value is ready and has no hooks; a nil *Writes makes and plans as well, with none.
type Writes struct {
	mu    sync.Mutex
	hooks []func(s System, planned bool)
}

// AfterEach has fn called after every write through w, planned or made, with the
// system it went to. fn must be quick and safe for concurrent use.
func (w *Writes) AfterEach(fn func(s System, planned bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, fn)
}

// Do makes one outbound change to s. In a dry run (ctx carries a Recorder) it records
// the call describe returns and sends nothing; otherwise it calls send. describe runs only
// in a dry run, so it may read (the resource before a PUT). planned reports which
// happened: a caller that needs an answer from the upstream makes a plausible one up.
//
// Before a real change to Incus or MAAS it asks the change in progress (BeforeUpstream)
// whether it may be sent: the change commits the approved step as its intent first, and
// nothing is sent when that cannot be done (fail closed).
func (w *Writes) Do(ctx context.Context, s System, describe func() Call, send func() error) (planned bool, err error) {
	r := From(ctx)
	if r != nil {
		defer w.wrote(s, true)
		c := describe()
		c.System = s
		r.Record(c)
		return true, nil
	}
	if s != Database {
		if before, ok := ctx.Value(beforeUpstreamKey{}).(func(context.Context, System) error); ok && before != nil {
			if err := before(ctx, s); err != nil {
				return false, err
			}
		}
	}
	defer w.wrote(s, false)
	return false, send()
}

type beforeUpstreamKey struct{}

// BeforeUpstream returns ctx in which every real change to Incus or MAAS through Do first
// calls before, which may refuse it (nothing is then sent). A change in progress puts it
// in its context: it records its intent before its first upstream call.
func BeforeUpstream(ctx context.Context, before func(ctx context.Context, s System) error) context.Context {
	return context.WithValue(ctx, beforeUpstreamKey{}, before)
}

func (w *Writes) wrote(s System, planned bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	hooks := w.hooks
	w.mu.Unlock()
	for _, fn := range hooks {
		fn(s, planned)
	}
}
