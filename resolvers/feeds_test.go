package resolvers

import (
	"context"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

func admissionFeed() *broadcast.Hub[string, *admission.Event] {
	return broadcast.NewHub[string, *admission.Event](nil, 0)
}

func next(t *testing.T, ch <-chan *model.AdmissionCheckEvent) *model.AdmissionCheckEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("stream ended, want an event")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return nil
}

func ended(t *testing.T, ch <-chan *model.AdmissionCheckEvent) {
	t.Helper()
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("got %+v, want the stream ended", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream not ended")
	}
}

func TestAdmissionChecksStreamsTheMachinesEventsWithoutAGoroutineAndEndsWithTheSubscription(t *testing.T) {
	feed := admissionFeed()
	sub := (&Resolver{AdmissionFeed: feed}).Subscription()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m1a, err := sub.AdmissionChecks(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	m1b, _ := sub.AdmissionChecks(ctx, "m1")
	m2, _ := sub.AdmissionChecks(t.Context(), "m2")

	at := time.Now()
	check := admission.Check{Name: admission.CheckOnline, Title: "Online", Result: admission.Pass}
	feed.Publish("m1", &admission.Event{Machine: "m1", RunID: "r1", Trigger: admission.TriggerReport, At: at, Checks: []admission.Check{check}})
	feed.Publish("m2", &admission.Event{Machine: "m2", RunID: "r2", Trigger: admission.TriggerReport, At: at, Verdict: admission.Blocked})
	feed.Publish("m1", &admission.Event{Machine: "m1", RunID: "r1", Trigger: admission.TriggerReport, At: at, Verdict: admission.Admissible})

	first, second := next(t, m1a), next(t, m1a)
	if first.RunID != "r1" || len(first.Checks) != 1 || first.Checks[0].Result != model.CheckResultPass || first.Verdict != nil || !first.At.Equal(at) {
		t.Fatalf("first event %+v", first)
	}
	if len(second.Checks) != 0 || second.Verdict == nil || *second.Verdict != model.AdmissionVerdictAdmissible {
		t.Fatalf("second event %+v, want the verdict", second)
	}
	if next(t, m1b) != first || next(t, m1b) != second {
		t.Fatal("subscribers of the same machine got events mapped separately, want them shared")
	}
	if e := next(t, m2); e.Machine != "m2" || e.Verdict == nil || *e.Verdict != model.AdmissionVerdictBlocked {
		t.Fatalf("m2 got %+v", e)
	}
	select {
	case e := <-m2:
		t.Fatalf("m2 got another machine's event %+v", e)
	default:
	}

	cancel() // the client went away
	ended(t, m1a)
	ended(t, m1b)
	if n := feed.Len("m1", false); n != 0 {
		t.Fatalf("%d m1 subscribers left after their subscriptions ended", n)
	}
	if n := feed.Len("m2", false); n != 1 {
		t.Fatalf("%d m2 subscribers, want 1", n)
	}
}

func TestAdmissionChecksDropsASubscriberThatFallsBehind(t *testing.T) {
	feed := admissionFeed()
	sub := (&Resolver{AdmissionFeed: feed}).Subscription()
	slow, _ := sub.AdmissionChecks(t.Context(), "m1")
	fast, _ := sub.AdmissionChecks(t.Context(), "m1")
	for range admissionBuffer + 1 {
		feed.Publish("m1", &admission.Event{Machine: "m1", RunID: "r1", Verdict: admission.Admissible})
		next(t, fast) // keeps up
	}
	for range admissionBuffer {
		next(t, slow)
	}
	ended(t, slow) // one past its buffer: dropped, not waited for
	feed.Publish("m1", &admission.Event{Machine: "m1", RunID: "r2", Verdict: admission.Admissible})
	if e := next(t, fast); e.RunID != "r2" {
		t.Fatalf("fast got %+v", e)
	}
	if n := feed.Len("m1", false); n != 1 {
		t.Fatalf("%d subscribers, want only the one that kept up", n)
	}
}
