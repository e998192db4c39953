// Package machines is the machine record: what Apelora knows about a server before and
// after it becomes an Incus member, and the rules for registering and unregistering it.
package machines

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Provisioner is how a machine gets its operating system.
type Provisioner string

const (
	Manual Provisioner = "MANUAL"
	MAAS   Provisioner = "MAAS"
)

// Capabilities are what a provisioner can do for Apelora.
type Capabilities struct {
	Discovers bool // lists machines Apelora has not registered
	Installs  bool // installs an operating system
	Powers    bool // powers a machine off (fencing)
}

// Capabilities returns what p can do. MANUAL can do none of it.
func (p Provisioner) Capabilities() Capabilities {
	if p == MAAS {
		return Capabilities{Discovers: true, Installs: true, Powers: true}
	}
	return Capabilities{}
}

// Record is an Apelora machine record.
type Record struct {
	Name         string
	Provisioner  Provisioner
	Description  string
	MAASSystemID string
	HardwareUUID string
	RegisteredAt time.Time
	RegisteredBy string
	// HardwareProfile names the hardware profile admission compares the machine with; ""
	// for none.
	HardwareProfile string
	// Cluster is the id of the Incus cluster the record is enrolled in (domain/clusters);
	// nil for a record not enrolled anywhere yet.
	Cluster *int64
}

const maxDescriptionLength = 1024

// systemIDPattern is what a MAAS system id looks like (MAAS makes them of 6 lower-case
// letters and digits). The one rule for every place that takes a system id: registration,
// fence mappings, the MAAS steps, the MAAS client (which puts it in a URL path) and the
// simulator's fixtures. fence_mappings' CHECK (migrations/0002_fencing.sql) is the same
// pattern; machine_records has no CHECK on it, so this rule is what keeps it clean.
var systemIDPattern = regexp.MustCompile(`^[a-z0-9]{4,16}$`)

// IsSystemID reports whether id is spelled as a MAAS system id.
func IsSystemID(id string) bool { return systemIDPattern.MatchString(id) }

// ValidateSystemID refuses id unless it is a MAAS system id, naming field (the input field
// the caller took it from) in the refusal.
func ValidateSystemID(field, id string) error {
	if !IsSystemID(id) {
		return apperr.Invalid(field, "MAAS system id %s is not valid: MAAS system ids are 4–16 lower-case letters and digits, as MAAS shows them", apperr.Quote(id))
	}
	return nil
}

// Registration is what an administrator asks to register.
type Registration struct {
	Name         string
	Provisioner  Provisioner
	Description  string
	MAASSystemID string
}

// Validate checks a registration's fields, naming the first that is wrong.
func (r *Registration) Validate() error {
	if err := ValidateName(r.Name); err != nil {
		return err
	}
	if r.Provisioner != Manual && r.Provisioner != MAAS {
		return apperr.Invalid("provisioner", "unknown provisioner %s: use MANUAL or MAAS", apperr.Quote(string(r.Provisioner)))
	}
	if utf8.RuneCountInString(r.Description) > maxDescriptionLength {
		return apperr.Invalid("description", "description is longer than %d characters", maxDescriptionLength)
	}
	if strings.ContainsFunc(r.Description, func(c rune) bool { return c < 0x20 && c != '\n' && c != '\t' }) {
		return apperr.Invalid("description", "description contains control characters")
	}
	if !utf8.ValidString(r.Description) {
		return apperr.Invalid("description", "description is not valid UTF-8 text")
	}
	switch r.Provisioner {
	case Manual:
		if r.MAASSystemID != "" {
			return apperr.Invalid("maasSystemId", "a MANUAL machine has no MAAS system id: leave maasSystemId empty or register it with provisioner MAAS")
		}
	case MAAS:
		if r.MAASSystemID == "" {
			return apperr.Invalid("maasSystemId", "a MAAS machine needs its MAAS system id (maasSystemId), as MAAS shows it")
		}
		if err := ValidateSystemID("maasSystemId", r.MAASSystemID); err != nil {
			return err
		}
	}
	return nil
}

// Tx is the part of a database transaction that machine records need.
type Tx interface {
	InsertRecord(ctx context.Context, r Record) error
	DeleteRecord(ctx context.Context, name string) (bool, error)
	// SetHardwareUUID records uuid on the record name registered from systemID, if the
	// record has none yet; it answers whether it did.
	SetHardwareUUID(ctx context.Context, name, systemID, uuid string) (bool, error)
}

// Store runs changes to machine records. Change runs fn in one transaction that holds the
// machine's lock and writes the audit event of the mutation in progress.
type Store interface {
	Change(ctx context.Context, machine string, fn func(Tx) error) error
	Record(ctx context.Context, name string) (*Record, error)
	Records(ctx context.Context) ([]Record, error)
}

// MAASLookup finds a machine in MAAS so that its hardware UUID can be copied.
type MAASLookup interface {
	// HardwareUUID is the hardware UUID MAAS reports for the machine: "" until MAAS has
	// commissioned it.
	HardwareUUID(ctx context.Context, systemID string) (string, error)
}

// Membership tells whether a name is an Incus member or has a pending join token.
type Membership interface {
	Snapshot(ctx context.Context) (*membership.Snapshot, error)
}

// Service applies the machine record rules.
type Service struct {
	Store Store
	// MAAS is nil when MAAS is not configured.
	MAAS MAASLookup
	// Membership is nil when Incus is not configured.
	Membership Membership
	Now        func() time.Time
}

