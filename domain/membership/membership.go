// Package membership is Incus cluster membership in Apelora's words: members, the join
// tokens pending for names, and the facts the lifecycle, the admission checks and the
// enrolment steps read. Incus is the truth for all of it; nothing here is stored.
package membership

import (
	"context"
	"time"
)

// SchedulerKey is the member config key that holds a member out of automatic placement.
const SchedulerKey = "scheduler.instance"

// Status is a member's state as Incus reports it. The values are Incus's own words, so
// messages and recorded details read as `incus cluster list` shows them; app's Incus port
// maps Incus's strings to these, in one place (memberStatus), and a word this version does
// not know becomes StatusUnknown.
type Status string

const (
	StatusOnline    Status = "Online"    // fully operational
	StatusOffline   Status = "Offline"   // missed its heartbeats
	StatusEvacuated Status = "Evacuated" // its instances moved away for maintenance
	StatusBlocked   Status = "Blocked"   // waits for an upgrade to the cluster's version
	StatusUnknown   Status = "Unknown"   // a status Apelora does not know
)

// Member is an Incus cluster member.
type Member struct {
	Name          string
	URL           string
	Status        Status
	Message       string
	Architecture  string
	FailureDomain string
	Description   string
	Roles         []string
	Groups        []string
	Config        map[string]string
}

// Scheduler is the member's scheduler.instance value, "" when the key is absent.
func (m *Member) Scheduler() string { return m.Config[SchedulerKey] }

// Held reports whether the member is held out of automatic placement.
func (m *Member) Held() bool { return m.Scheduler() == "manual" }

// Online reports whether Incus says the member is fully operational.
func (m *Member) Online() bool { return m.Status == StatusOnline }

// Evacuated reports whether Incus says the member is evacuated (in maintenance).
func (m *Member) Evacuated() bool { return m.Status == StatusEvacuated }

// PendingJoin is a join token Incus has issued for a name and that is not used yet. Only
// the name and the expiry are ever read from it.
type PendingJoin struct {
	Name      string
	ExpiresAt time.Time
}

// Snapshot is the membership at one moment: two Incus calls, whatever the cluster size.
type Snapshot struct {
	Members []Member
	Pending []PendingJoin
	// PendingProblem says why the pending join tokens could not be listed ("" when they
	// were). Incus asks every member for its operations, so a hung member can stall that
	// list while the member list still answers.
	PendingProblem string
}

// Member returns the member called name, or nil.
func (s *Snapshot) Member(name string) *Member {
	for i := range s.Members {
		if s.Members[i].Name == name {
			return &s.Members[i]
		}
	}
	return nil
}

// PendingFor returns the pending join for name, or nil.
func (s *Snapshot) PendingFor(name string) *PendingJoin {
	for i := range s.Pending {
		if s.Pending[i].Name == name {
			return &s.Pending[i]
		}
	}
	return nil
}

// Source reads the membership.
type Source interface {
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// Version is what a member says of its software.
type Version struct {
	Incus         string // e.g. "6.0.4"
	APIExtensions int
	Kernel        string // e.g. "6.12.8-amd64"
	OS            string // e.g. "Debian GNU/Linux 12"
}
