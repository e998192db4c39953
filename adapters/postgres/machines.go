package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Machines is the machine-record view of the store.
func (s *Store) Machines() MachineStore { return machineStore{s} }

// MachineStore is machines.Store plus the look-up by MAAS system id.
type MachineStore interface {
	machines.Store
	RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error)
}

type machineStore struct{ s *Store }

type machineTx struct{ tx pgx.Tx }

func (m machineStore) Change(ctx context.Context, machine string, fn func(machines.Tx) error) error {
	return m.s.change(ctx, machine, func(_ context.Context, tx pgx.Tx) error { return fn(machineTx{tx}) })
}

const recordColumns = `name, provisioner, description, coalesce(maas_system_id, ''), coalesce(hardware_uuid, ''), registered_at, registered_by, coalesce(hardware_profile, ''), cluster_id`

func scanRecord(row pgx.Row) (machines.Record, error) {
	var r machines.Record
	err := row.Scan(&r.Name, &r.Provisioner, &r.Description, &r.MAASSystemID, &r.HardwareUUID, &r.RegisteredAt, &r.RegisteredBy, &r.HardwareProfile, &r.Cluster)
	return r, err
}

func (m machineStore) Record(ctx context.Context, name string) (*machines.Record, error) {
	r, err := scanRecord(m.s.q(ctx).QueryRow(ctx, `SELECT `+recordColumns+` FROM machine_records WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &r, nil
}

func (m machineStore) Records(ctx context.Context) ([]machines.Record, error) {
	rows, err := m.s.q(ctx).Query(ctx, `SELECT `+recordColumns+` FROM machine_records ORDER BY name`)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (machines.Record, error) { return scanRecord(row) })
	if err != nil {
		return nil, dbError(err)
	}
	return out, nil
}

func (t machineTx) InsertRecord(ctx context.Context, r machines.Record) error {
	// Asked first, so a dry run (whose INSERT is a call of the plan, not sent) is refused as the real
	// call is; the unique constraints still hold against a concurrent change.
	var nameTaken bool
	var other string
	err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM machine_records WHERE name = $1),
		coalesce((SELECT name FROM machine_records WHERE maas_system_id = nullif($2, '')), '')`, r.Name, r.MAASSystemID).Scan(&nameTaken, &other)
	switch {
	case err != nil:
		return dbError(err)
	case nameTaken:
		return recordNameTaken(r.Name)
	case other != "":
		return systemIDTaken(r.MAASSystemID, other)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO machine_records (name, provisioner, description, maas_system_id, hardware_uuid, registered_at, registered_by)
		VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), $6, $7)`,
		r.Name, r.Provisioner, r.Description, r.MAASSystemID, r.HardwareUUID, r.RegisteredAt, r.RegisteredBy)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		switch pgErr.ConstraintName {
		case "machine_records_pkey":
			return recordNameTaken(r.Name)
		case "machine_records_maas_system_id_key":
			var other string
			_ = t.tx.QueryRow(context.WithoutCancel(ctx), `SELECT name FROM machine_records WHERE maas_system_id = $1`, r.MAASSystemID).Scan(&other)
			return systemIDTaken(r.MAASSystemID, other)
		}
	}
	return dbError(err)
}

func recordNameTaken(name string) error {
	return &apperr.Error{Code: apperr.AlreadyExists, Field: "name", Message: fmt.Sprintf("a machine named %q is already registered: choose another name, or unregister the old record first", name)}
}

func systemIDTaken(systemID, other string) error {
	return &apperr.Error{Code: apperr.AlreadyExists, Field: "maasSystemId", Message: fmt.Sprintf("MAAS system id %q is already registered as machine %q", systemID, other)}
}

func (t machineTx) DeleteRecord(ctx context.Context, name string) (bool, error) {
	if planned(t.tx) {
		// In a dry run the DELETE is a call of the plan, not sent: answer whether it would delete the record.
		_, _ = t.tx.Exec(ctx, `DELETE FROM machine_records WHERE name = $1`, name)
		var found bool
		err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM machine_records WHERE name = $1)`, name).Scan(&found)
		return found, dbError(err)
	}
	tag, err := t.tx.Exec(ctx, `DELETE FROM machine_records WHERE name = $1`, name)
	if err != nil {
		return false, dbError(err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t machineTx) SetHardwareUUID(ctx context.Context, name, systemID, uuid string) (bool, error) {
	// Asked first (the change holds the machine's lock), so a dry run, whose UPDATE is a call
	// of the plan, not sent, answers as the real call would.
	var lacking bool
	err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM machine_records WHERE name = $1 AND maas_system_id = $2 AND hardware_uuid IS NULL)`,
		name, systemID).Scan(&lacking)
	if err != nil {
		return false, dbError(err)
	}
	// Sent whatever the answer (it changes nothing then), so a dry run always shows it.
	_, err = t.tx.Exec(ctx, `UPDATE machine_records SET hardware_uuid = $3 WHERE name = $1 AND maas_system_id = $2 AND hardware_uuid IS NULL`,
		name, systemID, uuid)
	if err != nil {
		return false, dbError(err)
	}
	return lacking, nil
}

// RecordBySystemID returns the machine record registered from MAAS with that system id,
// or nil.
func (m machineStore) RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error) {
	r, err := scanRecord(m.s.q(ctx).QueryRow(ctx, `SELECT `+recordColumns+` FROM machine_records WHERE maas_system_id = $1`, systemID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &r, nil
}
