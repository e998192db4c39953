package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/resolvers"
)

// AuditRecorder writes an audit event on its own, for an action that changed nothing.
type AuditRecorder interface {
	RecordAudit(ctx context.Context, e audit.Event) error
}

// MutationCheck is a condition every mutation needs (for example a configured Incus admin
// identity). It returns an error that says what is missing.
type MutationCheck func(ctx context.Context) error

// gate authorises every operation and audits every mutation. It is the one place that
// does so, so no mutation can forget: reads need view-infrastructure; each Mutation field
// needs manage-infrastructure and the configured MutationChecks, and writes exactly one
// audit event whatever happens.
type gate struct {
	audit  AuditRecorder
	checks []MutationCheck
	log    *slog.Logger
	// observer counts events that could not be written (nil: nobody).
	observer Observer
	// reads shares identical queries in flight.
	reads sharedReads
	// steps bounds the machine steps running at once.
	steps *stepSlots
	// refusals writes the audit events of repeated refusals (per address, per identity).
	refusals *refusalLog
	// schema is the API's, for a call's input as a plan's hash covers it.
	schema *ast.Schema
	// scopes finds the clusters a call acts in, for identities that may manage some
	// clusters only (nil: such an identity may change only what is about no cluster).
	scopes Scopes
}

type authErrKey struct{}

// withAuthError records why the request carries no identity, so the gate can say so.
func withAuthError(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, authErrKey{}, err)
}

func authError(ctx context.Context) error {
	if err, ok := ctx.Value(authErrKey{}).(error); ok && err != nil {
		return err
	}
	return identity.FromContext(ctx).Require(identity.ViewInfrastructure)
}

// requirePermission returns why the caller may not do what needs p, or nil.
func requirePermission(ctx context.Context, p identity.Permission) error {
	id := identity.FromContext(ctx)
	if id == nil {
		return authError(ctx)
	}
	return id.Require(p)
}

// mayRead is the rule for reads (queries and subscriptions): the caller may read every
// cluster or some (identity.ReadScope; readScoped then refuses the reads it may not make).
func mayRead(ctx context.Context) error {
	id := identity.FromContext(ctx)
	if id == nil {
		return authError(ctx)
	}
	if id.ReadScope().Any() {
		return nil
	}
	return id.Require(identity.ViewInfrastructure)
}

// mayReadAll is mayRead for every cluster: what the websocket transport asks before a
// subscriber joins a shared stream (one execution for many callers cannot be filtered for
// one of them: a read-scoped subscriber runs its own, which the gate and resolvers scope).
func mayReadAll(ctx context.Context) error {
	return requirePermission(ctx, identity.ViewInfrastructure)
}

// readScopedFields are the Query and Subscription fields whose resolvers filter their
// answer by the caller's identity.ReadScope (or answer only about the caller). Every other
// read is refused to an identity that reads some clusters only: refusing is safe, leaking
// is not (TestReadScopedIdentity walks every field of the schema).
var readScopedFields = map[string]bool{
	"viewer":           true, // the caller itself
	"fleet":            true,
	"fleetUpdates":     true,
	"machine":          true,
	"clusters":         true,
	"machines":         true, // its clusters' rows, as fleet
	"rollingReboot":    true, // null for another cluster's
	"admissionReport":  true, // of a machine of its clusters (else FORBIDDEN)
	"drift":            true, // with machine: one of its clusters' (else FORBIDDEN)
	"maintenanceTasks": true, // its clusters' tasks (each task names its cluster)
	"fenceMappings":    true, // its clusters' mappings
	"fenceEvents":      true, // with cluster: one of its clusters (else FORBIDDEN)
	"fenceProgress":    true, // its clusters' events
	"__typename":       true,
	"__schema":         true, // the schema is public
	"__type":           true,
}

