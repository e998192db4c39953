package hardware

import (
	"context"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Tx is the part of a database transaction that profiles need.
type Tx interface {
	// PutProfile declares p, replacing a profile of the same name, and returns the one it
	// replaced, if any.
	PutProfile(ctx context.Context, p Profile) (*Profile, error)
	// DeleteProfile removes a profile no machine is assigned to and returns it, or nil
	// when there is none; a profile still assigned gives FAILED_PRECONDITION naming them.
	DeleteProfile(ctx context.Context, name string) (*Profile, error)
	// AssignProfile sets (profile "" clears) the machine record's profile and returns the
	// name it had ("" for none) and the profile assigned (nil when clearing), read so that
	// it cannot be replaced before the change commits. An unknown machine or profile gives
	// NOT_FOUND.
	AssignProfile(ctx context.Context, machine, profile string) (string, *Profile, error)
}

// Store runs changes to profiles and reads them.
type Store interface {
	// Change runs fn in one transaction that holds the machine's lock (none for "") and
	// writes the audit event of the mutation in progress.
	Change(ctx context.Context, machine string, fn func(Tx) error) error
	// Profile returns the profile called name, or nil.
	Profile(ctx context.Context, name string) (*Profile, error)
	// Profiles returns every profile, ordered by name.
	Profiles(ctx context.Context) ([]Profile, error)
}

// Service declares, removes and assigns hardware profiles: each an audited change.
type Service struct {
	Store Store
	Now   func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Declared is a profile as declared, with the one it replaced.
type Declared struct {
	Profile  Profile
	Previous *Profile
}

// Declare declares a profile or replaces the one of the same name. Machines it is
// assigned to are compared with the new minimums at their next admission check.
func (s *Service) Declare(ctx context.Context, actor string, d Declaration) (*Declared, error) {
	p, err := d.Profile()
	if err != nil {
		return nil, err
	}
	p.SetBy, p.SetAt = actor, s.now().UTC()
	out := &Declared{}
	err = s.Store.Change(ctx, "", func(tx Tx) error {
		prev, err := tx.PutProfile(ctx, p)
		if err != nil {
			return err
		}
		if err := plan.Read(ctx, "hardware profile "+p.Name+" now", prev.Fact()); err != nil {
			return err
		}
		out.Previous = prev
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("architecture", p.Architecture)
			if prev != nil {
				a.Detail("replaced", prev.Wants())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Read back after the commit, with the machines it is assigned to.
	got, err := s.Store.Profile(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	out.Profile = p
	if got != nil {
		out.Profile = *got
	}
	return out, nil
}

// Remove removes a profile. A profile still assigned to a machine is refused: assign
// those machines another profile, or clear theirs, first.
func (s *Service) Remove(ctx context.Context, name string) (*Profile, error) {
	if err := ValidateName("profile", name); err != nil {
		return nil, err
	}
	var removed *Profile
	err := s.Store.Change(ctx, "", func(tx Tx) error {
		p, err := tx.DeleteProfile(ctx, name)
		if err != nil {
			return err
		}
		if p == nil {
			return apperr.New(apperr.NotFound, "no hardware profile named %q: list them with the hardwareProfiles query", name)
		}
		if err := plan.Read(ctx, "hardware profile "+name, p.Fact()); err != nil {
			return err
		}
		removed = p
		return nil
	})
	return removed, err
}

// Assign assigns a profile to a registered machine, replacing its profile if it had one;
// admission compares the machine with it from now on. It returns the profile the machine
// had ("" for none).
func (s *Service) Assign(ctx context.Context, machine, profile string) (string, error) {
	if err := machines.ValidateName(machine); err != nil {
		return "", fieldRenamed(err, "machine")
	}
	if err := ValidateName("profile", profile); err != nil {
		return "", err
	}
	return s.assign(ctx, machine, profile)
}

// Clear removes a machine's profile, so admission compares it with none. It returns the
// profile the machine had ("" for none).
func (s *Service) Clear(ctx context.Context, machine string) (string, error) {
	if err := machines.ValidateName(machine); err != nil {
		return "", fieldRenamed(err, "machine")
	}
	return s.assign(ctx, machine, "")
}

func (s *Service) assign(ctx context.Context, machine, profile string) (string, error) {
	var previous string
	err := s.Store.Change(ctx, machine, func(tx Tx) error {
		prev, assigned, err := tx.AssignProfile(ctx, machine, profile)
		if err != nil {
			return err
		}
		if err := plan.Read(ctx, "hardware profile of "+machine+" now", orNone(prev)); err != nil {
			return err
		}
		if profile != "" {
			// What admission will compare the machine with: a profile replaced meanwhile
			// is not the one the administrator approved.
			if err := plan.Read(ctx, "hardware profile "+profile, assigned.Fact()); err != nil {
				return err
			}
		}
		previous = prev
		if a := audit.ActionFrom(ctx); a != nil {
			var was any // null: the machine had no profile
			if prev != "" {
				was = prev
			}
			a.Detail("previousProfile", was)
		}
		return nil
	})
	return previous, err
}

// Profile returns the profile called name, or nil.
func (s *Service) Profile(ctx context.Context, name string) (*Profile, error) {
	if err := ValidateName("name", name); err != nil {
		return nil, err
	}
	return s.Store.Profile(ctx, name)
}

// Profiles returns every profile, ordered by name.
func (s *Service) Profiles(ctx context.Context) ([]Profile, error) {
	return s.Store.Profiles(ctx)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// fieldRenamed points an input error at the field that carried the value.
func fieldRenamed(err error, field string) error {
	if e, ok := apperr.As(err); ok && e.Code == apperr.InvalidInput {
		c := *e
		c.Field = field
		return &c
	}
	return err
}
