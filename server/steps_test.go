package server

import (
	"testing"

	"github.com/apelora/fabric/graph"
	"github.com/apelora/fabric/lifecycle"
)

// The gate names each audit event after its mutation, and the lifecycle reads admission
// from the trail by those names: a mutation renamed without its step would silently turn
// every admitted member UNHELD.
func TestMembershipStepsAreMutations(t *testing.T) {
	mutation := graph.NewExecutableSchema(graph.Config{}).Schema().Mutation
	if mutation == nil {
		t.Fatal("the schema has no Mutation type")
	}
	for _, step := range lifecycle.MembershipSteps {
		if mutation.Fields.ForName(step) == nil {
			t.Errorf("lifecycle step %q is no mutation of the schema: rename the step with its mutation (lifecycle/steps.go)", step)
		}
	}
}
