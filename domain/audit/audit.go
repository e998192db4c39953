// Package audit is the audit trail: every mutation, allowed or refused, writes exactly one
// event, in the same database transaction as the change it made.
//
// The GraphQL layer opens an Action for each mutation before its resolver runs. A domain
// change records the Action's event inside its own transaction (see the store's Change);
// when the resolver returns without that having happened (refused, invalid input, a failure
// that rolled back), the GraphQL layer records the failure on its own.
package audit

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// Outcome is how an audited action ended.
type Outcome string

const (
	Succeeded Outcome = "SUCCEEDED"
	Failed    Outcome = "FAILED"
	Refused   Outcome = "REFUSED"
	// Planned: a dry run (dryRun: true). It changed nothing; every reader that derives
	// state from the trail reads only SUCCEEDED events, so it ignores these.
	Planned Outcome = "PLANNED"
	// Started: a step's intent, committed before anything was sent to Incus or MAAS: what
	// was approved (actor, input, plan and its hash). The event of its outcome follows and
	// names it (details.intent).
	Started Outcome = "STARTED"
)

// OutcomeOf is how a call that ended with err is recorded: REFUSED or FAILED by the one
// rule (apperr.Refusal, from bulk-outcomes.json, which the console and apeloractl read),
// SUCCEEDED for nil.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Succeeded
	case apperr.IsRefusal(err):
		return Refused
	}
	return Failed
}

// OutcomeOfCode is OutcomeOf for an error known by its code only (a GraphQL error's
// extensions.code).
func OutcomeOfCode(code string) Outcome {
	if apperr.Refusal(apperr.Code(code)) {
		return Refused
	}
	return Failed
}

// Anonymous is the actor of an unauthenticated attempt.
const Anonymous = "anonymous"

// Event is one row of the audit trail.
type Event struct {
	ID         int64
	At         time.Time
	Actor      string
	Action     string
	Machine    string
	Parameters map[string]any
	Outcome    Outcome
	Error      string
	RequestID  string
	Details    map[string]any
}

// Action is an audited mutation in progress.
type Action struct {
	Actor      string
	Name       string
	Machine    string
	RequestID  string
	Parameters map[string]any

	mu       sync.Mutex
	details  map[string]any
	recorded bool
}

// Detail adds a fact to the event (for example the admission check results). Values must
// be secret-free and JSON-encodable.
func (a *Action) Detail(key string, value any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.details == nil {
		a.details = map[string]any{}
	}
	a.details[key] = value
}

// Event returns the event to write for this action with the given outcome.
func (a *Action) Event(outcome Outcome, errMessage string) Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	details := maps.Clone(a.details)
	if details == nil {
		details = map[string]any{}
	}
	params := a.Parameters
	if params == nil {
		params = map[string]any{}
	}
	return Event{
		Actor: a.Actor, Action: a.Name, Machine: a.Machine, Parameters: params,
		Outcome: outcome, Error: errMessage, RequestID: a.RequestID, Details: details,
	}
}

// MarkRecorded notes that the action's event was committed.
func (a *Action) MarkRecorded() {
	a.mu.Lock()
	a.recorded = true
	a.mu.Unlock()
}

// Recorded reports whether the action's event was committed.
func (a *Action) Recorded() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.recorded
}

type ctxKey struct{}

// WithAction returns ctx carrying the action.
func WithAction(ctx context.Context, a *Action) context.Context {
	return context.WithValue(ctx, ctxKey{}, a)
}

// ActionFrom returns the action in progress, or nil outside a mutation.
func ActionFrom(ctx context.Context) *Action {
	a, _ := ctx.Value(ctxKey{}).(*Action)
	return a
}

// secretKeys are argument names whose values never reach the audit trail, whatever the
// mutation. Matching is on the lower-cased name with separators removed.
var secretKeys = []string{"token", "jointoken", "secret", "password", "apikey", "key", "userdata", "cloudinit", "authorization"}

// Redact returns a copy of a mutation's arguments with secret values replaced, so that
// the parameters can be stored. Nested objects (input types) are walked.
//
// A key/value pair (a member-config entry: {entity, name, key, value}) names its setting in
// "key": the setting's name is kept, and its value is redacted when that name is a secret's
// (a BGP peer's password, say).
func Redact(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		if secretIn(args, k) {
			out[k] = "[redacted]"
			continue
		}
		out[k] = redactValue(v)
	}
	return out
}

// IsSecretName reports whether a setting or field called name holds a secret (a password,
// a key, a token…): what the audit, and a plan's changes, never show.
func IsSecretName(name string) bool { return isSecretKey(name) }

// secretIn reports whether the entry k of the object m is a secret: a secret-named key,
// except in a setting ({key, value}, such as a member-config entry), where the setting's
// name is kept and its value is the secret when the name is a secret's.
func secretIn(m map[string]any, k string) bool {
	setting, isSetting := m["key"].(string)
	if _, hasValue := m["value"]; isSetting && hasValue {
		switch k {
		case "key":
			return false
		case "value":
			return isSecretKey(setting)
		}
	}
	return isSecretKey(k)
}

func redactValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return Redact(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = redactValue(e)
		}
		return out
	default:
		return v
	}
}

func isSecretKey(k string) bool {
	norm := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(k))
	for _, s := range secretKeys {
		if norm == s || strings.HasSuffix(norm, s) {
			return true
		}
	}
	return false
}

// Filter selects events for a page of the audit trail. Empty fields match every event.
type Filter struct {
	Machine string
	Actor   string
	Outcome Outcome
	// Before, when non-zero, keeps events with a smaller id (the page cursor).
	Before int64
	Limit  int
}

// Matches reports whether a live event passes the filter's machine, actor and outcome, as
// a page of the trail selects them.
func (f Filter) Matches(e Event) bool {
	return (f.Machine == "" || e.Machine == f.Machine) &&
		(f.Actor == "" || e.Actor == f.Actor) &&
		(f.Outcome == "" || e.Outcome == f.Outcome)
}

// SetMachine names the machine the action turned out to be about (for example the machine
// record behind a MAAS system id).
func (a *Action) SetMachine(name string) {
	a.mu.Lock()
	a.Machine = name
	a.mu.Unlock()
}
