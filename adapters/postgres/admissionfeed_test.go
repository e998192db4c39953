package postgres

import (
	"testing"
	"time"

	"github.com/apelora/fabric/domain/admission"
)

func check(name string) admission.Event {
	return admission.Event{Machine: "m1", RunID: "r1", Checks: []admission.Check{{Name: name}}}
}

func TestRunBatcherMergesARunsResultsAndNeverHoldsTheVerdict(t *testing.T) {
	b := runBatcher{window: 25 * time.Millisecond, pending: map[runKey]*pendingRun{}}
	t0 := time.Unix(1000, 0)
	for i, name := range []string{"online", "incus-version", "kernel"} {
		e := check(name)
		if out := b.add(&e, t0.Add(time.Duration(i)*5*time.Millisecond)); out != nil {
			t.Fatalf("a result was pushed before its window closed: %v", out)
		}
	}
	other := admission.Event{Machine: "m2", RunID: "r9", Checks: []admission.Check{{Name: "online"}}}
	b.add(&other, t0.Add(20*time.Millisecond))
	if next, ok := b.next(); !ok || !next.Equal(t0.Add(25*time.Millisecond)) {
		t.Fatalf("next due %v %v", next, ok)
	}
	if out := b.due(t0.Add(24 * time.Millisecond)); out != nil {
		t.Fatalf("pushed early: %v", out)
	}
	out := b.due(t0.Add(25 * time.Millisecond))
	if len(out) != 1 || len(out[0].Checks) != 3 || out[0].Checks[2].Name != "kernel" {
		t.Fatalf("due at the window's end: %+v", out)
	}
	// The verdict goes at once, with any results still pending for its run.
	e := check("clock")
	b.add(&e, t0.Add(30*time.Millisecond))
	v := admission.Event{Machine: "m1", RunID: "r1", Verdict: admission.Admissible}
	out = b.add(&v, t0.Add(31*time.Millisecond))
	if len(out) != 1 || out[0].Verdict != admission.Admissible || len(out[0].Checks) != 1 || out[0].Checks[0].Name != "clock" {
		t.Fatalf("verdict: %+v", out)
	}
	// The other run is still pending, on its own window.
	if out := b.due(t0.Add(45 * time.Millisecond)); len(out) != 1 || out[0].Machine != "m2" {
		t.Fatalf("other run: %+v", out)
	}
	if _, ok := b.next(); ok {
		t.Fatal("nothing should be pending")
	}
}
