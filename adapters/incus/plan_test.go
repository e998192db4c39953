package incus

import (
	"encoding/json"
	"testing"
)

// A plan lists what a PUT changes, field by field, and hides the values of a setting whose
// name is a secret's (the plan is kept in the audit), while still saying it changes.
func TestPlanChangesHideSecretSettings(t *testing.T) {
	before := flatten(map[string]any{"config": map[string]any{"scheduler.instance": "manual", "user.bgp-password": "old"}, "roles": []string{"database"}})
	after := flatten(map[string]any{"config": map[string]any{"user.bgp-password": "new"}, "roles": []string{"database"}})
	owned := map[string]json.RawMessage{"config": nil, "roles": nil}
	got := map[string][2]string{}
	for _, c := range changes(before, after, owned) {
		got[c.Field] = [2]string{c.Before, c.After}
	}
	if len(got) != 2 || got["config.scheduler.instance"] != [2]string{"manual", ""} ||
		got["config.user.bgp-password"] != [2]string{"[redacted]", "[redacted]"} {
		t.Fatalf("changes %v", got)
	}
}

// A step is about what its path names; a member's state (evacuate, restore) is about the
// member, not "state".
func TestAStepsTargetIsWhatItsPathNames(t *testing.T) {
	for p, want := range map[string]string{
		"/1.0/cluster/members/m2/state": "m2",
		"/1.0/cluster/members/m2":       "m2",
		"/1.0/instances/web%2F1":        "web/1",
		"/1.0/cluster/members/":         "",
		"/1.0/instances/state":          "state",
	} {
		if got := targetOf(p); got != want {
			t.Errorf("targetOf(%q) = %q, want %q", p, got, want)
		}
	}
}
