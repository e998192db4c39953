package server

import (
	"context"
	"log/slog"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/logging"
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

// mayRead is the rule for reads (queries and subscriptions). The websocket transport also
// asks it for every subscriber of a shared stream.
func mayRead(ctx context.Context) error {
	return requirePermission(ctx, identity.ViewInfrastructure)
}

// operations refuses reads (queries, subscriptions) from callers who may not read. Mutations
// go on to the per-field gate, which audits the refusal.
func (g *gate) operations(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation != nil && oc.Operation.Operation == ast.Mutation {
		return next(ctx)
	}
	if err := mayRead(ctx); err != nil {
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{presentError(ctx, g.log, err)}})
	}
	return next(ctx)
}

// rootFields wraps every Mutation field. It is a root-field interceptor, not a field
// interceptor, so the many fields of a large read pay nothing for it.
func (g *gate) rootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	// gqlgen puts the field's name in RootFieldContext.Object; the operation says Mutation.
	if rfc == nil || oc.Operation == nil || oc.Operation.Operation != ast.Mutation || strings.HasPrefix(rfc.Field.Name, "__") {
		return next(ctx)
	}
	args := rfc.Field.ArgumentMap(oc.Variables)
	actor := audit.Anonymous
	if id := identity.FromContext(ctx); id != nil {
		actor = id.Name
	}
	action := &audit.Action{
		Actor:      actor,
		Name:       rfc.Field.Name,
		Machine:    targetOf(args),
		RequestID:  logging.RequestID(ctx),
		Parameters: audit.Redact(args),
	}

	if err := g.authorise(ctx); err != nil {
		g.record(ctx, action, audit.Refused, err)
		graphql.AddError(ctx, gqlerror.WrapPath(ast.Path{ast.PathName(rfc.Field.Alias)}, err))
		return graphql.Null
	}

	before := len(graphql.GetErrors(ctx))
	res := next(audit.WithAction(ctx, action))
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
	if failure == nil {
		// Every change records its event in its own transaction; a mutation that did not
		// is a programming error, so keep the trail complete and say so loudly.
		g.log.ErrorContext(ctx, "mutation succeeded without recording its audit event in its transaction", "action", action.Name)
		g.record(ctx, action, audit.Succeeded, nil)
		return res
	}
	outcome := audit.Failed
	if c, _ := failure.Extensions["code"].(string); c == string(apperr.Unauthenticated) || c == string(apperr.Forbidden) {
		outcome = audit.Refused
	}
	g.recordMessage(ctx, action, outcome, failure.Message)
	return res
}

func (g *gate) authorise(ctx context.Context) error {
	if err := requirePermission(ctx, identity.ManageInfrastructure); err != nil {
		return err
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
		g.log.ErrorContext(ctx, "could not write audit event", "action", a.Name, "actor", a.Actor, "machine", a.Machine, "outcome", outcome, "error", rerr)
		return
	}
	a.MarkRecorded()
}

// targetOf finds the machine an action is about in its arguments: the name (or member)
// field of its input, or a top-level name argument.
func targetOf(args map[string]any) string {
	for _, src := range []any{args["input"], args} {
		m, ok := src.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range []string{"name", "member", "machine"} {
			if s, ok := m[k].(string); ok && s != "" {
				if len(s) > 253 {
					s = s[:253]
				}
				return s
			}
		}
	}
	return ""
}
