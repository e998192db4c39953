package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/leader"
)

// Rolling is the store as package rolling sees it.
func (s *Store) Rolling() *RollingStore { return &RollingStore{s} }

// RollingStore keeps rolling reboots (rolling_operations: one row per task; its step
// columns hold the stage).
type RollingStore struct{ s *Store }

var _ rolling.Store = (*RollingStore)(nil)

// Audited is the store's audited change.
func (r *RollingStore) Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error {
	return r.s.Audited(ctx, machine, fn)
}

// RecordAudit writes an audit event on its own (a driver's stage that failed outside a change).
func (r *RollingStore) RecordAudit(ctx context.Context, e audit.Event) error {
	return r.s.RecordAudit(ctx, e)
}

const rollingColumns = `id, members, position, step, step_since, clock_timestamp() - step_since, state, reason, started_by, request_id, started_at, finished_at, cluster_id`

func scanRolling(rows pgx.Rows, err error) ([]rolling.Task, error) {
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []rolling.Task
	for rows.Next() {
		var t rolling.Task
		var stage, state string
		var finished *time.Time
		if err := rows.Scan(&t.ID, &t.Members, &t.Position, &stage, &t.StageSince, &t.StageFor, &state, &t.Reason, &t.StartedBy, &t.RequestID, &t.StartedAt, &finished, &t.Cluster); err != nil {
			return nil, dbError(err)
		}
		t.Stage, t.State = rolling.Stage(stage), rolling.State(state)
		if finished != nil {
			t.FinishedAt = *finished
		}
		out = append(out, t)
	}
	return out, dbError(rows.Err())
}

func (r *RollingStore) one(ctx context.Context, where string, args ...any) (*rolling.Task, error) {
	ts, err := scanRolling(r.s.q(ctx).Query(ctx, `SELECT `+rollingColumns+` FROM rolling_operations `+where+` ORDER BY id DESC LIMIT 1`, args...))
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	return &ts[0], nil
}

// Active is the cluster's running or paused task, nil for none.
func (r *RollingStore) Active(ctx context.Context, cluster int64) (*rolling.Task, error) {
	return r.one(ctx, `WHERE finished_at IS NULL AND cluster_id = $1`, cluster)
}

// Unfinished lists every running or paused task (one per cluster at most), by id.
func (r *RollingStore) Unfinished(ctx context.Context) ([]rolling.Task, error) {
	return scanRolling(r.s.q(ctx).Query(ctx, `SELECT `+rollingColumns+` FROM rolling_operations WHERE finished_at IS NULL ORDER BY id`))
}

// Task reads one by id.
func (r *RollingStore) Task(ctx context.Context, id int64) (*rolling.Task, error) {
	return r.one(ctx, `WHERE id = $1`, id)
}

// Latest is the newest task of the cluster (0: of any).
func (r *RollingStore) Latest(ctx context.Context, cluster int64) (*rolling.Task, error) {
	if cluster == 0 {
		return r.one(ctx, ``)
	}
	return r.one(ctx, `WHERE cluster_id = $1`, cluster)
}

// Insert records a new task in the change in progress; in a dry run it is a plan
// step and returns 0.
func (r *RollingStore) Insert(ctx context.Context, t rolling.Task) (int64, error) {
	tx, err := r.s.inChange(ctx)
	if err != nil {
		return 0, err
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO rolling_operations (members, started_by, request_id, cluster_id) VALUES ($1, $2, $3, nullif($4, 0)) RETURNING id`,
		t.Members, t.StartedBy, t.RequestID, t.Cluster).Scan(&id)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil // planned: no row
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		return 0, apperr.New(apperr.FailedPrecondition, "another rolling reboot was started in this cluster at the same time: one rolling reboot per cluster at a time; see rollingReboot(cluster: …)")
	}
	return id, dbError(err)
}

// SetState moves the task from one of from to to, finishing it when to is final.
func (r *RollingStore) SetState(ctx context.Context, id int64, from []rolling.State, to rolling.State, reason string) (bool, error) {
	states := make([]string, len(from))
	for i, s := range from {
		states[i] = string(s)
	}
	final := to != rolling.StateRunning && to != rolling.StatePaused
	tag, err := r.s.q(ctx).Exec(ctx, `UPDATE rolling_operations SET state = $2, reason = $3,
		finished_at = CASE WHEN $4 THEN clock_timestamp() END
		WHERE id = $1 AND state = ANY($5)`, id, string(to), reason, final, states)
	if err != nil {
		return false, dbError(err)
	}
	return tag.RowsAffected() == 1, nil
}

// Advance moves an unfinished task to position and stage (column step). A paused one still
// records the stage just taken; a finished (cancelled) one does not move.
func (r *RollingStore) Advance(ctx context.Context, id int64, position int, stage rolling.Stage) (bool, error) {
	tag, err := r.s.q(ctx).Exec(ctx, `UPDATE rolling_operations SET position = $2, step = $3, step_since = clock_timestamp()
		WHERE id = $1 AND finished_at IS NULL`, id, position, string(stage))
	if err != nil {
		return false, dbError(err)
	}
	return tag.RowsAffected() == 1, nil
}

// Mappings are the cluster's fence mappings, by member: never another cluster's member of
// the same name.
func (r *RollingStore) Mappings(ctx context.Context, cluster int64) (map[string]fencing.Mapping, error) {
	return clusterMappings(ctx, r.s.q(ctx), cluster)
}

// Record reads a machine record (nil for none): its cluster names a member's.
func (r *RollingStore) Record(ctx context.Context, name string) (*machines.Record, error) {
	return r.s.Machines().Record(ctx, name)
}

// RollingLeadership hands out the rolling reboot driver's lease (role "rolling", see
// lease.go), apart from the fence worker's: any worker holds the power key, and the two
// leaders need not be the same process. A standby keeps its connection between attempts;
// TryLead is not safe for concurrent use.
func (s *Store) RollingLeadership(holder string, length time.Duration) rolling.Leadership {
	return &rollingLeadership{candidate{s: s, role: roleRolling, holder: holder, ttl: length}}
}

type rollingLeadership struct{ candidate }

func (l *rollingLeadership) TryLead(ctx context.Context) (leader.Lease, error) {
	lease, err := l.take(ctx)
	if err != nil || lease == nil {
		return nil, err
	}
	return lease, nil
}
