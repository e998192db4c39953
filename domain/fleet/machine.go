package fleet

import (
	"context"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/apperr"
)

// One machine's reads: a mutation's answer (and the machine query) shows one machine, and
// asks MAAS and Incus only for what that row joins, never the whole MAAS list or member
// list. From PostgreSQL it reads the open admissions, fence mappings, drift and profiles tables
// whole, as the view does: one query each, small beside an upstream call.

// RecordsBySystemID finds the record registered from a MAAS machine (nil: none).
type RecordsBySystemID interface {
	RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error)
}

// IncusMember reads one name's side of Incus: a snapshot holding the member of that name
// (none when there is no such member) and every pending join token.
type IncusMember interface {
	MemberSnapshot(ctx context.Context, name string) (*membership.Snapshot, error)
}

// MAASMachine reads the MAAS machines one row can hold.
type MAASMachine interface {
	// Machine reads one machine by system id; NOT_FOUND when MAAS knows none.
	Machine(ctx context.Context, systemID string) (provisioning.MAASMachine, error)
	// MachinesNamed lists the machines MAAS calls hostname (a filtered list).
	MachinesNamed(ctx context.Context, hostname string) ([]provisioning.MAASMachine, error)
}

// One configures Machine's reads of one machine. Without it (or without a port for a
// configured upstream) Machine builds the whole view and picks the row.
type One struct {
	BySystemID RecordsBySystemID
	Incus      IncusMember
	MAAS       MAASMachine
}

func (s *Service) oneReads(name string, src *sources) bool {
	// A name with '@' is the row of a second MAAS machine with the same hostname, and one
	// with '.' an unclaimed member whose name another cluster also has, which only the
	// whole lists can place. With several clusters, so can any name (which cluster's
	// member it is depends on every cluster's list); One.Incus reads the environment's.
	if len(src.clusters) > 1 || len(src.clusters) == 1 && !src.clusters[0].env {
		return false
	}
	return s.One != nil && s.One.BySystemID != nil && !strings.ContainsAny(name, "@.") &&
		(len(src.clusters) == 0 || s.One.Incus != nil) && (s.MAAS == nil || s.One.MAAS != nil)
}

// Machine returns one machine, or nil when no source knows the name. It reads that
// machine's record, its MAAS machine (by the record's system id, else the machines MAAS
// calls by that name), its Incus member and the pending join tokens: the same row the
// whole view holds, joined by the same rule (join).
func (s *Service) Machine(ctx context.Context, name string) (*Machine, error) {
	if name == "" || len(name) > maxName {
		return nil, nil // no source has such a name: ask none
	}
	src := &sources{start: time.Now()}
	s.clusterReads(ctx, src)
	if !s.oneReads(name, src) {
		v, err := s.View(ctx)
		if err != nil {
			return nil, err
		}
		return pick(v.Machines, name), nil
	}
	var r reads
	open := s.readStore(ctx, &r, src)
	var maasErr error
	r.db(func() error {
		rec, err := s.Records.Record(ctx, name)
		if err != nil || rec == nil && s.MAAS == nil {
			return err
		}
		if rec != nil {
			src.records = append(src.records, *rec)
		}
		if s.MAAS == nil {
			return nil
		}
		if rec != nil && rec.MAASSystemID != "" {
			m, err := s.One.MAAS.Machine(ctx, rec.MAASSystemID)
			switch e, ok := apperr.As(err); {
			case err == nil:
				src.maas = append(src.maas, m)
			case ok && e.Code == apperr.NotFound:
				// Gone from MAAS: the row says so (MAAS_MACHINE_MISSING).
			default:
				maasErr = err
			}
			return nil
		}
		ms, err := s.One.MAAS.MachinesNamed(ctx, name)
		if err != nil {
			maasErr = err
			return nil
		}
		src.maas = ms
		// A machine registered from MAAS under another name sits on that record's row:
		// the join needs that record to place it there.
		for _, m := range ms {
			owner, err := s.One.BySystemID.RecordBySystemID(ctx, m.SystemID)
			if err != nil {
				return err
			}
			if owner != nil && owner.Name != name {
				src.records = append(src.records, *owner)
			}
		}
		return nil
	})
	if len(src.clusters) == 1 && src.clusters[0].incus != nil {
		c := &src.clusters[0]
		r.upstream(func() { c.snap, c.err = s.One.Incus.MemberSnapshot(ctx, name) })
	}
	if err := r.wait(); err != nil {
		return nil, err
	}
	s.settle(src, *open, maasErr, false)
	s.copyUUIDs(ctx, src)
	return pick(src.join(), name), nil
}

// RegisteredFrom returns the machine whose record was registered from the MAAS machine
// systemID, or nil when none was.
func (s *Service) RegisteredFrom(ctx context.Context, systemID string) (*Machine, error) {
	if s.One == nil || s.One.BySystemID == nil {
		v, err := s.View(ctx)
		if err != nil {
			return nil, err
		}
		for i := range v.Machines {
			if rec := v.Machines[i].Record; rec != nil && rec.MAASSystemID == systemID {
				return &v.Machines[i], nil
			}
		}
		return nil, nil
	}
	rec, err := s.One.BySystemID.RecordBySystemID(ctx, systemID)
	if err != nil || rec == nil {
		return nil, err
	}
	return s.Machine(ctx, rec.Name)
}

// maxName bounds the names a row can have: a MAAS hostname (a DNS label, 63 bytes), a
// record or member name, or "hostname@systemid".
const maxName = 255

func pick(rows []Machine, name string) *Machine {
	for i := range rows {
		if rows[i].Name == name {
			return &rows[i]
		}
	}
	return nil
}
