package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Audited runs fn holding the machine's lock and, when fn succeeds, writes the audit
// event of the mutation in progress, for steps whose change happens outside the database
// (in Incus or MAAS).
func (s *Store) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return s.change(ctx, machine, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
}

// membershipSteps are the audited actions that change whether a member counts as admitted.
var membershipSteps = []string{"approveEnrolment", "installOperatingSystem", "admitMember", "removeMember"}

// AdmittedMachines returns the machines whose latest successful membership step is an
// admission: one query, whatever the number of machines.
func (s *Store) AdmittedMachines(ctx context.Context) (map[string]bool, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT DISTINCT ON (machine) machine, action FROM audit_events
		WHERE outcome = 'SUCCEEDED' AND machine IS NOT NULL AND action = ANY($1)
		ORDER BY machine, id DESC`, membershipSteps)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var machine, action string
		if err := rows.Scan(&machine, &action); err != nil {
			return nil, dbError(err)
		}
		if action == "admitMember" {
			out[machine] = true
		}
	}
	return out, dbError(rows.Err())
}

// AdmissionRecorded reports whether machine's latest successful membership step is an
// admission.
func (s *Store) AdmissionRecorded(ctx context.Context, machine string) (bool, error) {
	var action string
	err := s.q(ctx).QueryRow(ctx, `SELECT action FROM audit_events
		WHERE outcome = 'SUCCEEDED' AND machine = $1 AND action = ANY($2)
		ORDER BY id DESC LIMIT 1`, machine, membershipSteps).Scan(&action)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, dbError(err)
	}
	return action == "admitMember", nil
}
