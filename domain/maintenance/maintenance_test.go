package maintenance

import (
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/membership"
)

func TestFateFollowsTheModeThenTheInstance(t *testing.T) {
	for _, c := range []struct {
		evacuate, mode string
		want           Fate
	}{
		{"", "", FateMove}, {"auto", "", FateMove}, {"stop", "", FateStop}, {"migrate", "", FateMigrate},
		{"live-migrate", "", FateLiveMigrate}, {"stop", "migrate", FateMigrate}, {"migrate", "stop", FateStop}, {"", "auto", FateMove},
	} {
		if got := FateOf(Instance{Name: "c1", Evacuate: c.evacuate}, c.mode); got != c.want {
			t.Errorf("cluster.evacuate=%q mode=%q: %s, want %s", c.evacuate, c.mode, got, c.want)
		}
	}
}

func TestPlacementListsTheMembersInstancesAndTheAdmittedTargets(t *testing.T) {
	marked := map[string]string{lifecycle.AdmissionKey: "admission 1, request r"}
	members := []membership.Member{
		{Name: "n1", Status: "Online", Config: marked},
		{Name: "n2", Status: "Online", Config: marked},
		{Name: "n3", Status: "Online", Config: map[string]string{}},                                                            // not admitted
		{Name: "n4", Status: "Online", Config: map[string]string{lifecycle.AdmissionKey: "x", "scheduler.instance": "manual"}}, // held
		{Name: "n5", Status: "Evacuated", Config: marked},                                                                      // in maintenance
		{Name: "n6", Status: "Online", Config: marked},
	}
	all := []Instance{
		{Name: "b", Location: "n1"}, {Name: "a", Project: "p", Location: "n1", Evacuate: "stop"},
		{Name: "x", Location: "n2"}, {Name: "y", Location: "n2"}, {Name: "z", Location: "n6"},
	}
	on, targets := placement(all, members, "n1", "")
	if len(on) != 2 || on[0].ID() != "b" || on[1].ID() != "p/a" || on[1].Fate != FateStop || on[0].Fate != FateMove {
		t.Fatalf("instances on n1: %+v", on)
	}
	if len(targets) != 2 || targets[0] != (Target{"n6", 1}) || targets[1] != (Target{"n2", 2}) {
		t.Fatalf("targets: %+v, want n6 (1 instance) then n2 (2)", targets)
	}
}

func TestRestoreBringsBackWhatLeftAndStartsWhatStayed(t *testing.T) {
	all := []Instance{{Name: "moved", Location: "n2", Origin: "n1"}, {Name: "stayed", Location: "n1"}, {Name: "other", Location: "n2"}}
	got := returning(all, "n1")
	if len(got) != 2 || got[0].Name != "moved" || got[0].Fate != FateReturn || got[1].Name != "stayed" || got[1].Fate != FateStart {
		t.Fatalf("restore: %+v", got)
	}
}

func TestProjectionRefusesOnlyWithOthersInMaintenance(t *testing.T) {
	voter := func(name, status string) membership.Member {
		return membership.Member{Name: name, Status: membership.Status(status), Roles: []string{"database"}}
	}
	p, others := projection([]membership.Member{voter("n1", "Online"), voter("n2", "Online"), voter("n3", "Online")}, "n1")
	if p.Refused() || len(others) != 0 {
		t.Fatalf("one of three voters: %+v %v", p, others)
	}
	p, others = projection([]membership.Member{voter("n1", "Online"), voter("n2", "Evacuated"), voter("n3", "Online")}, "n1")
	if !p.Refused() || !slices.Equal(others, []string{"n2"}) || !slices.Equal(p.Leaving, []string{"n1", "n2"}) {
		t.Fatalf("with n2 in maintenance: %+v %v", p, others)
	}
}

func TestOutcomesSayWhereEachInstanceEndedUp(t *testing.T) {
	op := Task{Machine: "n1", Action: Evacuate, Instances: []Affected{
		{Instance: Instance{Name: "a"}}, {Instance: Instance{Name: "b"}}, {Instance: Instance{Name: "gone"}}}}
	got := strings.Join(Outcomes(op, []Instance{{Name: "a", Location: "n2", Status: "Running"}, {Name: "b", Location: "n1", Status: "Stopped"}}), "; ")
	want := "a: moved to n2 (running); b: stopped, stays on n1 until it is restored (stopped); gone: no longer exists"
	if got != want {
		t.Fatalf("outcomes:\n%s\nwant\n%s", got, want)
	}
}