// readScoped refuses a read whose root fields are not all filtered by read scope, for an
// identity that reads some clusters only; nil for every other caller.
func readScoped(ctx context.Context, oc *graphql.OperationContext) error {
	id := identity.FromContext(ctx)
	scope := id.ReadScope()
	if !scope.Scoped() || oc.Operation == nil {
		return nil
	}
	root := "Query"
	if oc.Operation.Operation == ast.Subscription {
		root = "Subscription"
	}
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{root}) {
		if !readScopedFields[f.Name] {
			var names []string
			for _, g := range id.Grants {
				if g.Permission == identity.ViewInfrastructure || g.Permission == identity.ManageInfrastructure { // the clusters ReadScope reads
					names = append(names, g.ClusterName)
				}
			}
			slices.Sort(names)
			return apperr.New(apperr.Forbidden, "identity %s reads clusters %s only, and %s is not answered by cluster: it needs view-infrastructure in every cluster (ask an administrator to grant view-infrastructure without a cluster); fleet, machines, machine, clusters, rollingReboot, admissionReport, drift(machine:), maintenanceTasks, fenceMappings, fenceEvents(cluster:) and the subscriptions fleetUpdates and fenceProgress answer about your clusters",
				apperr.Quote(id.Name), strings.Join(slices.Compact(names), ", "), f.Name)
		}
	}
	return nil
}

// operations refuses reads (queries, subscriptions) from callers who may not read. A
// mutation without an identity is refused here as a whole, with one audit event for the
// request however many fields it has; others go on to the per-field gate.
func (g *gate) operations(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	ctx = context.WithValue(ctx, dispatchedKey{}, true)
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation != nil && oc.Operation.Operation == ast.Mutation {
		if identity.FromContext(ctx) == nil {
			err := authError(ctx)
			g.recordOperation(ctx, oc.Doc, oc.Operation, oc.Variables, audit.Refused, apperr.PublicMessage(err))
			return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{presentError(ctx, g.log, err)}})
		}
		return next(ctx)
	}
	if err := mayRead(ctx); err != nil {
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{presentError(ctx, g.log, err)}})
	}
	if err := readScoped(ctx, oc); err != nil {
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{presentError(ctx, g.log, err)}})
	}
	if oc.Operation != nil && oc.Operation.Operation == ast.Query {
		return g.reads.share(ctx, next)
	}
	return next(ctx)
}

type dispatchedKey struct{}

// responses audits a mutation refused before it ran: gqlgen answers a request that does
// not parse, is not valid, or exceeds a limit without running the operation middleware
// (so without the mark operations sets), and no field of it reaches rootFields.
func (g *gate) responses(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil || len(resp.Errors) == 0 || ctx.Value(dispatchedKey{}) != nil || !graphql.HasOperationContext(ctx) {
		return resp
	}
	oc := graphql.GetOperationContext(ctx)
	doc, op := oc.Doc, oc.Operation
	if op == nil {
		var err error
		if doc, err = parser.ParseQuery(&ast.Source{Input: oc.RawQuery}); err != nil {
			// Unreadable: it may have been a mutation.
			g.recordRequest(ctx, requestRecord{action: RejectedRequest, outcome: outcomeOfError(resp.Errors[0]), message: resp.Errors[0].Message})
			return resp
		}
		if op = doc.Operations.ForName(oc.OperationName); op == nil || op.Operation != ast.Mutation {
			op = firstMutation(doc)
		}
	}
	if op != nil && op.Operation == ast.Mutation {
		g.recordOperation(ctx, doc, op, oc.Variables, outcomeOfError(resp.Errors[0]), resp.Errors[0].Message)
	}
	return resp
}

// outcomeOfError is how a GraphQL error is audited: refused or failed by its code, the one
// rule (audit.OutcomeOfCode). The GraphQL layer's own errors (a request that does not
// parse or validate, a limit) are INVALID_INPUT: refused.
func outcomeOfError(e *gqlerror.Error) audit.Outcome {
	c, _ := e.Extensions["code"].(string)
	return audit.OutcomeOfCode(c)
}

func firstMutation(doc *ast.QueryDocument) *ast.OperationDefinition {
	for _, op := range doc.Operations {
		if op.Operation == ast.Mutation {
			return op
		}
	}
	return nil
}

