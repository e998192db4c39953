package resolvers_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/mutations"
	"github.com/apelora/fabric/resolvers"
)

// Every mutation can answer a dry run the gate refused: its payload, holding the plan alone.
func TestRefusedPlanHasEveryMutationsPayload(t *testing.T) {
	var rec plan.Recorder
	rec.Refuse(apperr.New(apperr.Forbidden, "needs manage-infrastructure"))
	mt := reflect.TypeFor[graph.MutationResolver]()
	for i := range mt.NumMethod() {
		m := mt.Method(i)
		field := strings.ToLower(m.Name[:1]) + m.Name[1:]
		res, err := resolvers.RefusedPlan(field, rec.Plan())
		if err != nil {
			t.Errorf("%s: %v", field, err)
			continue
		}
		if reflect.TypeOf(res) != m.Type.Out(0) {
			t.Errorf("%s: payload %T, want %v", field, res, m.Type.Out(0))
		}
		p := reflect.ValueOf(res).Elem().FieldByName("Plan").Interface().(*model.Plan)
		if !p.Refused || len(p.Calls) != 0 || len(p.Refusals) != 1 || *p.Refusals[0].Code != string(apperr.Forbidden) {
			t.Errorf("%s: plan %+v", field, p)
		}
	}
	if _, err := resolvers.RefusedPlan("noSuchMutation", rec.Plan()); err == nil {
		t.Error("a plan for a mutation that does not exist")
	}
}

// The plan contract holds for every declared change: its resolver answers the payload the
// declaration names, which carries the plan (WithPlan, RefusedPlan), and every resolver
// method is a declared mutation.
func TestEveryDeclaredChangeAnswersItsPlan(t *testing.T) {
	var rec plan.Recorder
	mt := reflect.TypeFor[graph.MutationResolver]()
	all := mutations.All()
	if len(all) != mt.NumMethod() {
		t.Errorf("%d declared mutations, %d Mutation resolver methods", len(all), mt.NumMethod())
	}
	for _, m := range all {
		res, err := resolvers.RefusedPlan(m.Name, rec.Plan())
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		if got := reflect.TypeOf(res).Elem().Name(); got != m.Payload {
			t.Errorf("%s answers %s; its declaration says %s", m.Name, got, m.Payload)
		}
		if p, _ := reflect.ValueOf(res).Elem().FieldByName("Plan").Interface().(*model.Plan); p == nil {
			t.Errorf("%s: no plan in %T", m.Name, res)
		}
	}
}
