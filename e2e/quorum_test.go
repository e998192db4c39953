package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// quorumLab is the product on a real lab, asking for removal plans.
type quorumLab struct {
	lab   *incuslab.Cluster
	e     *producttest.Env
	admin string
	inc   *incus.Client
}

func startQuorumLab(t *testing.T, members int) *quorumLab {
	lab := incuslab.Start(t, members)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	x := &quorumLab{lab: lab, e: e, admin: e.Identity("admin", identity.ManageInfrastructure), inc: lab.Client(t, lab.Members[0])}
	// Incus hands out the raft roles a few seconds after the last join: wait for the
	// roles it settles on (3 voters at most, then 2 stand-bys).
	voters, standbys := min(members, 3), min(max(members-3, 0), 2)
	if members == 2 {
		voters, standbys = 1, 1
	}
	x.waitMembers(t, "roles to settle", func(ms []incus.Member) bool {
		v, s := countRoles(ms)
		return v == voters && s == standbys
	})
	return x
}

func countRoles(ms []incus.Member) (voters, standbys int) {
	for _, m := range ms {
		qm := quorum.Member{Roles: m.Roles}
		if qm.Voter() {
			voters++
		} else if qm.Standby() {
			standbys++
		}
	}
	return voters, standbys
}

func (x *quorumLab) waitMembers(t *testing.T, what string, ok func([]incus.Member) bool) []incus.Member {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var ms []incus.Member
	var err error
	for time.Now().Before(deadline) {
		if ms, err = x.inc.Members(t.Context()); err == nil && ok(ms) {
			return ms
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("waiting for %s: members %+v, %v", what, ms, err)
	return nil
}

// plan asks removeMember for its plan and returns it with its quorum projection.
func (x *quorumLab) plan(t *testing.T, name string, force bool) (plan, proj map[string]any) {
	t.Helper()
	r := x.e.GQL(x.admin, `mutation($in: RemoveMemberInput!) { removeMember(input: $in) { plan { refused refusals { code message } warnings { message }
		quorum { leaving voters votersOnlineBefore votersOnlineAfter standbysAfter emptiedFailureDomains emptiedGroups } } } }`,
		map[string]any{"in": map[string]any{"name": name, "force": force, "dryRun": true}})
	if len(r.Errors) > 0 {
		t.Fatalf("removeMember %s dry run: %+v", name, r.Errors)
	}
	plan = r.Data["removeMember"].(map[string]any)["plan"].(map[string]any)
	proj, _ = plan["quorum"].(map[string]any)
	if proj == nil || fmt.Sprint(proj["leaving"]) != "["+name+"]" {
		t.Fatalf("plan's projection %v", proj)
	}
	return plan, proj
}

func figures(proj map[string]any) string {
	return fmt.Sprintf("voters %v online %v→%v standbys after %v", proj["voters"], proj["votersOnlineBefore"], proj["votersOnlineAfter"], proj["standbysAfter"])
}

func member(ms []incus.Member, pick func(incus.Member) bool, not ...string) string {
	for _, m := range ms {
		if pick(m) && !slices.Contains(not, m.ServerName) {
			return m.ServerName
		}
	}
	return ""
}

func isVoter(m incus.Member) bool   { return quorum.Member{Roles: m.Roles}.Voter() }
func isStandby(m incus.Member) bool { return quorum.Member{Roles: m.Roles}.Standby() }
func isLeader(m incus.Member) bool  { return slices.Contains(m.Roles, quorum.RoleLeader) }

// The bootstrap cluster (scripts/run.sh's one member): its only member is never removed,
// forced or not, in the plan and for real.
func TestRemovalOfTheOnlyMemberIsRefused(t *testing.T) {
	parallel(t)
	x := startQuorumLab(t, 1)
	for _, force := range []bool{false, true} {
		plan, proj := x.plan(t, "m1", force)
		if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "last database member") {
			t.Fatalf("force=%v: plan %v", force, plan)
		}
		if figures(proj) != "voters 1 online 1→0 standbys after 0" {
			t.Fatalf("projection %v", proj)
		}
		r := x.e.GQL(x.admin, fmt.Sprintf(`mutation { removeMember(input: {name: "m1", force: %v}) { machine { name } } }`, force), nil)
		if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "forced or not") {
			t.Fatalf("force=%v: real removal %+v", force, r.Errors)
		}
	}
	if ms, err := x.inc.Members(t.Context()); err != nil || len(ms) != 1 {
		t.Fatalf("members after the refusals: %v %v", ms, err)
	}
}