// rootFields wraps every Mutation field. It is a root-field interceptor, not a field
// interceptor, so the many fields of a large read pay nothing for it (fields, the one
// field interceptor, runs in mutations only: mutationFields).
func (g *gate) rootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	// gqlgen puts the field's name in RootFieldContext.Object; the operation says Mutation.
	if rfc == nil || oc.Operation == nil || oc.Operation.Operation != ast.Mutation || strings.HasPrefix(rfc.Field.Name, "__") {
		return next(ctx)
	}
	args := rfc.Field.ArgumentMap(oc.Variables)
	decl, _ := mutations.Of(rfc.Field.Name) // every Mutation field has one (internal/mutations/gen)
	actor := audit.Anonymous
	if id := identity.FromContext(ctx); id != nil {
		actor = id.Name
	}
	action := &audit.Action{
		Actor:      actor,
		Name:       rfc.Field.Name,
		Machine:    decl.MachineIn(args),
		RequestID:  logging.RequestID(ctx),
		Parameters: audit.Redact(args),
	}

	// dryRun: true makes the call a dry run (package plan): the same code runs, with a
	// recorder in its context that the changing ports and the change primitive obey.
	var rec *plan.Recorder
	if decl.DryRunIn(args) {
		rec = plan.For(rfc.Field.Name, mutations.Input(g.schema, rfc.Field.Definition, args))
		ctx = plan.With(ctx, rec)
	}
	authorised := &clusters.Authorised{}
	ctx = clusters.WithAuthorised(ctx, authorised)
	if err := g.authorise(ctx, action, decl, args); err != nil {
		// A refusal is part of a plan, for a caller who may read what the plan shows.
		if rec == nil || mayRead(ctx) != nil {
			g.record(ctx, action, audit.Refused, err)
			graphql.AddError(ctx, gqlerror.WrapPath(ast.Path{ast.PathName(rfc.Field.Alias)}, err))
			return graphql.Null
		}
		// Nothing of the mutation runs for a caller the gate refused (no read with
		// Apelora's credentials, no machine lock): the plan is the refusal alone.
		rec.Refuse(err)
		ctx = context.WithValue(ctx, refusedByGateKey{}, true)
	}

	if decl.Lock == mutations.LockMachine && ctx.Value(refusedByGateKey{}) == nil {
		release, err := g.steps.take(ctx)
		if err != nil {
			g.record(ctx, action, audit.OutcomeOf(err), err)
			graphql.AddError(ctx, gqlerror.WrapPath(ast.Path{ast.PathName(rfc.Field.Alias)}, err))
			return graphql.Null
		}
		defer release()
	}

	before := len(graphql.GetErrors(ctx))
	res := next(audit.WithAction(ctx, action))
	g.reads.forget() // a read from now on sees what this mutation did
	if action.Recorded() {
		return res
	}
	// The resolver's own error is the one on the field itself (deeper paths are errors of
	// the payload's fields, after the change).
	var failure *gqlerror.Error
	for _, e := range graphql.GetErrors(ctx)[before:] {
		if len(e.Path) == 1 {
			failure = e
			break
		}
	}
	if rec != nil {
		if refused, _ := ctx.Value(refusedByGateKey{}).(bool); refused {
			// Refused by the gate (permission, Incus not configured): audited like any
			// refusal.
			g.recordMessage(ctx, action, audit.Refused, rec.Plan().Refusals[0].Message)
			return res
		}
		for _, f := range rec.Plan().Refusals {
			// Refused for permission further in (erase without hardware.delete): the same.
			if f.Code == apperr.Forbidden || f.Code == apperr.Unauthenticated {
				g.recordMessage(ctx, action, audit.Refused, f.Message)
				return res
			}
		}
		// A dry run by a caller allowed to make the change changes nothing: it is not an
		// audit event (the console asks for a plan as the operator types); a metric
		// counts it.
		g.countPlan(action.Name, rec, failure)
		return res
	}
	if failure == nil {
		// Every change records its event in its own transaction; a mutation that did not
		// is a programming error, so keep the trail complete and say so loudly.
		g.log.ErrorContext(ctx, "mutation succeeded without recording its audit event in its transaction", "action", action.Name)
		g.record(ctx, action, audit.Succeeded, nil)
		return res
	}
	g.recordMessage(ctx, action, outcomeOfError(failure), failure.Message)
	return res
}

