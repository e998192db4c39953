package quorum

import (
	"slices"
	"strings"
	"testing"
)

// Members as Incus lists them: the roles a 1-, 3- and 5-member cluster gets by default
// (cluster.max_voters 3, cluster.max_standby 2).
func leader(name string) Member {
	return Member{Name: name, Online: true, Roles: []string{RoleLeader, RoleVoter}, FailureDomain: "default", Groups: []string{"default"}}
}
func voter(name string) Member {
	return Member{Name: name, Online: true, Roles: []string{RoleVoter}, FailureDomain: "default", Groups: []string{"default"}}
}
func standby(name string) Member {
	return Member{Name: name, Online: true, Roles: []string{RoleStandby}, FailureDomain: "default", Groups: []string{"default"}}
}
func spare(name string) Member {
	return Member{Name: name, Online: true, FailureDomain: "default", Groups: []string{"default"}}
}
func offline(m Member) Member { m.Online = false; return m }
func in(m Member, domain string, groups ...string) Member {
	m.FailureDomain, m.Groups = domain, groups
	return m
}

func TestProject(t *testing.T) {
	three := []Member{leader("m1"), voter("m2"), voter("m3")}
	five := []Member{leader("m1"), voter("m2"), voter("m3"), standby("m4"), standby("m5")}
	cases := []struct {
		name    string
		members []Member
		leaving []string
		// want: Voters, VotersOnlineBefore, VotersOnlineAfter, StandbysAfter
		want     [4]int
		refusal  string // a substring of the one refusal, "" for none
		warnings []string
		domains  []string
		groups   []string
	}{
		{name: "the only member (bootstrap cluster)", members: []Member{leader("m1")}, leaving: []string{"m1"},
			want: [4]int{1, 1, 0, 0}, refusal: "last database member", domains: []string{"default"}, groups: []string{"default"},
			warnings: []string{"failure domain default", "cluster group default"}},
		{name: "two members: the stand-by leaves", members: []Member{leader("m1"), standby("m2")}, leaving: []string{"m2"},
			want: [4]int{1, 1, 1, 0}, warnings: []string{"no online database stand-by"}},
		{name: "two members: the leader leaves", members: []Member{leader("m1"), standby("m2")}, leaving: []string{"m1"},
			want: [4]int{1, 1, 0, 0}, refusal: "0 of Incus's 1 database voters would be online, fewer than the 1", warnings: []string{"no online database stand-by"}},
		{name: "three healthy: a voter leaves", members: three, leaving: []string{"m2"},
			want: [4]int{3, 3, 2, 0}, warnings: []string{"no online database stand-by"}},
		{name: "three, one voter offline: another voter leaves", members: []Member{leader("m1"), offline(voter("m2")), voter("m3")}, leaving: []string{"m3"},
			want: [4]int{3, 2, 1, 0}, refusal: "1 of Incus's 3 database voters would be online, fewer than the 2", warnings: []string{"no online database stand-by"}},
		{name: "three, one voter offline: the offline one leaves (a fence)", members: []Member{leader("m1"), offline(voter("m2")), voter("m3")}, leaving: []string{"m2"},
			want: [4]int{3, 2, 2, 0}, warnings: []string{"no online database stand-by"}},
		{name: "five healthy: a voter leaves, a stand-by takes its place", members: five, leaving: []string{"m3"},
			want: [4]int{3, 3, 2, 1}},
		{name: "five healthy: a stand-by leaves", members: five, leaving: []string{"m5"},
			want: [4]int{3, 3, 3, 1}},
		{name: "five: two voters leave at once", members: five, leaving: []string{"m2", "m3"},
			want: [4]int{3, 3, 1, 0}, refusal: "1 of Incus's 3 database voters", warnings: []string{"no online database stand-by"}},
		{name: "five: both stand-bys leave", members: five, leaving: []string{"m4", "m5"},
			want: [4]int{3, 3, 3, 0}, warnings: []string{"no online database stand-by"}},
		{name: "five, one stand-by offline: a voter leaves", members: []Member{leader("m1"), voter("m2"), voter("m3"), standby("m4"), offline(standby("m5"))}, leaving: []string{"m2"},
			want: [4]int{3, 3, 2, 0}, warnings: []string{"no online database stand-by"}},
		{name: "a member without a database role leaves", members: append(slices.Clone(five), spare("m6")), leaving: []string{"m6"},
			want: [4]int{3, 3, 3, 2}},
		{name: "failure domain and group emptied", members: []Member{in(leader("m1"), "rack1", "default"), in(voter("m2"), "rack1", "default"), in(voter("m3"), "rack2", "default", "gpu")},
			leaving: []string{"m3"}, want: [4]int{3, 3, 2, 0}, domains: []string{"rack2"}, groups: []string{"gpu"},
			warnings: []string{"no online database stand-by", "failure domain rack2", "cluster group gpu"}},
		{name: "a domain whose other member is offline counts as emptied", members: []Member{in(leader("m1"), "rack1"), in(voter("m2"), "rack1"), in(offline(voter("m3")), "rack2"), in(standby("m4"), "rack2")},
			leaving: []string{"m4"}, want: [4]int{3, 2, 2, 0}, domains: []string{"rack2"},
			warnings: []string{"no online database stand-by", "failure domain rack2"}},
		{name: "not a member: nothing changes", members: three, leaving: []string{"nope"}, want: [4]int{3, 3, 3, 0}},
		{name: "no roles at all (not clustered)", members: []Member{spare("m1")}, leaving: []string{"m1"}, want: [4]int{0, 0, 0, 0},
			domains: []string{"default"}, groups: []string{"default"}, warnings: []string{"failure domain default", "cluster group default"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Project(c.members, c.leaving...)
			got := [4]int{p.Voters, p.VotersOnlineBefore, p.VotersOnlineAfter, p.StandbysAfter}
			if got != c.want {
				t.Errorf("voters, online before, online after, stand-bys after = %v, want %v", got, c.want)
			}
			switch {
			case c.refusal == "" && p.Refused():
				t.Errorf("refused: %q", p.Refusals)
			case c.refusal != "" && (len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0], c.refusal)):
				t.Errorf("refusals %q, want one containing %q", p.Refusals, c.refusal)
			}
			if len(p.Warnings) != len(c.warnings) {
				t.Fatalf("warnings %q, want %d containing %q", p.Warnings, len(c.warnings), c.warnings)
			}
			for i, w := range c.warnings {
				if !strings.Contains(p.Warnings[i], w) {
					t.Errorf("warning %d %q, want it to contain %q", i, p.Warnings[i], w)
				}
			}
			if !slices.Equal(p.EmptiedFailureDomains, nonNil(c.domains)) || !slices.Equal(p.EmptiedGroups, nonNil(c.groups)) {
				t.Errorf("emptied domains %q groups %q, want %q %q", p.EmptiedFailureDomains, p.EmptiedGroups, c.domains, c.groups)
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// The rule never lets a plan leave fewer than a majority of voters online, or no database
// member, for any subset of any small cluster that leaves.
func TestProjectNeverLosesQuorum(t *testing.T) {
	roles := [][]string{{RoleLeader, RoleVoter}, {RoleVoter}, {RoleStandby}, nil}
	for n := 1; n <= 4; n++ {
		// Every assignment of roles and online/offline to n members, every subset leaving.
		for code := 0; code < pow(8, n); code++ {
			ms := make([]Member, n)
			c := code
			for i := range ms {
				ms[i] = Member{Name: string(rune('a' + i)), Roles: roles[c%4], Online: (c/4)%2 == 0}
				c /= 8
			}
			for set := 1; set < 1<<n; set++ {
				var leaving []string
				for i := range ms {
					if set&(1<<i) != 0 {
						leaving = append(leaving, ms[i].Name)
					}
				}
				p := Project(ms, leaving...)
				var voters, up, db int
				for _, m := range ms {
					if m.Voter() {
						voters++
					}
					if slices.Contains(leaving, m.Name) {
						continue
					}
					if m.Voter() && m.Online {
						up++
					}
					if m.Voter() || m.Standby() {
						db++
					}
				}
				lost := voters > 0 && (up < voters/2+1 || db == 0)
				if lost != p.Refused() {
					t.Fatalf("members %+v leaving %v: refused=%v, want %v (%q)", ms, leaving, p.Refused(), lost, p.Refusals)
				}
			}
		}
	}
}

func pow(b, e int) int {
	r := 1
	for range e {
		r *= b
	}
	return r
}
