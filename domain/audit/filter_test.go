package audit

import "testing"

func TestFilterMatchesAsAPageSelects(t *testing.T) {
	e := Event{Actor: "alice", Machine: "node-1", Outcome: Refused}
	for _, c := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Machine: "node-1"}, true},
		{Filter{Machine: "node-2"}, false},
		{Filter{Actor: "alice", Outcome: Refused}, true},
		{Filter{Actor: "bob"}, false},
		{Filter{Outcome: Succeeded}, false},
		{Filter{Machine: "node-1", Actor: "alice", Outcome: Failed}, false},
	} {
		if got := c.f.Matches(e); got != c.want {
			t.Errorf("%+v.Matches = %v, want %v", c.f, got, c.want)
		}
	}
}
