package plan

import (
	"context"
	"sync"
)

// Confirmation is a real call confirmed with the hash of the plan its administrator was
// shown. The gate puts it in the call's context; the change primitive (the store) checks
// it once, right after it has taken the change's lock and before it acts, so nothing of
// Apelora's can change between the check and the act: Check plans the call again, with
// the same code as a dry run, and answers PLAN_CHANGED when that plan's hash is not the
// approved one. The context it returns carries the approved plan, so each fact the act
// reads (Read) is checked against the one shown.
type Confirmation struct {
	mu    sync.Mutex
	plan  func(ctx context.Context) (*Plan, error)
	ran   bool
	found *Plan
	err   error
}

// NewConfirmation returns the confirmation that check decides: it plans the call again
// in ctx and answers the plan it approves, or why not.
func NewConfirmation(check func(ctx context.Context) (*Plan, error)) *Confirmation {
	return &Confirmation{plan: check}
}

type confirmationKey struct{}

// WithConfirmation returns ctx for a real call confirmed with c.
func WithConfirmation(ctx context.Context, c *Confirmation) context.Context {
	return context.WithValue(ctx, confirmationKey{}, c)
}

// ConfirmationFrom returns the call's confirmation, or nil for a call without a plan
// hash (and for a dry run).
func ConfirmationFrom(ctx context.Context) *Confirmation {
	c, _ := ctx.Value(confirmationKey{}).(*Confirmation)
	return c
}

// Check runs the check once per call (a second change of the same call gets the first
// one's answer) and returns ctx carrying the approved plan.
func (c *Confirmation) Check(ctx context.Context) (context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ran {
		c.found, c.err = c.plan(context.WithValue(ctx, confirmationKey{}, (*Confirmation)(nil)))
		c.ran = true
	}
	if c.err != nil {
		return ctx, c.err
	}
	return WithApproved(ctx, *c.found), nil
}

// Checked reports whether the check ran: a confirmed call that succeeded without it never
// compared its plan (a programming error the gate reports).
func (c *Confirmation) Checked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran
}
