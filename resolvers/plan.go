package resolvers

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/graph/model"
)

// WithPlan returns a mutation's payload carrying a dry run's plan. res is what the
// resolver returned: a pointer to its payload, nil when the dry run was refused (then the
// payload holds the plan only). Every mutation payload has a Plan field (the schema gives
// each one); reflection spares each resolver its own copy of this.
func WithPlan(res any, p plan.Plan) (any, error) {
	v := reflect.ValueOf(res)
	if v.Kind() != reflect.Pointer || v.Type().Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("dry run: the payload %T is not a pointer to a struct", res)
	}
	if v.IsNil() {
		v = reflect.New(v.Type().Elem())
	}
	f := v.Elem().FieldByName("Plan")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*model.Plan]() {
		return nil, fmt.Errorf("dry run: the payload %T has no plan field", res)
	}
	f.Set(reflect.ValueOf(mapPlan(p)))
	return v.Interface(), nil
}

// RefusedPlan is the payload of the Mutation field named field holding plan p alone, for a
// dry run refused before its resolver ran. The payload's type is the one the field's
// resolver method returns.
func RefusedPlan(field string, p plan.Plan) (any, error) {
	if field == "" {
		return nil, fmt.Errorf("dry run: no mutation named")
	}
	m, ok := reflect.TypeFor[graph.MutationResolver]().MethodByName(strings.ToUpper(field[:1]) + field[1:])
	if !ok || m.Type.NumOut() != 2 {
		return nil, fmt.Errorf("dry run: no resolver for the mutation %q", field)
	}
	return WithPlan(reflect.Zero(m.Type.Out(0)).Interface(), p)
}

func mapPlan(p plan.Plan) *model.Plan {
	out := &model.Plan{
		Refused:  p.Refused(),
		PlanHash: p.Hash(),
		Calls:    make([]*model.PlanCall, len(p.Calls)),
		Refusals: mapFindings(p.Refusals),
		Warnings: mapFindings(p.Warnings),
		Facts:    make([]*model.PlanFact, len(p.Facts)),
	}
	for i, f := range p.Facts {
		out.Facts[i] = &model.PlanFact{Name: f.Name, Value: f.Value}
	}
	for i, c := range p.Calls {
		mc := &model.PlanCall{System: model.PlanSystem(c.System), Request: c.Request, Target: c.Target, Changes: make([]*model.PlanChange, len(c.Changes))}
		for j, ch := range c.Changes {
			mc.Changes[j] = &model.PlanChange{Field: ch.Field, Before: optional(ch.Before), After: optional(ch.After)}
		}
		out.Calls[i] = mc
	}
	if q := p.Quorum; q != nil {
		out.Quorum = &model.QuorumProjection{Leaving: nonNil(q.Leaving), Voters: q.Voters, VotersOnlineBefore: q.VotersOnlineBefore,
			VotersOnlineAfter: q.VotersOnlineAfter, StandbysAfter: q.StandbysAfter,
			EmptiedFailureDomains: nonNil(q.EmptiedFailureDomains), EmptiedGroups: nonNil(q.EmptiedGroups)}
	}
	return out
}

func mapFindings(fs []plan.Finding) []*model.PlanFinding {
	out := make([]*model.PlanFinding, len(fs))
	for i, f := range fs {
		out[i] = &model.PlanFinding{Code: optional(string(f.Code)), Message: f.Message, Field: optional(f.Field)}
	}
	return out
}