// refusedByGateKey marks a dry run the gate refused: its resolver does not run.
type refusedByGateKey struct{}

// replannedKey marks the context a confirmation's planning ran in (value *replanned).
// gqlgen resolves a field's answer in the context of the last call to its resolver
// (graphql.resolveField: `ctx = rctx`), and a confirmed change's planning is that last call:
// nested in the real one, under the change's lease, which has ended by the time the answer
// is resolved, and with the plan recorder, which makes it a dry run. The answer's fields go
// back to the real call's context (answerContext): their reads are not cancelled, and they
// are not a dry run's.
type replannedKey struct{}

type replanned struct{ call context.Context }

// answerContext is the context of fc, a field of a mutation's answer: the real call's when
// the mutation's planning ran last (see replannedKey), else ctx. Only the answer's own
// fields are moved: theirs is the context their fields inherit.
func answerContext(ctx context.Context, fc *graphql.FieldContext) context.Context {
	r, ok := ctx.Value(replannedKey{}).(*replanned)
	if !ok || r.call == nil {
		return ctx
	}
	return graphql.WithFieldContext(r.call, fc)
}

// countPlan counts an allowed dry run by its result.
func (g *gate) countPlan(mutation string, rec *plan.Recorder, failure *gqlerror.Error) {
	if g.observer == nil {
		return
	}
	result := "planned"
	switch {
	case failure != nil:
		result = "failed"
		if c, _ := failure.Extensions["code"].(string); c == string(apperr.InvalidInput) {
			result = "invalid"
		}
	case rec.Plan().Refused():
		result = "refused"
	}
	g.observer.Planned(mutation, result)
}

// mutationFields makes gate.fields the field interceptor of mutations, and of nothing
// else. A field interceptor installed for every operation (gqlgen's AroundFields) costs
// each field a closure gqlgen allocates around it, read or not: 26 allocations per row of
// the fleet query (385 → 411 per row when dry runs added it), for fields that interceptor
// only lets through.
type mutationFields struct{ g *gate }

func (mutationFields) ExtensionName() string                   { return "MutationFields" }
func (mutationFields) Validate(graphql.ExecutableSchema) error { return nil }
func (m mutationFields) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Mutation {
		return nil
	}
	inner := oc.ResolverMiddleware
	oc.ResolverMiddleware = func(ctx context.Context, next graphql.Resolver) (any, error) {
		return m.g.fields(ctx, func(ctx context.Context) (any, error) { return inner(ctx, next) })
	}
	return nil
}

// fields puts the plan into a dry run's payload. A refusal (other than invalid input or
// an internal error) becomes part of the plan instead of the field's error. Only the
// Mutation's own fields are touched; the payload's fields are read as usual.
func (g *gate) fields(ctx context.Context, next graphql.Resolver) (any, error) {
	// The field's context is the innermost one: a read's fields stop here at once, before
	// plan.From walks the whole chain.
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return next(ctx)
	}
	if fc.Object != "Mutation" {
		if fc.Parent != nil && fc.Parent.Object == "Mutation" {
			ctx = answerContext(ctx, fc)
		}
		return next(ctx)
	}
	rec := plan.From(ctx)
	if rec == nil {
		return g.confirmed(ctx, fc, next)
	}
	if refused, _ := ctx.Value(refusedByGateKey{}).(bool); refused {
		return resolvers.RefusedPlan(fc.Field.Name, rec.Plan())
	}
	res, err := next(ctx)
	if err != nil {
		if c := apperr.CodeOf(err); c == apperr.InvalidInput || c == apperr.Internal {
			return res, err
		}
		rec.Refuse(err)
	}
	return resolvers.WithPlan(res, rec.Plan())
}

