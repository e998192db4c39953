package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
)

// MemberOperationChannel is the NOTIFY channel of member_operation_events.
const MemberOperationChannel = "member_operation_events"

// memberEventsLock serialises the inserts of member_operation_events from before the id
// is drawn to the commit (an evacuation's change and the followers of every replica all
// write them), so ids become visible in id order, as the feed and the replay need.
const memberEventsLock = 0x4d4f50

// Maintenance is the store as package maintenance sees it.
func (s *Store) Maintenance() *MaintenanceStore { return &MaintenanceStore{s} }

// MaintenanceStore records evacuations and restores (tasks, member_operations) and their
// progress.
type MaintenanceStore struct{ s *Store }

// Audited is the store's audited change.
func (m *MaintenanceStore) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return m.s.Audited(ctx, machine, fn)
}

// Record reads a machine record.
func (m *MaintenanceStore) Record(ctx context.Context, name string) (*machines.Record, error) {
	return m.s.Machines().Record(ctx, name)
}

// FenceInFlight reports whether the latest power-off request of the cluster's member has
// no outcome yet.
func (m *MaintenanceStore) FenceInFlight(ctx context.Context, cluster int64, member string) (bool, error) {
	var kind string
	err := m.s.q(ctx).QueryRow(ctx, `SELECT kind FROM fence_events WHERE cluster_id = $1 AND member = $2 AND kind IN ('REQUESTED', 'CONFIRMED', 'NOT_CONFIRMED')
		ORDER BY id DESC LIMIT 1`, cluster, member).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbError(err)
	}
	return kind == "REQUESTED", nil
}

const memberOpColumns = `id, cluster_id, machine, action, mode, incus_operation, started_by, request_id, started_at, instances, finished_at, coalesce(outcome, ''), message`

func scanMemberOps(rows pgx.Rows, err error) ([]maintenance.Task, error) {
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []maintenance.Task
	for rows.Next() {
		var o maintenance.Task
		var finished *time.Time
		var outcome string
		if err := rows.Scan(&o.ID, &o.Cluster, &o.Machine, &o.Action, &o.Mode, &o.IncusOperation, &o.StartedBy, &o.RequestID, &o.StartedAt,
			&o.Instances, &finished, &outcome, &o.Message); err != nil {
			return nil, dbError(err)
		}
		if finished != nil {
			o.FinishedAt = *finished
		}
		o.Outcome = maintenance.Kind(outcome)
		out = append(out, o)
	}
	return out, dbError(rows.Err())
}

// RunningTask is the task of the cluster's member not seen to end, nil for none.
func (m *MaintenanceStore) RunningTask(ctx context.Context, cluster int64, member string) (*maintenance.Task, error) {
	ts, err := scanMemberOps(m.s.q(ctx).Query(ctx, `SELECT `+memberOpColumns+` FROM member_operations
		WHERE cluster_id = $1 AND machine = $2 AND finished_at IS NULL ORDER BY id DESC LIMIT 1`, cluster, member))
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	return &ts[0], nil
}

// Tasks lists the machine's tasks, newest first.
func (m *MaintenanceStore) Tasks(ctx context.Context, machine string, limit int) ([]maintenance.Task, error) {
	return scanMemberOps(m.s.q(ctx).Query(ctx, `SELECT `+memberOpColumns+` FROM member_operations
		WHERE machine = $1 ORDER BY id DESC LIMIT $2`, machine, limit))
}

// ClusterTasks lists the tasks of the cluster's member, newest first (a rolling reboot's:
// member names are unique within a cluster only).
func (m *MaintenanceStore) ClusterTasks(ctx context.Context, cluster int64, member string, limit int) ([]maintenance.Task, error) {
	return scanMemberOps(m.s.q(ctx).Query(ctx, `SELECT `+memberOpColumns+` FROM member_operations
		WHERE cluster_id = $1 AND machine = $2 ORDER BY id DESC LIMIT $3`, cluster, member, limit))
}

// Running lists every task not seen to end, oldest first.
func (m *MaintenanceStore) Running(ctx context.Context) ([]maintenance.Task, error) {
	return scanMemberOps(m.s.pool.Query(ctx, `SELECT `+memberOpColumns+` FROM member_operations
		WHERE finished_at IS NULL ORDER BY id`))
}

// StartTask records t and its STARTED event in the change in progress (the Incus
// operation id is kept in the same transaction as the audit event of the request), and
// returns the task as recorded: its id, start time and message from the row.
func (m *MaintenanceStore) StartTask(ctx context.Context, t maintenance.Task) (*maintenance.Task, error) {
	tx, err := m.s.inChange(ctx)
	if err != nil {
		return nil, err
	}
	instances := t.Instances
	if instances == nil {
		instances = []maintenance.Affected{}
	}
	if err := tx.QueryRow(ctx, `INSERT INTO member_operations (machine, action, mode, incus_operation, started_by, request_id, instances, cluster_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, 0)) RETURNING id, started_at, message, cluster_id`,
		t.Machine, t.Action, t.Mode, t.IncusOperation, t.StartedBy, t.RequestID, instances, t.Cluster).Scan(&t.ID, &t.StartedAt, &t.Message, &t.Cluster); err != nil {
		return nil, dbError(err)
	}
	t.Instances = instances
	msg := t.Action + " of " + t.Machine + " started (Incus operation " + t.IncusOperation + ")"
	if err := insertMemberEvent(ctx, tx, t, maintenance.KindStarted, msg); err != nil {
		return nil, err
	}
	return &t, nil
}