// Register records a new machine. For MAAS machines the hardware UUID is copied from MAAS
// when MAAS reports one; a machine MAAS has only discovered (New) has none yet, and is
// registered all the same, so that commissioning it is a step in its own history:
// CopyHardwareUUID records the UUID once MAAS reports it.
func (s *Service) Register(ctx context.Context, actor string, reg Registration) (*Record, error) {
	if err := reg.Validate(); err != nil {
		return nil, err
	}
	rec := Record{
		Name: reg.Name, Provisioner: reg.Provisioner, Description: reg.Description,
		MAASSystemID: reg.MAASSystemID, RegisteredBy: actor, RegisteredAt: s.now(),
	}
	if reg.Provisioner == MAAS {
		if s.MAAS == nil {
			e := apperr.NotConfigured(apperr.MAAS)
			e.Message += "; or register the machine with provisioner MANUAL"
			return nil, e
		}
		uuid, err := s.MAAS.HardwareUUID(ctx, reg.MAASSystemID)
		if err != nil {
			return nil, err
		}
		// The record copies it: what MAAS reports is part of what is approved.
		if err := plan.Read(ctx, "hardware UUID MAAS reports for "+reg.MAASSystemID, orNone(uuid)); err != nil {
			return nil, err
		}
		rec.HardwareUUID = uuid
	}
	err := s.Store.Change(ctx, reg.Name, func(tx Tx) error { return tx.InsertRecord(ctx, rec) })
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// fact is the record as a plan that removes it reads it.
func (r *Record) fact() string {
	s := fmt.Sprintf("%s, registered by %s at %s", r.Provisioner, r.RegisteredBy, r.RegisteredAt.UTC().Format(time.RFC3339Nano))
	if r.MAASSystemID != "" {
		s += ", MAAS system id " + r.MAASSystemID
	}
	if r.HardwareUUID != "" {
		s += ", hardware UUID " + r.HardwareUUID
	}
	if r.HardwareProfile != "" {
		s += ", hardware profile " + r.HardwareProfile
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// UUIDActor is the actor of the audit event of copying a hardware UUID from MAAS: a change
// the server makes on its own when it notices MAAS reports what the record lacks.
const UUIDActor = "apelora (MAAS)"

// CopyUUIDAction names the audit event of copying a hardware UUID from MAAS.
const CopyUUIDAction = "copyHardwareUuid"

// errNothingToCopy ends a copy without writing anything, audit event included.
var errNothingToCopy = errors.New("nothing to copy")

// CopyHardwareUUID records uuid, which MAAS now reports for systemID, on the record name
// registered from it without one, in an audited change of its own (actor UUIDActor, action
// CopyUUIDAction, request requestID). Once recorded it is a fact of the record, as if it
// had been there at registration: a later change in MAAS raises HARDWARE_MISMATCH instead
// of being copied again. It answers whether it copied (false: the record has one already,
// was registered from another system id, or is gone). A dry run copies nothing.
func (s *Service) CopyHardwareUUID(ctx context.Context, name, systemID, uuid, requestID string) (bool, error) {
	if uuid == "" || systemID == "" || plan.From(ctx) != nil {
		return false, nil
	}
	act := &audit.Action{Actor: UUIDActor, Name: CopyUUIDAction, Machine: name, RequestID: requestID,
		Parameters: map[string]any{"maasSystemId": systemID, "hardwareUuid": uuid}}
	err := s.Store.Change(audit.WithAction(ctx, act), name, func(tx Tx) error {
		done, err := tx.SetHardwareUUID(ctx, name, systemID, uuid)
		if err == nil && !done {
			return errNothingToCopy
		}
		return err
	})
	if errors.Is(err, errNothingToCopy) {
		return false, nil
	}
	return err == nil, err
}

// Unregister removes a machine record.
func (s *Service) Unregister(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return s.Store.Change(ctx, name, func(tx Tx) error {
		// Read first so an unknown name needs no Incus; Incus is asked before anything is
		// written, so no transaction is open while it answers.
		rec, err := s.Store.Record(ctx, name)
		if err != nil {
			return err
		}
		if rec == nil {
			return apperr.New(apperr.NotFound, "no machine record named %s: list machines with the `machines` query", apperr.Quote(name))
		}
		if err := plan.Read(ctx, "machine record "+name, rec.fact()); err != nil {
			return err
		}
		if s.Membership != nil {
			snap, err := s.Membership.Snapshot(ctx)
			if err != nil {
				return err
			}
			if snap.Member(name) != nil {
				return apperr.New(apperr.FailedPrecondition, "%s is still an Incus member: remove the member first (removeMember), then unregister it", apperr.Quote(name))
			}
			if snap.PendingFor(name) != nil {
				return apperr.New(apperr.FailedPrecondition, "a join token for %s is pending: revoke it first (revokeJoinToken), then unregister the machine", apperr.Quote(name))
			}
			if snap.PendingProblem != "" {
				return apperr.New(apperr.Unavailable, "cannot tell whether a join token for %s is pending: %s; try again when every member answers", apperr.Quote(name), snap.PendingProblem)
			}
		}
		found, err := tx.DeleteRecord(ctx, name)
		if err != nil {
			return err
		}
		if !found {
			return apperr.New(apperr.NotFound, "no machine record named %s: list machines with the `machines` query", apperr.Quote(name))
		}
		return nil
	})
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// RecordReader reads one machine record.
type RecordReader interface {
	Record(ctx context.Context, name string) (*Record, error)
}

// Registered returns the record of the registered machine name, after checking the name.
// An unknown name is NOT_FOUND with next, which says what to do, in the message.
func Registered(ctx context.Context, r RecordReader, name, next string) (*Record, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	rec, err := r.Record(ctx, name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, apperr.New(apperr.NotFound, "no machine record named %s: %s", apperr.Quote(name), next)
	}
	return rec, nil
}
