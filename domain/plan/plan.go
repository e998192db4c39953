// Package plan is a mutation's dry run: the calls it would send (to Incus, MAAS, the
// database) and the refusals and warnings that would stop or qualify it. One mutation is
// one step of the administrator's (register, approve, admit …); its plan lists the calls
// that step is made of (docs/glossary.md).
//
// A dry run runs the same code as the real call. The gate puts a Recorder in the
// mutation's context; every outbound change (an Incus or MAAS write, a SQL write, a
// NOTIFY, a join token) goes through the one seam, Writes, which records a Call instead
// and lets the adapter answer a plausible result; reads go to the real upstreams, and the
// database change runs in a READ ONLY transaction, so a write that bypasses the seam is
// refused. Nothing else in the domain needs to know.
package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// System is where a call goes.
type System string

const (
	Incus    System = "INCUS"
	MAAS     System = "MAAS"
	Database System = "DATABASE"
)

// Change is one value a call would change: before → after ("" for none).
type Change struct {
	Field  string
	Before string
	After  string
}

// Call is one request the mutation would send: to Incus, to MAAS, or to the database.
type Call struct {
	System System
	// Request is the call as the upstream sees it ("PUT /1.0/cluster/members/{name}",
	// "POST machines/{id}/?op=deploy", "UPDATE machine_records").
	Request string
	Target  string
	Changes []Change
}

// Finding is a refusal or a warning, with its documented error code.
type Finding struct {
	Code    apperr.Code
	Message string
	Field   string
}

// Fact is something a plan read that the call depends on and no call shows (the hardware
// profile a setHardwareProfile replaces, the identity a revokeIdentity names, a MAAS
// machine's status): the plan's hash covers it, so a confirmation is refused when it
// changed.
type Fact struct {
	Name  string
	Value string
}

// Recorder collects a dry run's plan. Safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	mutation string
	input    map[string]any
	facts    []Fact
	calls    []Call
	writes   int // writes recorded, a call made twice counted twice
	refusals []Finding
	warnings []Finding
	quorum   *quorum.Projection
}

// Plan is a finished dry run.
type Plan struct {
	// Mutation and Input are the call the plan is for (Input as its hash covers it:
	// internal/mutations.Input); both are in the hash.
	Mutation string
	Input    map[string]any
	Facts    []Fact
	Calls    []Call
	Refusals []Finding
	Warnings []Finding
	// Quorum is what the call would do to Incus's database, for a call that takes a member
	// away; nil otherwise.
	Quorum *quorum.Projection
}

// Refused reports whether the call would be refused.
func (p Plan) Refused() bool { return len(p.Refusals) > 0 }

type ctxKey struct{}

// With returns ctx carrying r: every call made with it is a dry run.
func With(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// From returns the dry run in progress, or nil for a real call.
func From(ctx context.Context) *Recorder {
	r, _ := ctx.Value(ctxKey{}).(*Recorder)
	return r
}

// For returns a recorder for a plan of the call mutation with input (normalised: what its
// hash covers).
func For(mutation string, input map[string]any) *Recorder {
	return &Recorder{mutation: mutation, input: input}
}

// Read is the one way domain code reads a fact its call depends on (the profile a change
// replaces, the identity it revokes): in a dry run it records the fact in the plan (its
// hash covers it); in the real call confirming an approved plan (WithApproved) it refuses
// with PLAN_CHANGED when the fact, read now in the change's own transaction, is not the one
// the plan read, so nothing is acted on that the administrator did not see. Otherwise
// (automation that sends no planHash) it answers nil.
func Read(ctx context.Context, name, value string) error {
	if r := From(ctx); r != nil {
		r.Fact(name, value)
		return nil
	}
	p, ok := ctx.Value(approvedKey{}).(*Plan)
	if !ok {
		return nil
	}
	for _, f := range p.Facts {
		if f.Name == name {
			if f.Value == value {
				return nil
			}
			return Changed(fmt.Sprintf("%s was %q when the plan was shown and is %q now", name, f.Value, value))
		}
	}
	return Changed(fmt.Sprintf("the plan shown did not depend on %s, the call does now", name))
}

// Changed is the refusal of a confirmation whose plan is no longer the one shown.
func Changed(why string) *apperr.Error {
	msg := "the plan changed since it was shown (another change, or the cluster moved on): nothing was changed; look at the new plan and confirm it again"
	if why != "" {
		msg = "the plan changed since it was shown: " + why + "; nothing was changed: look at the new plan and confirm it again"
	}
	return &apperr.Error{Code: apperr.PlanChanged, Field: "planHash", Message: msg}
}

type approvedKey struct{}

// WithApproved returns ctx for the real call that confirms p: the facts it reads must be
// p's (Read).
func WithApproved(ctx context.Context, p Plan) context.Context {
	return context.WithValue(ctx, approvedKey{}, &p)
}

// Fact adds a fact the plan read.
func (r *Recorder) Fact(name, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := Fact{Name: name, Value: value}
	if !slices.Contains(r.facts, f) {
		r.facts = append(r.facts, f)
	}
}

// Active reports whether ctx is a dry run.
func Active(ctx context.Context) bool { return From(ctx) != nil }

// Record adds a call. A plan lists each call once: a call that would be sent again with
// the same target and changes (the admission checks' NOTIFY of each result) is one call.
func (r *Recorder) Record(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	for _, had := range r.calls {
		if had.System == c.System && had.Request == c.Request && had.Target == c.Target && slices.Equal(had.Changes, c.Changes) {
			return
		}
	}
	r.calls = append(r.calls, c)
}

// Writes reports how many writes the plan recorded: a call made twice (listed once)
// counts twice.
func (r *Recorder) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Refuse adds the refusal err stands for (its code and public message).
func (r *Recorder) Refuse(err error) {
	f := Finding{Code: apperr.CodeOf(err), Message: apperr.PublicMessage(err)}
	if e, ok := apperr.As(err); ok {
		f.Field = e.Field
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.refusals, f) {
		r.refusals = append(r.refusals, f)
	}
}

// Warn adds a warning: the call would go ahead, but the administrator should know.
func (r *Recorder) Warn(code apperr.Code, format string, args ...any) {
	f := Finding{Code: code, Message: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.warnings, f) {
		r.warnings = append(r.warnings, f)
	}
}

// Project records what the call would do to Incus's database (its refusals and warnings
// are added by the caller, in its own words where it has them).
func (r *Recorder) Project(p quorum.Projection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quorum = &p
}

// Refused reports whether a refusal has been recorded.
func (r *Recorder) Refused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refusals) > 0
}

