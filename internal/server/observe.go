package server

import (
	"context"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/internal/apperr"
)

// Observer is told what the GraphQL layer does (metrics implement it; the server knows no
// metrics library). Names and codes it is given come from bounded sets: the schema's
// root fields and the documented error codes, whatever a client sends.
type Observer interface {
	// Operation: a query or mutation was answered (also one refused or not valid): its
	// type (query, mutation, or unknown when it could not be read), its name (OperationName),
	// the code ("OK" or the first error's extensions.code) and the time since the request
	// began.
	Operation(kind, name, code string, took time.Duration)
	// Subscriptions declares the schema's subscriptions, before any starts.
	Subscriptions(names []string)
	// Subscribed: a subscription started; ended is called once when it ends.
	Subscribed(name string) (ended func())
	// AuditLost: an audit event could not be written at all (the server log has it).
	AuditLost()
	// Planned: a dry run by a caller allowed to make the change was answered; result is
	// planned, refused (the plan holds a refusal), invalid or failed. Such dry runs change
	// nothing and are not audit events: this counts them.
	Planned(mutation, result string)
}

// Names for operations that are not one of the schema's root fields.
const (
	OperationInvalid = "(invalid)" // the request did not parse or name an operation
	OperationOther   = "(other)"   // cannot happen for a validated operation; bounds the label anyway
	CodeOK           = "OK"
	CodeOther        = "OTHER" // an error code the API does not document
)

// observed is the gqlgen extension that tells the Observer about every operation. It is
// the outermost extension, so it sees what the gate refuses too.
type observed struct {
	obs   Observer
	names map[string]bool // the root fields of Query, Mutation and Subscription
}

type observedKey struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
	graphql.ResponseInterceptor
} = (*observed)(nil)

func (o *observed) ExtensionName() string { return "ApeloraMetrics" }

func (o *observed) Validate(es graphql.ExecutableSchema) error {
	s := es.Schema()
	o.names = map[string]bool{"__schema": true, "__type": true, "__typename": true}
	var subs []string
	for _, def := range []*ast.Definition{s.Query, s.Mutation, s.Subscription} {
		if def == nil {
			continue
		}
		for _, f := range def.Fields {
			o.names[f.Name] = true
			if def == s.Subscription && !slices.Contains(subs, f.Name) && !isIntrospection(f.Name) {
				subs = append(subs, f.Name)
			}
		}
	}
	o.obs.Subscriptions(subs)
	return nil
}

func isIntrospection(name string) bool { return len(name) > 2 && name[:2] == "__" }

// OperationName is an operation's name for metrics: its first root field (the name a
// client gives its operation is its own choice, and unbounded).
func (o *observed) OperationName(oc *graphql.OperationContext) string {
	if oc == nil || oc.Operation == nil {
		return OperationInvalid
	}
	name := ""
	walkRootFields(oc.Doc, oc.Operation.SelectionSet, func(f *ast.Field) {
		if name == "" {
			name = f.Name
		}
	})
	if !o.names[name] {
		return OperationOther
	}
	return name
}

// InterceptOperation measures queries and mutations that were dispatched: the response
// handler's first answer is theirs. Subscriptions are counted per subscriber by the
// websocket transport (subscribed): a shared stream runs here once for many.
func (o *observed) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	ctx = context.WithValue(ctx, observedKey{}, true)
	oc := graphql.GetOperationContext(ctx)
	h := next(ctx)
	if oc.Operation.Operation == ast.Subscription {
		return h
	}
	name := o.OperationName(oc)
	answered := false
	return func(ctx context.Context) *graphql.Response {
		resp := h(ctx)
		if !answered {
			answered = true
			o.obs.Operation(string(oc.Operation.Operation), name, responseCode(resp), since(oc))
		}
		return resp
	}
}

// subscribed is the websocket transport's Options.Subscribed: one subscriber's
// subscription, open until ended.
func (o *observed) subscribed(_ context.Context, rc *graphql.OperationContext) (ended func()) {
	return o.obs.Subscribed(o.OperationName(rc))
}

// InterceptResponse measures what never reached InterceptOperation: requests that did not
// parse, were not valid, or exceeded a limit.
func (o *observed) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if ctx.Value(observedKey{}) != nil {
		return resp
	}
	kind, name, took := "unknown", OperationInvalid, time.Duration(0)
	if graphql.HasOperationContext(ctx) {
		oc := graphql.GetOperationContext(ctx)
		name, took = o.OperationName(oc), since(oc)
		if oc.Operation != nil {
			kind = string(oc.Operation.Operation)
		}
	}
	o.obs.Operation(kind, name, responseCode(resp), took)
	return resp
}

func since(oc *graphql.OperationContext) time.Duration {
	if oc == nil || oc.Stats.OperationStart.IsZero() {
		return 0
	}
	return time.Since(oc.Stats.OperationStart)
}

// responseCode is "OK" or the first error's extensions.code, bounded to the documented
// codes.
func responseCode(resp *graphql.Response) string {
	if resp == nil || len(resp.Errors) == 0 {
		return CodeOK
	}
	c, _ := resp.Errors[0].Extensions["code"].(string)
	if slices.Contains(apperr.Codes, apperr.Code(c)) {
		return c
	}
	return CodeOther
}
