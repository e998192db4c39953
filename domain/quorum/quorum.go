// Package quorum is what taking members away does to Incus's database: the one rule every
// plan that takes a member away applies (removing a member, fencing one; later evacuating
// and rolling reboots), computed from Incus's own member list and its raft roles.
//
// Incus keeps its database in raft. Members with the role "database" (one of them also
// "database-leader") are the voters; the database answers only while more than half of
// them are reachable. Members with "database-standby" replicate it and are promoted when a
// voter leaves. Everything else holds no copy. Project is pure: no network, no clock.
package quorum

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apelora/fabric/domain/membership"
)

// Raft roles as Incus lists them in a member's roles.
const (
	RoleLeader  = "database-leader"
	RoleVoter   = "database"
	RoleStandby = "database-standby"
)

// Member is a cluster member as the rule sees it.
type Member struct {
	Name string
	// Online is false when Incus reports the member Offline (missed heartbeats), or the
	// caller counts it offline (a fence already asked for). Evacuated and Blocked members
	// still run their daemon and keep their database role, so they are online here.
	Online        bool
	Roles         []string
	FailureDomain string
	Groups        []string
}

// Voter reports whether the member votes in the database (database or database-leader).
func (m Member) Voter() bool {
	return slices.Contains(m.Roles, RoleVoter) || slices.Contains(m.Roles, RoleLeader)
}

// Standby reports whether the member is a database stand-by.
func (m Member) Standby() bool { return !m.Voter() && slices.Contains(m.Roles, RoleStandby) }

// Projection is the database before and after the members leave.
type Projection struct {
	// Leaving are the members the plan takes away, as asked.
	Leaving []string
	// Voters is how many voters the database has now; a majority of them must stay online.
	Voters             int
	VotersOnlineBefore int
	// VotersOnlineAfter is how many voters stay online once the members are gone, before
	// Incus promotes a stand-by in a departed voter's place.
	VotersOnlineAfter int
	// StandbysAfter is how many online stand-bys are left after Incus has promoted one for
	// each departed voter it can.
	StandbysAfter int
	// EmptiedFailureDomains and EmptiedGroups are the failure domains and cluster groups of
	// the leaving members that keep no online member.
	EmptiedFailureDomains []string
	EmptiedGroups         []string
	// Refusals say why the plan must not go ahead, whatever force says; Warnings what it
	// would cost.
	Refusals []string
	Warnings []string
}

// Refused reports whether the rule refuses the plan.
func (p Projection) Refused() bool { return len(p.Refusals) > 0 }

// Majority is how many of n voters the database needs online.
func Majority(n int) int { return n/2 + 1 }

// Project computes what the database would have after the members named leaving are gone
// (removed, fenced, powered off for a reboot), and refuses what would leave fewer than a
// majority of its voters online or no database member at all. Names in leaving that are
// not members are ignored (the caller says "not a member" in its own words).
func Project(members []Member, leaving ...string) Projection {
	p := Projection{Leaving: slices.Clone(leaving)}
	gone := map[string]bool{}
	for _, n := range leaving {
		gone[n] = true
	}
	var databaseAfter, votersGone, standbysOnline, standbysBefore int
	domains, groups := map[string]bool{}, map[string]bool{}
	for _, m := range members {
		stays := !gone[m.Name]
		switch {
		case m.Voter():
			p.Voters++
			if m.Online {
				p.VotersOnlineBefore++
			}
			if stays && m.Online {
				p.VotersOnlineAfter++
			}
			if !stays {
				votersGone++
			}
		case m.Standby() && m.Online:
			standbysBefore++
			if stays {
				standbysOnline++
			}
		}
		if stays && (m.Voter() || m.Standby()) {
			databaseAfter++
		}
		if !stays {
			if m.FailureDomain != "" {
				domains[m.FailureDomain] = true
			}
			for _, g := range m.Groups {
				groups[g] = true
			}
		}
	}
	for _, m := range members {
		if gone[m.Name] || !m.Online {
			continue
		}
		delete(domains, m.FailureDomain)
		for _, g := range m.Groups {
			delete(groups, g)
		}
	}
	p.StandbysAfter = max(standbysOnline-votersGone, 0)
	p.EmptiedFailureDomains, p.EmptiedGroups = sortedKeys(domains), sortedKeys(groups)

	who := strings.Join(leaving, ", ")
	switch {
	case p.Voters > 0 && databaseAfter == 0:
		p.Refusals = append(p.Refusals, fmt.Sprintf("without %s no member would hold Incus's database: the last database member is never taken away (add members first)", who))
	case p.Voters > 0 && p.VotersOnlineAfter < Majority(p.Voters):
		p.Refusals = append(p.Refusals, fmt.Sprintf("without %s, %d of Incus's %d database voters would be online, fewer than the %d the database needs: it would stop answering. Bring the offline voters back first", who, p.VotersOnlineAfter, p.Voters, Majority(p.Voters)))
	}
	if standbysBefore > 0 || votersGone > 0 {
		if p.StandbysAfter == 0 && databaseAfter > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("without %s no online database stand-by is left: the next voter lost cannot be replaced", who))
		}
	}
	if len(p.EmptiedFailureDomains) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("without %s no online member is left in failure domain %s", who, strings.Join(p.EmptiedFailureDomains, ", ")))
	}
	if len(p.EmptiedGroups) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("without %s no online member is left in cluster group %s: instances placed on the group have nowhere to go", who, strings.Join(p.EmptiedGroups, ", ")))
	}
	return p
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FromMembership is the rule's view of Incus's member list: a member is online unless
// Incus reports it Offline.
func FromMembership(ms []membership.Member) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{Name: m.Name, Online: m.Status != "Offline", Roles: m.Roles, FailureDomain: m.FailureDomain, Groups: m.Groups}
	}
	return out
}

// Detail is the projection as an audit event or a fence event keeps it.
func (p Projection) Detail() map[string]any {
	return map[string]any{
		"leaving": p.Leaving, "voters": p.Voters, "votersOnlineBefore": p.VotersOnlineBefore,
		"votersOnlineAfter": p.VotersOnlineAfter, "standbysAfter": p.StandbysAfter,
		"emptiedFailureDomains": p.EmptiedFailureDomains, "emptiedGroups": p.EmptiedGroups,
	}
}
