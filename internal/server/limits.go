package server

import (
	"context"
	"fmt"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/internal/apperr"
)

// The request limits (docs/security.md's "Limits" section lists them; limitsdoc_test.go checks it).
const (
	// MaxBodyBytes bounds a GraphQL request body; a larger one is answered 413.
	MaxBodyBytes = 1 << 20
	// BodyReadTimeout is how long a request body may take to arrive once its headers have.
	BodyReadTimeout = 10 * time.Second
	// HeaderReadTimeout is how long a request's headers may take to arrive.
	HeaderReadTimeout = 10 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
	// MaxRootFields bounds the root fields (aliases included) of one operation, so one
	// request cannot call a mutation a thousand times.
	MaxRootFields = 20
	maxDepth      = 12
	maxComplexity = 2000
)

// limitError is a refusal of an operation for its shape.
func limitError(format string, args ...any) *gqlerror.Error {
	return &gqlerror.Error{Message: fmt.Sprintf(format, args...), Extensions: map[string]any{"code": string(apperr.InvalidInput)}}
}

// depthLimit refuses operations nested deeper than max fields, so one request cannot make
// the server walk an unbounded tree. Introspection fields (__schema, __type) are not
// counted: tools such as GraphiQL ask for deep type references.
type depthLimit struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (d depthLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, map[string]bool{}); depth > d.max {
		return limitError("the operation is nested %d fields deep, more than the %d allowed: ask for less at once", depth, d.max)
	}
	return nil
}

func selectionDepth(set ast.SelectionSet, visiting map[string]bool) int {
	deepest := 0
	for _, sel := range set {
		d := 0
		switch s := sel.(type) {
		case *ast.Field:
			if len(s.Name) >= 2 && s.Name[:2] == "__" {
				continue
			}
			d = 1 + selectionDepth(s.SelectionSet, visiting)
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, visiting)
		case *ast.FragmentSpread:
			if s.Definition == nil || visiting[s.Name] {
				continue
			}
			visiting[s.Name] = true
			d = selectionDepth(s.Definition.SelectionSet, visiting)
			delete(visiting, s.Name)
		}
		deepest = max(deepest, d)
	}
	return deepest
}

// rootFieldLimit refuses operations with more than max root fields, aliases and fields
// reached through fragments included.
type rootFieldLimit struct{ max int }

func (rootFieldLimit) ExtensionName() string                   { return "RootFieldLimit" }
func (rootFieldLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (l rootFieldLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	n := 0
	walkRootFields(oc.Doc, oc.Operation.SelectionSet, func(*ast.Field) { n++ })
	if n > l.max {
		return limitError("the operation has %d root fields (aliases included), more than the %d allowed: send at most %d per request", n, l.max, l.max)
	}
	return nil
}

// walkRootFields calls f for every field of an operation's root selection, through
// fragments (each fragment entered once per path, so a cycle in an invalid document ends).
func walkRootFields(doc *ast.QueryDocument, set ast.SelectionSet, f func(*ast.Field)) {
	var walk func(ast.SelectionSet, map[string]bool)
	walk = func(set ast.SelectionSet, visiting map[string]bool) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				f(s)
			case *ast.InlineFragment:
				walk(s.SelectionSet, visiting)
			case *ast.FragmentSpread:
				def := s.Definition
				if def == nil && doc != nil {
					def = doc.Fragments.ForName(s.Name)
				}
				if def == nil || visiting[s.Name] {
					continue
				}
				visiting[s.Name] = true
				walk(def.SelectionSet, visiting)
				delete(visiting, s.Name)
			}
		}
	}
	walk(set, map[string]bool{})
}

// subscriptionsOverPOST refuses a subscription sent as an HTTP POST, which can answer only
// once: without this it waits for the first event and then ends.
type subscriptionsOverPOST struct{}

func (subscriptionsOverPOST) ExtensionName() string                   { return "SubscriptionsOverPOST" }
func (subscriptionsOverPOST) Validate(graphql.ExecutableSchema) error { return nil }
func (subscriptionsOverPOST) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation != nil && oc.Operation.Operation == ast.Subscription && overHTTPPost(ctx) {
		return limitError("a subscription is pushed over a websocket (graphql-transport-ws at /graphql), not answered to an HTTP POST: subscribe with a websocket client")
	}
	return nil
}

type httpPostKey struct{}

// withHTTPPost marks a request that arrived as an HTTP POST (not a websocket).
func withHTTPPost(ctx context.Context) context.Context {
	return context.WithValue(ctx, httpPostKey{}, true)
}

func overHTTPPost(ctx context.Context) bool {
	v, _ := ctx.Value(httpPostKey{}).(bool)
	return v
}
