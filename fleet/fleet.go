// Package fleet is the joined view the product is built around: each machine record beside
// the Incus member of the same name (and, for MAAS machines, the MAAS machine), with the
// phase derived from all of them on every read.
package fleet

import (
	"context"
	"sort"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/lifecycle"
	"github.com/apelora/fabric/machines"
	"github.com/apelora/fabric/membership"
)

// Machine is one row of the fleet.
type Machine struct {
	Name     string
	Record   *machines.Record        // nil for a member with no record
	Member   *membership.Member      // nil when not a member (or Incus unknown)
	Pending  *membership.PendingJoin // a pending join token for the name
	Phase    lifecycle.Phase
	Warnings []lifecycle.Warning
}

// Records reads machine records.
type Records interface {
	Record(ctx context.Context, name string) (*machines.Record, error)
	Records(ctx context.Context) ([]machines.Record, error)
}

// Admissions says which machines have an admission recorded in the audit trail.
type Admissions interface {
	AdmittedMachines(ctx context.Context) (map[string]bool, error)
}

// Service assembles the fleet view. Whatever the fleet's size, a view costs one read of
// the records, one of the admissions, and two Incus calls (members, pending tokens).
type Service struct {
	Records    Records
	Admissions Admissions
	// Incus is nil when Incus is not configured.
	Incus membership.Source
}

// view is what the sources said for one read.
type view struct {
	records  map[string]*machines.Record
	snapshot *membership.Snapshot
	problem  string // why Incus is unknown
	admitted map[string]bool
}

func (s *Service) read(ctx context.Context) (*view, error) {
	recs, err := s.Records.Records(ctx)
	if err != nil {
		return nil, err
	}
	v := &view{records: map[string]*machines.Record{}}
	for i := range recs {
		v.records[recs[i].Name] = &recs[i]
	}
	if s.Incus == nil {
		v.problem = "Incus is not configured (set APELORA_INCUS_URL or APELORA_INCUS_SOCKET)"
		return v, nil
	}
	snap, err := s.Incus.Snapshot(ctx)
	if err != nil {
		v.problem = problem(err)
		return v, nil
	}
	v.snapshot = snap
	if v.admitted, err = s.Admissions.AdmittedMachines(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

func problem(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return "Incus could not be asked"
}

// Machines returns every machine record and every member, ordered by name.
func (s *Service) Machines(ctx context.Context) ([]Machine, error) {
	v, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range v.records {
		names[n] = true
	}
	if v.snapshot != nil {
		for _, m := range v.snapshot.Members {
			names[m.Name] = true
		}
	}
	out := make([]Machine, 0, len(names))
	for n := range names {
		out = append(out, v.row(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Machine returns one machine, or nil when neither a record nor a member has the name.
func (s *Service) Machine(ctx context.Context, name string) (*Machine, error) {
	v, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	if v.records[name] == nil && (v.snapshot == nil || v.snapshot.Member(name) == nil) {
		return nil, nil
	}
	m := v.row(name)
	return &m, nil
}

func (v *view) row(name string) Machine {
	m := Machine{Name: name, Record: v.records[name]}
	f := lifecycle.Facts{HasRecord: m.Record != nil, IncusProblem: v.problem}
	if v.snapshot != nil {
		f.IncusKnown = true
		m.Member = v.snapshot.Member(name)
		m.Pending = v.snapshot.PendingFor(name)
		f.IsMember = m.Member != nil
		f.PendingJoinToken = m.Pending != nil
		f.AdmissionRecorded = v.admitted[name]
		if m.Member != nil {
			f.Scheduler = m.Member.Scheduler()
		}
	}
	m.Phase, m.Warnings = lifecycle.Derive(f)
	return m
}