// RecordFinished records t, carried out by Incus but never recorded as started (the
// reconciler), as finished with outcome, with its STARTED and final events, in the change
// in progress.
func (m *MaintenanceStore) RecordFinished(ctx context.Context, t maintenance.Task, outcome maintenance.Kind, message string) (int64, error) {
	tx, err := m.s.inChange(ctx)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO member_operations (machine, action, mode, incus_operation, started_by, request_id, finished_at, outcome, message, cluster_id)
		VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp(), $7, $8, nullif($9, 0)) RETURNING id`,
		t.Machine, t.Action, t.Mode, t.IncusOperation, t.StartedBy, t.RequestID, string(outcome), message, t.Cluster).Scan(&id); err != nil {
		return 0, dbError(err)
	}
	t.ID = id
	if err := insertMemberEvent(ctx, tx, t, maintenance.KindStarted, t.Action+" of "+t.Machine+" started (its start was not recorded)"); err != nil {
		return 0, err
	}
	return id, insertMemberEvent(ctx, tx, t, outcome, message)
}

func insertMemberEvent(ctx context.Context, q querier, t maintenance.Task, kind maintenance.Kind, message string) error {
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, memberEventsLock); err != nil {
		return dbError(err)
	}
	_, err := q.Exec(ctx, `INSERT INTO member_operation_events (operation_id, machine, kind, message) VALUES ($1, $2, $3, $4)`,
		t.ID, t.Machine, string(kind), message)
	return dbError(err)
}

// Progress appends a PROGRESS event unless the task's latest event says the same.
func (m *MaintenanceStore) Progress(ctx context.Context, t maintenance.Task, message string) error {
	return pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, memberEventsLock); err != nil {
			return dbError(err)
		}
		var last string
		err := tx.QueryRow(ctx, `SELECT message FROM member_operation_events WHERE operation_id = $1 ORDER BY id DESC LIMIT 1`, t.ID).Scan(&last)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return dbError(err)
		}
		if last == message {
			return nil
		}
		return insertMemberEvent(ctx, tx, t, maintenance.KindProgress, message)
	})
}

// Finish ends a running task: its outcome, a PROGRESS event per line, the final event. A
// task already finished (by another replica) is left as it is.
func (m *MaintenanceStore) Finish(ctx context.Context, t maintenance.Task, outcome maintenance.Kind, message string, lines []string) error {
	return pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, memberEventsLock); err != nil {
			return dbError(err)
		}
		tag, err := tx.Exec(ctx, `UPDATE member_operations SET finished_at = clock_timestamp(), outcome = $2, message = $3
			WHERE id = $1 AND finished_at IS NULL`, t.ID, string(outcome), message)
		if err != nil {
			return dbError(err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		for _, l := range lines {
			if err := insertMemberEvent(ctx, tx, t, maintenance.KindProgress, l); err != nil {
				return err
			}
		}
		return insertMemberEvent(ctx, tx, t, outcome, message)
	})
}

// EventsAfter lists the events of machine ("" for all) of the cluster (0 for any) after
// the id, in id order.
func (m *MaintenanceStore) EventsAfter(ctx context.Context, cluster int64, machine string, after int64, limit int) ([]maintenance.Event, error) {
	rows, err := m.s.pool.Query(ctx, `SELECT e.id, e.operation_id, coalesce(o.cluster_id, 0), e.machine, o.action, e.at, e.kind, e.message
		FROM member_operation_events e JOIN member_operations o ON o.id = e.operation_id
		WHERE e.id > $1 AND ($2 = '' OR e.machine = $2) AND ($4 = 0 OR o.cluster_id = $4) ORDER BY e.id LIMIT $3`, after, machine, limit, cluster)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []maintenance.Event
	for rows.Next() {
		var e maintenance.Event
		var kind string
		if err := rows.Scan(&e.ID, &e.Task, &e.Cluster, &e.Machine, &e.Action, &e.At, &kind, &e.Message); err != nil {
			return nil, dbError(err)
		}
		e.Kind = maintenance.Kind(kind)
		out = append(out, e)
	}
	return out, dbError(rows.Err())
}

// MemberOperationFeed publishes maintenance task events as they are recorded, on every
// replica, keyed by machine.
type MemberOperationFeed = rowFeed[maintenance.Event]

// NewMemberOperationFeed returns a feed; call Run with a listener on MemberOperationChannel.
func (s *Store) NewMemberOperationFeed() *MemberOperationFeed {
	m := s.Maintenance()
	f := newRowFeed(s, MemberOperationChannel, "member operation event",
		func(e maintenance.Event) int64 { return e.ID },
		func(e maintenance.Event) string { return e.Machine })
	f.last = func(ctx context.Context) (int64, error) { return s.lastID(ctx, "member_operation_events") }
	f.after = func(ctx context.Context, after int64, limit int) ([]maintenance.Event, error) {
		return m.EventsAfter(ctx, 0, "", after, limit)
	}
	return f
}
