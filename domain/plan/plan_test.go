package plan

import "testing"

// A plan lists each step once: the same call to the same target with the same changes,
// made again (the admission checks' NOTIFY of each result), is one step; another target or
// other changes are another step.
func TestAPlanListsEachStepOnce(t *testing.T) {
	r := &Recorder{}
	notify := Step{System: Database, Call: "NOTIFY admission_checks", Target: "m2"}
	for range 13 {
		r.Record(notify)
	}
	r.Record(Step{System: Database, Call: "NOTIFY admission_checks", Target: "m3"})
	put := Step{System: Incus, Call: "PUT /1.0/cluster/members/m2", Target: "m2", Changes: []Change{{Field: "config.a", Before: "1", After: "2"}}}
	r.Record(put)
	r.Record(put)
	put.Changes = []Change{{Field: "config.a", Before: "2", After: "3"}}
	r.Record(put)
	if got := len(r.Plan().Steps); got != 4 {
		t.Fatalf("%d steps, want 4: %+v", got, r.Plan().Steps)
	}
}
