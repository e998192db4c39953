package server

import (
	"context"

	"github.com/apelora/fabric/internal/apperr"
)

// DefaultStepConcurrency is how many machine steps run at once when the configuration
// says nothing (APELORA_STEP_CONCURRENCY).
const DefaultStepConcurrency = 8

// stepSlots bounds how many machine steps (the mutations declared with lock MACHINE:
// register, commission, hardware tests, install, admit, release, …) run at once on this
// server, dry runs included, since each reads or writes MAAS and Incus. A bulk step is many
// such calls, each its own audited event; the bound lives here, in the gate every
// mutation passes, so no client (console, apeloractl, a script) can send MAAS or Incus
// more than it allows however many calls it makes at once. A call waits for a slot
// before its change begins, holding no lock and no transaction.
type stepSlots struct {
	slots chan struct{}
}

func newStepSlots(n int) *stepSlots {
	if n <= 0 {
		n = DefaultStepConcurrency
	}
	return &stepSlots{slots: make(chan struct{}, n)}
}

// take waits for a slot; the caller calls release when its step has ended. A request
// that ends while waiting is answered UNAVAILABLE: nothing of its step ran.
func (s *stepSlots) take(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, apperr.Wrap(context.Cause(ctx), apperr.Unavailable,
			"the request ended while waiting for one of the server's %d step slots (APELORA_STEP_CONCURRENCY): nothing of this step ran; run it again", cap(s.slots))
	}
}