// confirmed runs a real call. Its audit events record the input approved (normalised, as
// a plan's hash covers it). One confirmed with a planHash (the plan the administrator was
// shown) is checked inside its change, under the change's lease and before it acts
// (plan.Confirmation, postgres.Store.change): the call is planned again with the same code
// as a dry run, and when that plan's hash differs it is refused with PLAN_CHANGED and the
// new plan, and nothing of it runs for real. The audit events keep the plan approved and
// its hash, or say none was shown.
func (g *gate) confirmed(ctx context.Context, fc *graphql.FieldContext, next graphql.Resolver) (any, error) {
	action := audit.ActionFrom(ctx)
	decl, _ := mutations.Of(fc.Field.Name)
	// fc.Args holds the resolver's typed input; the declaration reads the raw arguments.
	args := fc.Field.ArgumentMap(graphql.GetOperationContext(ctx).Variables)
	// The hash covers the call itself: its whole input, normalised, as the dry run's did.
	input := mutations.Input(g.schema, fc.Field.Definition, args)
	if action != nil {
		action.Detail("approvedInput", audit.Redact(input))
	}
	want := decl.PlanHashIn(args)
	if want == "" {
		if action != nil {
			action.Detail("approvedPlan", "no plan shown")
		}
		return next(ctx)
	}
	answer := &replanned{}
	conf := plan.NewConfirmation(func(ctx context.Context) (*plan.Plan, error) {
		rec := plan.For(fc.Field.Name, input)
		if _, err := next(context.WithValue(plan.With(ctx, rec), replannedKey{}, answer)); err != nil {
			// An upstream that did not answer the planning is not a changed plan: the call
			// fails UNAVAILABLE (nothing changed) and is worth retrying with the same hash,
			// as a bulk step's failed machines are.
			if c := apperr.CodeOf(err); c == apperr.InvalidInput || c == apperr.Internal || c == apperr.Unavailable {
				return nil, err
			}
			rec.Refuse(err)
		}
		now := rec.Plan()
		if got := now.Hash(); got != want {
			e := plan.Changed("")
			e.Details = map[string]any{"planHash": got, "plan": now.Detail()}
			return nil, e
		}
		if action != nil {
			action.Detail("approvedPlan", now.Detail())
			action.Detail("planHash", want)
		}
		return &now, nil
	})
	answer.call = plan.WithConfirmation(ctx, conf)
	res, err := next(answer.call)
	if err == nil && !conf.Checked() {
		// Every change checks its confirmation under its lease; a mutation that made none
		// is a programming error: say so loudly.
		g.log.ErrorContext(ctx, "a mutation confirmed with a plan hash succeeded without checking it in its change", "action", fc.Field.Name)
	}
	return res, err
}