// Three members, three voters: removing one is allowed (with a warning: no stand-by is
// left); a member that holds an instance is refused naming it, unless forced; and with a
// second voter frozen, removing a third is refused, forced or not.
func TestRemovalOnThreeMembersKeepsAMajorityOfVoters(t *testing.T) {
	parallel(t, lasts(21))
	x := startQuorumLab(t, 3)
	ms, _ := x.inc.Members(t.Context())
	// Apelora talks to m1; freeze a voter that is neither m1 nor the leader, remove the third.
	frozen := member(ms, func(m incus.Member) bool { return isVoter(m) && !isLeader(m) }, "m1")
	leaving := member(ms, isVoter, "m1", frozen)
	if leaving == "" {
		leaving = member(ms, isVoter, frozen)
	}
	if frozen == "" || leaving == "" {
		t.Fatalf("roles %+v: no voter to freeze and one to remove", ms)
	}

	plan, proj := x.plan(t, leaving, false)
	if plan["refused"] != false || !strings.Contains(fmt.Sprint(plan["warnings"]), "no online database stand-by") || figures(proj) != "voters 3 online 3→2 standbys after 0" {
		t.Fatalf("healthy: plan %v projection %v", plan, proj)
	}

	// An instance on the member: refused by Apelora naming it, in the plan and for real.
	if _, err := x.inc.CreateEmptyInstance(t.Context(), "held1", leaving, "local"); err != nil {
		t.Fatal(err)
	}
	plan, _ = x.plan(t, leaving, false)
	if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "held1") || !strings.Contains(fmt.Sprint(plan["refusals"]), "evacuate it first") {
		t.Fatalf("with an instance: plan %v", plan)
	}
	r := x.e.GQL(x.admin, fmt.Sprintf(`mutation { removeMember(input: {name: %q}) { machine { name } } }`, leaving), nil)
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "held1") || !strings.Contains(r.Errors[0].Message, "evacuate it first") {
		t.Fatalf("real removal with an instance: %+v", r.Errors)
	}
	plan, _ = x.plan(t, leaving, true)
	if plan["refused"] != false || !strings.Contains(fmt.Sprint(plan["warnings"]), "held1") {
		t.Fatalf("forced with an instance: plan %v", plan)
	}

	// A second voter hangs: removing the third would leave 1 of 3 voters.
	if err := x.lab.Freeze(x.lab.Member(frozen)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = x.lab.Thaw(x.lab.Member(frozen)) }()
	x.waitMembers(t, frozen+" offline", func(ms []incus.Member) bool {
		return member(ms, func(m incus.Member) bool { return m.ServerName == frozen && m.Status == incus.MemberOffline }) != ""
	})
	for _, force := range []bool{false, true} {
		plan, proj = x.plan(t, leaving, force)
		if plan["refused"] != true || !strings.Contains(fmt.Sprint(plan["refusals"]), "1 of Incus's 3 database voters would be online") || figures(proj) != "voters 3 online 2→1 standbys after 0" {
			t.Fatalf("force=%v with %s frozen: plan %v projection %v", force, frozen, plan, proj)
		}
	}
	r = x.e.GQL(x.admin, fmt.Sprintf(`mutation { removeMember(input: {name: %q, force: true}) { machine { name } } }`, leaving), nil)
	if r.Code() != "FAILED_PRECONDITION" || !strings.Contains(r.Errors[0].Message, "database voters") {
		t.Fatalf("real forced removal with %s frozen: %+v", frozen, r.Errors)
	}
	if ms, err := x.inc.Members(t.Context()); err != nil || len(ms) != 3 {
		t.Fatalf("members after the refusals: %v %v", ms, err)
	}
}

// Five members: 3 voters and 2 stand-bys. A voter leaving is replaced by a stand-by; a
// stand-by leaving leaves one.
func TestRemovalProjectionsOnFiveMembers(t *testing.T) {
	parallel(t)
	x := startQuorumLab(t, 5)
	ms, _ := x.inc.Members(t.Context())
	v, s := member(ms, isVoter, "m1"), member(ms, isStandby)
	for _, c := range []struct{ name, want string }{
		{v, "voters 3 online 3→2 standbys after 1"},
		{s, "voters 3 online 3→3 standbys after 1"},
	} {
		plan, proj := x.plan(t, c.name, false)
		if plan["refused"] != false || len(plan["warnings"].([]any)) != 0 || figures(proj) != c.want {
			t.Fatalf("removing %s: plan %v projection %v, want %s", c.name, plan, proj, c.want)
		}
	}
	// For real: the stand-by goes, and the next plan sees what Incus made of it.
	x.e.MustGQL(x.admin, fmt.Sprintf(`mutation { removeMember(input: {name: %q}) { machine { name } } }`, s), nil)
	x.waitMembers(t, "four members", func(ms []incus.Member) bool { return len(ms) == 4 })
	plan, proj := x.plan(t, v, false)
	if plan["refused"] != false || figures(proj) != "voters 3 online 3→2 standbys after 0" || !strings.Contains(fmt.Sprint(plan["warnings"]), "no online database stand-by") {
		t.Fatalf("after removing %s, removing %s: plan %v projection %v", s, v, plan, proj)
	}
}
