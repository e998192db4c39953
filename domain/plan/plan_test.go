package plan

import (
	"testing"

	"github.com/apelora/fabric/domain/quorum"
)

// A plan lists each call once: the same request to the same target with the same changes,
// sent again (the admission checks' NOTIFY of each result), is one call; another target or
// other changes are another call. Writes counts every one.
func TestAPlanListsEachCallOnce(t *testing.T) {
	r := &Recorder{}
	notify := Call{System: Database, Request: "NOTIFY admission_checks", Target: "m2"}
	for range 13 {
		r.Record(notify)
	}
	r.Record(Call{System: Database, Request: "NOTIFY admission_checks", Target: "m3"})
	put := Call{System: Incus, Request: "PUT /1.0/cluster/members/m2", Target: "m2", Changes: []Change{{Field: "config.a", Before: "1", After: "2"}}}
	r.Record(put)
	r.Record(put)
	put.Changes = []Change{{Field: "config.a", Before: "2", After: "3"}}
	r.Record(put)
	if got := len(r.Plan().Calls); got != 4 {
		t.Fatalf("%d calls, want 4: %+v", got, r.Plan().Calls)
	}
	if got := r.Writes(); got != 17 {
		t.Fatalf("%d writes, want 17", got)
	}
}

// A plan's hash is the same in every release for the same plan: the hash below is the one
// the release before the calls were called calls (plan.Step, Plan.Steps) computed for this
// plan, so a plan shown before an upgrade is still the plan confirmed after it, and an
// audit event's approvedPlan keeps one shape. A rename that reaches the hashed keys
// (Plan.Detail's "steps" and "call") fails here.
func TestThePlanHashIsTheOneEarlierReleasesComputed(t *testing.T) {
	p := Plan{Mutation: "admitMember", Input: map[string]any{"name": "node-4", "roles": []any{"a", "b"}},
		Facts: []Fact{{Name: "member node-4", Value: "held"}},
		Calls: []Call{{System: Incus, Request: "PUT /1.0/cluster/members/node-4", Target: "node-4", Changes: []Change{{Field: "config.scheduler.instance", Before: "manual"}}},
			{System: Database, Request: "INSERT admissions", Target: "node-4"}},
		Warnings: []Finding{{Code: "FAILED_PRECONDITION", Message: "w"}},
		Quorum:   &quorum.Projection{Leaving: []string{"node-4"}, Voters: 3, VotersOnlineBefore: 3, VotersOnlineAfter: 2}}
	const earlier = "sha256:d56c7f5900f58d41f0ed9c728e4e6e5466c19ed2408972b88f3ebdf75204cce5"
	if got := p.Hash(); got != earlier {
		t.Fatalf("plan hash %s, earlier releases computed %s for the same plan", got, earlier)
	}
	if _, ok := p.Detail()["steps"]; !ok {
		t.Fatalf("the audit's approvedPlan lost its calls' key: %v", p.Detail())
	}
}
