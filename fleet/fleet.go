// Package fleet is the joined view the product is built around: each machine record beside
// the Incus member of the same name (and, for MAAS machines, the MAAS machine), with the
// phase derived from all of them on every read.
package fleet

import (
	"context"
	"sort"

	"github.com/apelora/fabric/lifecycle"
	"github.com/apelora/fabric/machines"
)

// Machine is one row of the fleet.
type Machine struct {
	Name     string
	Record   *machines.Record // nil for a member with no record
	Phase    lifecycle.Phase
	Warnings []lifecycle.Warning
}

// Records reads machine records.
type Records interface {
	Record(ctx context.Context, name string) (*machines.Record, error)
	Records(ctx context.Context) ([]machines.Record, error)
}

// Service assembles the fleet view.
type Service struct {
	Records Records
}

// Machines returns every machine, ordered by name.
func (s *Service) Machines(ctx context.Context) ([]Machine, error) {
	recs, err := s.Records.Records(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*machines.Record{}
	for i := range recs {
		byName[recs[i].Name] = &recs[i]
	}
	out := make([]Machine, 0, len(byName))
	for name, rec := range byName {
		out = append(out, s.row(name, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Machine returns one machine, or nil when no source knows the name.
func (s *Service) Machine(ctx context.Context, name string) (*Machine, error) {
	rec, err := s.Records.Record(ctx, name)
	if err != nil || rec == nil {
		return nil, err
	}
	m := s.row(name, rec)
	return &m, nil
}

func (s *Service) row(name string, rec *machines.Record) Machine {
	phase, warnings := lifecycle.Derive(lifecycle.Facts{
		HasRecord:    rec != nil,
		IncusProblem: "Incus is not configured (set APELORA_INCUS_URL or APELORA_INCUS_SOCKET)",
	})
	return Machine{Name: name, Record: rec, Phase: phase, Warnings: warnings}
}
