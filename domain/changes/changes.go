// Package changes is what becomes of a step Apelora sent to Incus or MAAS: its intent (the
// approved step: actor, input, plan and its hash) is committed before anything is sent,
// and its outcome after (postgres.Store's change). When the process carrying it out stops
// between the two (it was killed, its database failed over or was lost), the step's
// outcome is never written: the Reconciler finds such steps once their lease has ended,
// has a Judge of the step's action read Incus or MAAS, and records what really happened,
// once, with the database facts of that outcome (the admission Incus carries the mark of,
// the maintenance operation Incus runs …).
//
// The judges belong to the domains that take the steps (enrolment, admission,
// maintenance, placement, provisioning, rolling); each only reads. A step no judge knows is
// recorded FAILED, saying that nothing told what became of it.
package changes

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/leader"
)

// FoundAfterRestart begins what the reconciler records of every step it finishes.
const FoundAfterRestart = "outcome found after a restart"

// Step is a step whose outcome is not recorded: what its intent recorded.
type Step struct {
	// Intent is the audit event of its intent.
	Intent int64
	// Key is the lease it was taken under ("machine m2").
	Key        string
	Action     string
	Machine    string
	Actor      string
	RequestID  string
	Parameters map[string]any
	// Details are the intent's: approvedInput, approvedPlan, planHash and what the domain
	// noted before it sent the step (an admission's id, a MAAS machine's system id …).
	Details   map[string]any
	StartedAt time.Time
}

// Input is the step's input argument ("input"), as approved (normalised); nil when the
// intent has none.
func (s Step) Input() map[string]any {
	a, _ := s.Details["approvedInput"].(map[string]any)
	in, _ := a["input"].(map[string]any)
	return in
}

// Text is a string field of the input, or of the details when the input has none.
func (s Step) Text(field string) string {
	if v, ok := s.Input()[field].(string); ok {
		return v
	}
	v, _ := s.Details[field].(string)
	return v
}

// Verdict is what became of a step, as its judge read it in Incus or MAAS.
type Verdict struct {
	// Outcome is SUCCEEDED (it happened) or FAILED (it did not, or not all of it).
	Outcome audit.Outcome
	// Found is what Incus or MAAS showed, in words ("MAAS shows node-a Deploying").
	Found string
}

// Judge reads Incus or MAAS and says what became of step. It runs inside the reconciler's
// change of the step's lock: the database facts of the outcome it records through its
// stores (the admission, the maintenance operation) commit with the outcome. An error
// means it cannot tell now (Incus or MAAS did not answer): the step is judged again later.
type Judge func(ctx context.Context, s Step) (Verdict, error)

// Store is what the reconciler needs from the database.
type Store interface {
	// Unfinished lists the steps whose outcome is not recorded and whose lease ended
	// more than grace ago (or is another epoch's): their process no longer carries them.
	Unfinished(ctx context.Context, grace time.Duration) ([]Step, error)
	// Reconcile takes the step's lease (a new epoch: a process that comes back with the
	// old one records nothing more), runs judge in a change of the step's lock and
	// records its verdict as the step's outcome, with what judge wrote, in one transaction;
	// done is false when the lease was not free (try later) or the outcome was recorded
	// meanwhile.
	Reconcile(ctx context.Context, s Step, judge func(ctx context.Context) (Verdict, error)) (done bool, err error)
}

// Leadership hands out the reconciler's lease: one API replica reconciles at a time.
type Leadership interface {
	TryLead(ctx context.Context) (leader.Lease, error)
}

// Reconciler records the outcomes of steps cut off from them.
type Reconciler struct {
	Store  Store
	Judges map[string]Judge
	// Grace is how long after a step's lease ended it is judged: the last call its
	// process may have had in flight has reached Incus or MAAS by then (the request
	// timeout bounds every call).
	Grace time.Duration
	// Interval is how often the leader looks (at start, then every Interval).
	Interval   time.Duration
	Leadership Leadership
	Lease      time.Duration
	Leading    func(epoch int64, renewed time.Time)
	Log        *slog.Logger
	// Recorded is told of every outcome recorded (metrics, tests); nil: nobody.
	Recorded func(s Step, v Verdict)
}

// Round judges every step cut off from its outcome, and returns how many outcomes it
// recorded. A step whose judge cannot tell now waits for the next round.
func (r *Reconciler) Round(ctx context.Context) (int, error) {
	steps, err := r.Store.Unfinished(ctx, r.Grace)
	if err != nil {
		return 0, err
	}
	recorded := 0
	var errs []error
	for _, s := range steps {
		judge, ok := r.Judges[s.Action]
		if !ok {
			judge = unknown
		}
		var v Verdict
		done, err := r.Store.Reconcile(ctx, s, func(ctx context.Context) (Verdict, error) {
			var err error
			v, err = judge(ctx, s)
			return v, err
		})
		if err != nil {
			errs = append(errs, err)
			r.log().Warn("could not tell what became of a step whose outcome was not recorded; trying again later",
				"action", s.Action, "machine", s.Machine, "intent", s.Intent, "error", err)
			continue
		}
		if !done {
			continue
		}
		recorded++
		r.log().Warn("recorded the outcome of a step its process did not record", "action", s.Action, "machine", s.Machine,
			"intent", s.Intent, "request_id", s.RequestID, "outcome", v.Outcome, "found", v.Found)
		if r.Recorded != nil {
			r.Recorded(s, v)
		}
	}
	return recorded, errors.Join(errs...)
}

// unknown is the verdict on a step no judge knows: recorded, so the machine is not held
// BUSY for ever, and said as it is.
func unknown(_ context.Context, s Step) (Verdict, error) {
	return Verdict{Outcome: audit.Failed, Found: "no rule of this release reads what became of a " + s.Action +
		" step: look at the machine in Incus and MAAS"}, nil
}

// Run reconciles while this process leads (internal/leader), until ctx ends: at once
// when it takes the lead (so a restarted server finds what it left), then every Interval.
func (r *Reconciler) Run(ctx context.Context) {
	every := r.Interval
	if every <= 0 {
		every = 10 * time.Second
	}
	leader.Run(ctx, r.Leadership.TryLead, func(ctx context.Context, _ leader.Lease) {
		for {
			if _, err := r.Round(ctx); err != nil && ctx.Err() == nil {
				r.log().Debug("reconcile round", "error", err)
			}
			if leader.Sleep(ctx, every) != nil {
				return
			}
		}
	}, leader.Options{Retry: min(every, 10*time.Second), Log: r.log(), Lease: r.Lease, Leading: r.Leading,
		Unreachable: "the change reconciler cannot reach the database; retrying",
		Standby:     "another replica reconciles unrecorded step outcomes; standing by"})
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Actions lists the actions the judges cover, for tests that every step Apelora sends has
// one.
func (r *Reconciler) Actions() []string {
	out := make([]string, 0, len(r.Judges))
	for a := range r.Judges {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
