package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Admissions are facts of their own (table admissions, migration 0008), written in the
// change that admits, removes or re-enrols the member: never read back from the audit
// trail.

// OpenAdmission returns the machine's open admission, nil for none.
func (s *Store) OpenAdmission(ctx context.Context, machine string) (*lifecycle.Admission, error) {
	var a lifecycle.Admission
	err := s.q(ctx).QueryRow(ctx, `SELECT id, carried_over FROM admissions WHERE machine = $1 AND ended_at IS NULL`,
		machine).Scan(&a.ID, &a.CarriedOver)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &a, nil
}

// OpenAdmissions returns every machine's open admission: the fleet's one query.
func (s *Store) OpenAdmissions(ctx context.Context) (map[string]lifecycle.Admission, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT machine, id, carried_over FROM admissions WHERE ended_at IS NULL`)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[string]lifecycle.Admission{}
	for rows.Next() {
		var machine string
		var a lifecycle.Admission
		if err := rows.Scan(&machine, &a.ID, &a.CarriedOver); err != nil {
			return nil, dbError(err)
		}
		out[machine] = a
	}
	return out, dbError(rows.Err())
}

// inChange returns the transaction of the change in progress, or an error for a write
// attempted outside one.
func (s *Store) inChange(ctx context.Context) (pgx.Tx, error) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	if !ok {
		return nil, apperr.New(apperr.Internal, "an admission was written outside an audited change")
	}
	return tx, nil
}

// NextAdmissionID draws the id of an admission about to be made, 0 in a dry run (whose
// transaction is READ ONLY: a plan advances no sequence). A drawn id that is never used
// (the step failed) is a gap, as a rolled-back insert's would be.
func (s *Store) NextAdmissionID(ctx context.Context) (int64, error) {
	if plan.Active(ctx) {
		return 0, nil
	}
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('admissions', 'id'))`).Scan(&id)
	return id, dbError(err)
}

// RecordAdmission records a in the change in progress, ending the machine's open
// admission first, and returns its id (a.ID, or a new one). Once the change's audit event
// is inserted, its id is kept with the admission, in the same transaction.
func (s *Store) RecordAdmission(ctx context.Context, a admission.Admitted) (int64, error) {
	tx, err := s.inChange(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.EndAdmission(ctx, a.Machine); err != nil {
		return 0, err
	}
	roles, groups := a.Roles, a.Groups
	if roles == nil {
		roles = []string{}
	}
	if groups == nil {
		groups = []string{}
	}
	var id int64
	// The admission names its cluster (the member's): never the trigger's fallback.
	if a.Cluster == 0 {
		return 0, apperr.New(apperr.Internal, "the admission of %s names no Incus cluster", a.Machine)
	}
	err = tx.QueryRow(ctx, `INSERT INTO admissions (id, machine, member, roles, groups, failure_domain, admitted_by, request_id, cluster_id)
		VALUES (coalesce(nullif($8::bigint, 0), nextval(pg_get_serial_sequence('admissions', 'id'))), $1, $2, $3, $4, $5, $6, $7, $9) RETURNING id`,
		a.Machine, a.Member, roles, groups, a.FailureDomain, a.By, a.RequestID, a.ID, a.Cluster).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) && planned(tx) {
		return 0, nil // a dry run's INSERT is a step, never sent: no admission, no id
	}
	if err != nil {
		return 0, dbError(err)
	}
	afterAudit(ctx, func(ctx context.Context, tx pgx.Tx, eventID int64) error {
		_, err := tx.Exec(ctx, `UPDATE admissions SET audit_event_id = $2 WHERE id = $1`, id, eventID)
		return err
	})
	return id, nil
}

// EndAdmission ends the machine's open admission, if any, in the change in progress, with
// who ended it and by which step.
func (s *Store) EndAdmission(ctx context.Context, machine string) error {
	tx, err := s.inChange(ctx)
	if err != nil {
		return err
	}
	// Only an open admission is written to: a step that ends none writes nothing (and a
	// dry run's plan shows no database step for it).
	open, err := s.OpenAdmission(ctx, machine)
	if err != nil || open == nil {
		return err
	}
	var by, step, request string
	if act := audit.ActionFrom(ctx); act != nil {
		by, step, request = act.Actor, act.Name, act.RequestID
	}
	_, err = tx.Exec(ctx, `UPDATE admissions SET ended_at = now(), ended_by = $2, ended_action = $3, ended_request = $4
		WHERE id = $1`, open.ID, by, step, request)
	return dbError(err)
}

// SetRecordCluster has the machine's record name the Incus cluster it is enrolled in, in
// the change in progress (approveEnrolment, installOperatingSystem).
func (s *Store) SetRecordCluster(ctx context.Context, machine string, cluster int64) error {
	tx, err := s.inChange(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE machine_records SET cluster_id = $2 WHERE name = $1 AND cluster_id IS DISTINCT FROM $2`, machine, cluster)
	return dbError(err)
}

// CarriedOver lists the open admissions carried over from the audit trail (migration
// 0008) whose member is not marked yet.
func (s *Store) CarriedOver(ctx context.Context) ([]admission.CarriedOver, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT machine, id, request_id FROM admissions
		WHERE carried_over AND ended_at IS NULL ORDER BY machine`)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (admission.CarriedOver, error) {
		var c admission.CarriedOver
		err := row.Scan(&c.Machine, &c.ID, &c.RequestID)
		return c, err
	})
	return out, dbError(err)
}