// Plan returns what has been recorded so far.
func (r *Recorder) Plan() Plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Plan{Mutation: r.mutation, Input: r.input, Facts: slices.Clone(r.facts), Calls: slices.Clone(r.calls),
		Refusals: slices.Clone(r.refusals), Warnings: slices.Clone(r.warnings), Quorum: r.quorum}
}

// Secret describes a secret or bulky value (cloud-init user data) by its size and
// SHA-256 only, as a plan shows it.
func Secret(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes, sha256:%s", len(b), hex.EncodeToString(sum[:]))
}

// Hash identifies the plan as approved: the call (the mutation and its whole input,
// normalised) and the plan as shown (the facts it read, calls, refusals, warnings, quorum
// projection). A confirmation carries the hash of the plan it approves, and the call is
// refused when its own call and plan now hash otherwise, so a plan approves one input and
// no other. JSON of maps is written with sorted keys, so equal plans hash equal; no token,
// expiry or clock is ever in a plan.
func (p Plan) Hash() string {
	b, err := json.Marshal(map[string]any{"mutation": p.Mutation, "input": p.Input, "plan": p.Detail(), "quorum": p.Quorum})
	if err != nil {
		// A plan holds strings, numbers and lists: this cannot fail; a hash no confirmation
		// matches keeps a broken plan from being approved.
		return "unhashable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Detail is the plan as the audit event's details keep it (secret-free by construction:
// calls carry only what Secret or the callers chose to show), and as its hash covers it.
//
// Its keys are a stored format and keep the words they had before the calls were called
// calls: "steps" for the calls and "call" for a call's request. Audit events already
// written say so, and renaming a key would change every plan's hash (a plan shown by one
// release and confirmed after an upgrade would be refused PLAN_CHANGED).
// TestThePlanHashIsTheOneEarlierReleasesComputed holds it.
func (p Plan) Detail() map[string]any {
	calls := make([]map[string]any, len(p.Calls))
	for i, c := range p.Calls {
		changes := make([]map[string]any, len(c.Changes))
		for j, ch := range c.Changes {
			changes[j] = map[string]any{"field": ch.Field, "before": ch.Before, "after": ch.After}
		}
		calls[i] = map[string]any{"system": string(c.System), "call": c.Request, "target": c.Target, "changes": changes}
	}
	findings := func(fs []Finding) []map[string]any {
		out := make([]map[string]any, len(fs))
		for i, f := range fs {
			out[i] = map[string]any{"code": string(f.Code), "message": f.Message}
		}
		return out
	}
	facts := make([]map[string]any, len(p.Facts))
	for i, f := range p.Facts {
		facts[i] = map[string]any{"name": f.Name, "value": f.Value}
	}
	return map[string]any{"facts": facts, "steps": calls, "refusals": findings(p.Refusals), "warnings": findings(p.Warnings)}
}
