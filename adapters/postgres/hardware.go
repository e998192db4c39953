package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/internal/apperr"
)

// HardwareProfiles is the hardware-profile view of the store: profiles, and which machine
// records they are assigned to, changed in audited transactions.
func (s *Store) HardwareProfiles() hardware.Store { return profileStore{s} }

type profileStore struct{ s *Store }

type profileTx struct{ tx pgx.Tx }

var _ hardware.Store = profileStore{}

func (p profileStore) Change(ctx context.Context, machine string, fn func(hardware.Tx) error) error {
	return p.s.change(ctx, machine, func(_ context.Context, tx pgx.Tx) error { return fn(profileTx{tx}) })
}

const profileColumns = `name, description, architecture, min_cpu_cores, min_memory_mib, min_disks, min_disk_size_gb,
	min_nics, min_nic_speed_mbps, set_by, set_at`

// profileSelect reads profiles with the machines assigned to each, in one query.
const profileSelect = `SELECT ` + profileColumns + `,
	coalesce((SELECT array_agg(m.name ORDER BY m.name) FROM machine_records m WHERE m.hardware_profile = p.name), '{}')
	FROM hardware_profiles p`

func scanProfile(row pgx.Row, withMachines bool) (hardware.Profile, error) {
	var p hardware.Profile
	dest := []any{&p.Name, &p.Description, &p.Architecture, &p.MinCPUCores, &p.MinMemoryMiB, &p.MinDisks, &p.MinDiskSizeGB,
		&p.MinNICs, &p.MinNICSpeedMbps, &p.SetBy, &p.SetAt}
	if withMachines {
		dest = append(dest, &p.Machines)
	}
	err := row.Scan(dest...)
	return p, err
}

func (p profileStore) Profile(ctx context.Context, name string) (*hardware.Profile, error) {
	got, err := scanProfile(p.s.q(ctx).QueryRow(ctx, profileSelect+` WHERE p.name = $1`, name), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &got, nil
}

func (p profileStore) Profiles(ctx context.Context) ([]hardware.Profile, error) {
	rows, err := p.s.q(ctx).Query(ctx, profileSelect+` ORDER BY p.name`)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hardware.Profile, error) { return scanProfile(r, true) })
	if err != nil {
		return nil, dbError(err)
	}
	return out, nil
}

func (t profileTx) PutProfile(ctx context.Context, p hardware.Profile) (*hardware.Profile, error) {
	prev, err := scanProfile(t.tx.QueryRow(ctx, `SELECT `+profileColumns+` FROM hardware_profiles WHERE name = $1 FOR UPDATE`, p.Name), false)
	var had *hardware.Profile
	switch {
	case err == nil:
		had = &prev
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, dbError(err)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO hardware_profiles (`+profileColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, architecture = EXCLUDED.architecture,
			min_cpu_cores = EXCLUDED.min_cpu_cores, min_memory_mib = EXCLUDED.min_memory_mib, min_disks = EXCLUDED.min_disks,
			min_disk_size_gb = EXCLUDED.min_disk_size_gb, min_nics = EXCLUDED.min_nics, min_nic_speed_mbps = EXCLUDED.min_nic_speed_mbps,
			set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at`,
		p.Name, p.Description, p.Architecture, p.MinCPUCores, p.MinMemoryMiB, p.MinDisks, p.MinDiskSizeGB,
		p.MinNICs, p.MinNICSpeedMbps, p.SetBy, p.SetAt)
	if err != nil {
		return nil, dbError(err)
	}
	return had, nil
}

func (t profileTx) DeleteProfile(ctx context.Context, name string) (*hardware.Profile, error) {
	var assigned []string
	if err := t.tx.QueryRow(ctx, `SELECT coalesce(array_agg(name ORDER BY name), '{}') FROM machine_records WHERE hardware_profile = $1`, name).Scan(&assigned); err != nil {
		return nil, dbError(err)
	}
	if len(assigned) > 0 {
		return nil, &apperr.Error{Code: apperr.FailedPrecondition, Field: "profile", Message: fmt.Sprintf(
			"hardware profile %q is still assigned to %s: assign those machines another profile (assignHardwareProfile) or clear theirs (clearHardwareProfile) first",
			name, listNames(assigned)), Details: map[string]any{"machines": assigned}}
	}
	del := `DELETE FROM hardware_profiles WHERE name = $1 RETURNING ` + profileColumns
	if planned(t.tx) {
		// In a dry run the DELETE is a call of the plan, not sent: answer the profile it would delete.
		_, _ = t.tx.Exec(ctx, `DELETE FROM hardware_profiles WHERE name = $1`, name)
		del = `SELECT ` + profileColumns + ` FROM hardware_profiles WHERE name = $1`
	}
	p, err := scanProfile(t.tx.QueryRow(ctx, del, name), false)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case errors.As(err, &pgErr) && pgErr.Code == "23503":
		// Assigned by a change that committed after the check above.
		return nil, apperr.Wrap(err, apperr.Busy, "hardware profile %q was just assigned to a machine: list the profiles again and retry", name)
	case err != nil:
		return nil, dbError(err)
	}
	return &p, nil
}

func (t profileTx) AssignProfile(ctx context.Context, machine, profile string) (string, *hardware.Profile, error) {
	var prev string
	err := t.tx.QueryRow(ctx, `SELECT coalesce(hardware_profile, '') FROM machine_records WHERE name = $1 FOR UPDATE`, machine).Scan(&prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, &apperr.Error{Code: apperr.NotFound, Field: "machine", Message: fmt.Sprintf(
			"no machine record named %q: register it first (registerMachine), or list machines with the machines query", machine)}
	}
	if err != nil {
		return "", nil, dbError(err)
	}
	var assigned *hardware.Profile
	if profile != "" {
		// SHARE: a concurrent removal or replacement waits for this change (then finds it
		// assigned), so the profile read is the one assigned.
		p, err := scanProfile(t.tx.QueryRow(ctx, `SELECT `+profileColumns+` FROM hardware_profiles WHERE name = $1 FOR SHARE`, profile), false)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", nil, dbError(err)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil, &apperr.Error{Code: apperr.NotFound, Field: "profile", Message: fmt.Sprintf(
				"no hardware profile named %q: declare it first (setHardwareProfile), or list them with the hardwareProfiles query", profile)}
		}
		assigned = &p
	}
	if _, err := t.tx.Exec(ctx, `UPDATE machine_records SET hardware_profile = nullif($2, '') WHERE name = $1`, machine, profile); err != nil {
		return "", nil, dbError(err)
	}
	return prev, assigned, nil
}

// listNames names up to ten machines, so a message stays short.
func listNames(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}