// authorise checks the caller may make the call: manage-infrastructure where it acts
// (unscoped, or in the clusters it acts in: whereCalls), and the MutationChecks.
func (g *gate) authorise(ctx context.Context, action *audit.Action, decl mutations.Mutation, args map[string]any) error {
	id := identity.FromContext(ctx)
	switch {
	case id == nil:
		return authError(ctx)
	case id.Has(identity.ManageInfrastructure):
		// Unscoped: allowed wherever the call acts, with no look-up.
	case !slices.ContainsFunc(id.Scoped(time.Now()), func(gr identity.ClusterGrant) bool { return gr.Permission == identity.ManageInfrastructure }):
		return id.Require(identity.ManageInfrastructure)
	default:
		if err := authoriseScoped(ctx, g.scopes, id, action, decl, args); err != nil {
			return err
		}
	}
	for _, check := range g.checks {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// record writes the event of an action that changed nothing. If even that fails, the
// server log keeps it.
func (g *gate) record(ctx context.Context, a *audit.Action, outcome audit.Outcome, err error) {
	msg := ""
	if err != nil {
		msg = apperr.PublicMessage(err)
	}
	g.recordMessage(ctx, a, outcome, msg)
}

// recordMessage is record with the message the client was shown.
func (g *gate) recordMessage(ctx context.Context, a *audit.Action, outcome audit.Outcome, msg string) {
	if rerr := g.audit.RecordAudit(context.WithoutCancel(ctx), a.Event(outcome, msg)); rerr != nil {
		g.log.ErrorContext(ctx, "could not write audit event", "action", audit.Text(a.Name, audit.MaxNameBytes), "actor", a.Actor,
			"machine", audit.Text(a.Machine, audit.MaxMachineBytes), "outcome", outcome, "error", rerr)
		if g.observer != nil {
			g.observer.AuditLost()
		}
		return
	}
	a.MarkRecorded()
}

// The actions of audit events that stand for a request rather than a mutation call.
const (
	// RejectedRequest: a POST to /graphql refused before its operation could be read (too
	// large, too slow, not JSON, a batch, a query that does not parse).
	RejectedRequest = "rejectedRequest"
	// RateLimited: requests from an address refused 429 (it failed authentication too
	// often, or started too many sign-ins); written by refusalLog: bounded per window, with
	// the true count.
	RateLimited = "rateLimited"
	// SignInFailed: console sign-ins (a bearer token for a session, a session cookie, an
	// SSO callback or device sign-in) from an address that failed to authenticate; written
	// by refusalLog, as rateLimited.
	SignInFailed = "signInFailed"
	// IdentityLimited: websockets or subscriptions refused to an identity at its limit
	// (APELORA_WS_SOCKETS_PER_IDENTITY, APELORA_WS_SUBSCRIPTIONS_PER_IDENTITY); its actor
	// the identity; written by refusalLog, as rateLimited.
	IdentityLimited = "identityLimited"
)

// maxListedMutations bounds the mutation names one request's event lists.
const maxListedMutations = 16

// requestRecord is the one audit event of a request audited as a whole.
type requestRecord struct {
	action, machine string
	params, details map[string]any
	outcome         audit.Outcome
	message         string
}

// recordOperation writes one event for a mutation operation refused before any of its
// fields ran: named after its first field, with that field's arguments, and listing the
// mutations it asked for.
func (g *gate) recordOperation(ctx context.Context, doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any, outcome audit.Outcome, msg string) {
	var first *ast.Field
	var names []string
	calls := 0
	walkRootFields(doc, op.SelectionSet, func(f *ast.Field) {
		calls++
		if first == nil {
			first = f
		}
		if len(names) < maxListedMutations && !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	})
	rec := requestRecord{action: RejectedRequest, outcome: outcome, message: msg,
		details: map[string]any{"mutations": names, "calls": calls}}
	if first != nil {
		args := argumentsOf(first, vars)
		decl, _ := mutations.Of(first.Name)
		rec.action, rec.machine, rec.params = first.Name, decl.MachineIn(args), audit.Redact(args)
	}
	g.recordRequest(ctx, rec)
}

// argumentsOf returns a field's arguments, also when the document did not validate (then
// a value that cannot be read is kept as its source text).
func argumentsOf(f *ast.Field, vars map[string]any) map[string]any {
	if f.Definition != nil && vars != nil {
		return f.ArgumentMap(vars)
	}
	args := make(map[string]any, len(f.Arguments))
	for _, a := range f.Arguments {
		if v, err := a.Value.Value(vars); err == nil {
			args[a.Name] = v
		} else {
			args[a.Name] = a.Value.String()
		}
	}
	return args
}

// recordRequest writes the one event of a request audited as a whole.
func (g *gate) recordRequest(ctx context.Context, r requestRecord) {
	actor := audit.Anonymous
	if id := identity.FromContext(ctx); id != nil {
		actor = id.Name
	}
	a := &audit.Action{Actor: actor, Name: r.action, Machine: r.machine, RequestID: logging.RequestID(ctx), Parameters: r.params}
	for k, v := range r.details {
		a.Detail(k, v)
	}
	g.recordMessage(ctx, a, r.outcome, r.message)
}
