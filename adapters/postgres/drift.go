package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/drift"
)

// DriftChannel is the NOTIFY channel the drift_events trigger writes to.
const DriftChannel = "drift_events"

// DriftStore reads drift for the API and the runner.
type DriftStore struct{ s *Store }

// Drift returns the drift store.
func (s *Store) Drift() *DriftStore { return &DriftStore{s} }

var (
	_ drift.Store      = (*DriftStore)(nil)
	_ drift.Admissions = (*DriftStore)(nil)
)

// Admitted returns the machines with an open admission, with the roles it recorded: one
// query, whatever the number of machines.
func (d *DriftStore) Admitted(ctx context.Context) ([]drift.Admission, error) {
	rows, err := d.s.pool.Query(ctx, `SELECT a.machine, a.admitted_at, a.roles,
		coalesce((SELECT o.action = 'evacuate' AND o.outcome IS DISTINCT FROM 'FAILED' FROM member_operations o
			WHERE o.machine = a.machine ORDER BY o.id DESC LIMIT 1), false)
		FROM admissions a WHERE a.ended_at IS NULL ORDER BY a.machine`)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []drift.Admission
	for rows.Next() {
		var a drift.Admission
		var roles []string
		if err := rows.Scan(&a.Machine, &a.At, &roles, &a.Maintenance); err != nil {
			return nil, dbError(err)
		}
		// NULL: carried over from an audit event that did not list them; nothing to compare.
		if roles != nil {
			a.Roles, a.RolesKnown = roles, true
		}
		out = append(out, a)
	}
	return out, dbError(rows.Err())
}

const driftStateColumns = `c.machine, c.check_name, c.title, c.failing_since, c.raised_at, c.evidence, c.last_checked`

func scanStates(rows pgx.Rows, err error) ([]drift.State, error) {
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (drift.State, error) {
		var s drift.State
		var raised *time.Time
		err := row.Scan(&s.Machine, &s.Check, &s.Title, &s.FailingSince, &raised, &s.Evidence, &s.LastChecked)
		if raised != nil {
			s.RaisedAt = *raised
		}
		return s, err
	})
	return out, dbError(err)
}

// Drifts returns the raised drift of one machine, or of every machine (machine ""),
// ordered by machine and check.
func (d *DriftStore) Drifts(ctx context.Context, machine string) ([]drift.State, error) {
	return scanStates(d.s.pool.Query(ctx, `SELECT `+driftStateColumns+` FROM drift_checks c
		WHERE c.raised_at IS NOT NULL AND ($1 = '' OR c.machine = $1) ORDER BY c.machine, c.check_name`, machine))
}

// ByMachine returns, for every machine the watcher looks at, when it last did and its
// raised drift: the fleet's one query.
func (d *DriftStore) ByMachine(ctx context.Context) (map[string]drift.Status, error) {
	rows, err := d.s.pool.Query(ctx, `SELECT m.machine, m.last_checked, coalesce(m.quiet, ''), c.check_name, c.title, c.failing_since, c.raised_at, c.evidence, c.last_checked
		FROM drift_machines m LEFT JOIN drift_checks c ON c.machine = m.machine AND c.raised_at IS NOT NULL
		ORDER BY m.machine, c.check_name`)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[string]drift.Status{}
	for rows.Next() {
		var machine, quiet string
		var checked time.Time
		var check, title, evidence *string
		var since, raised, last *time.Time
		if err := rows.Scan(&machine, &checked, &quiet, &check, &title, &since, &raised, &evidence, &last); err != nil {
			return nil, dbError(err)
		}
		st := out[machine]
		st.Checked, st.Quiet = checked, quiet
		if check != nil {
			st.Drift = append(st.Drift, drift.State{Machine: machine, Check: *check, Title: *title, FailingSince: *since,
				RaisedAt: *raised, Evidence: *evidence, LastChecked: *last})
		}
		out[machine] = st
	}
	return out, dbError(rows.Err())
}

const driftEventColumns = `id, at, machine, check_name, title, change, since, evidence`

func scanDriftEvent(row pgx.Row) (drift.Event, error) {
	var e drift.Event
	var change string
	err := row.Scan(&e.ID, &e.At, &e.Machine, &e.Check, &e.Title, &change, &e.Since, &e.Evidence)
	e.Change = drift.Change(change)
	return e, err
}

// EventsAfter returns up to limit events with an id above after, oldest first, of one
// machine or (machine "") of all.
func (d *DriftStore) EventsAfter(ctx context.Context, machine string, after int64, limit int) ([]drift.Event, error) {
	rows, err := d.s.pool.Query(ctx, `SELECT `+driftEventColumns+` FROM drift_events
		WHERE id > $1 AND ($2 = '' OR machine = $2) ORDER BY id LIMIT $3`, after, machine, limit)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (drift.Event, error) { return scanDriftEvent(row) })
	return out, dbError(err)
}

// Event returns one event, or nil.
func (d *DriftStore) Event(ctx context.Context, id int64) (*drift.Event, error) {
	e, err := scanDriftEvent(d.s.pool.QueryRow(ctx, `SELECT `+driftEventColumns+` FROM drift_events WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	return &e, nil
}

// Watcher returns the leading watcher's last round, or nil when none ever ran.
func (d *DriftStore) Watcher(ctx context.Context) (*drift.Watcher, error) {
	var w drift.Watcher
	var settings map[string]float64
	err := d.s.pool.QueryRow(ctx, `SELECT replica, leader_since, last_round_at, machines, problem, settings FROM drift_watcher`).
		Scan(&w.Replica, &w.LeaderSince, &w.LastRoundAt, &w.Machines, &w.Problem, &settings)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	w.Interval = time.Duration(settings["intervalSeconds"] * float64(time.Second))
	w.OfflineAfter = time.Duration(settings["offlineAfterSeconds"] * float64(time.Second))
	return &w, nil
}

// DriftFeed publishes drift events as they are recorded, on every replica, keyed by
// machine. Drift events have one writer at a time, the leading watcher, on its lock's
// connection, so ids become visible in id order, as the feed and driftChanges's replay
// need.
type DriftFeed = rowFeed[drift.Event]

// NewDriftFeed returns a feed; call Run with a listener on DriftChannel.
func (s *Store) NewDriftFeed() *DriftFeed {
	d := s.Drift()
	f := newRowFeed(s, DriftChannel, "drift event",
		func(e drift.Event) int64 { return e.ID },
		func(e drift.Event) string { return e.Machine })
	f.last = func(ctx context.Context) (int64, error) { return s.lastID(ctx, "drift_events") }
	f.after = func(ctx context.Context, after int64, limit int) ([]drift.Event, error) {
		return d.EventsAfter(ctx, "", after, limit)
	}
	return f
}

// DriftLeadership hands out the drift watcher's lease (role "drift", see lease.go), as
// FenceLeadership does the fence worker's. A standby keeps its connection between
// attempts; TryLead is not safe for concurrent use.
func (s *Store) DriftLeadership(holder string, length time.Duration) drift.Leadership {
	return &driftLeadership{candidate: candidate{s: s, role: roleDrift, holder: holder, ttl: length}}
}

type driftLeadership struct{ candidate }

func (l *driftLeadership) TryLead(ctx context.Context) (drift.Lease, error) {
	lease, err := l.take(ctx)
	if err != nil || lease == nil {
		return nil, err
	}
	return &driftLease{lease}, nil
}

// driftLease is the drift lease (role "drift") and what the watcher does under it; every
// write checks the lease's epoch, so a replica that lost the lead records nothing.
type driftLease struct {
	*leaderLease
}

func (d *driftLease) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel, err := d.use(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer cancel()
	var t time.Time
	err = d.conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, dbError(err)
}

func (d *driftLease) States(ctx context.Context) (map[string][]drift.State, error) {
	ctx, cancel, err := d.use(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	all, err := scanStates(d.conn.Query(ctx, `SELECT `+driftStateColumns+` FROM drift_checks c ORDER BY c.machine, c.check_name`))
	if err != nil {
		return nil, err
	}
	out := map[string][]drift.State{}
	for _, s := range all {
		out[s.Machine] = append(out[s.Machine], s)
	}
	// Machines looked at without a failing check are tracked too (to be forgotten).
	rows, err := d.conn.Query(ctx, `SELECT machine FROM drift_machines`)
	if err != nil {
		return nil, dbError(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbError(err)
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			out[n] = nil
		}
	}
	return out, nil
}

func (d *driftLease) Save(ctx context.Context, machine string, checked time.Time, quiet string, states []drift.State, events []drift.Event) ([]drift.Event, error) {
	var out []drift.Event
	err := d.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		out, err = saveDrift(ctx, tx, machine, checked, quiet, states, events)
		return err
	})
	return out, err
}

// saveDrift is Save's transaction, after the epoch check.
func saveDrift(ctx context.Context, tx pgx.Tx, machine string, checked time.Time, quiet string, states []drift.State, events []drift.Event) ([]drift.Event, error) {
	var err error
	keep := make([]string, len(states))
	for i, s := range states {
		keep[i] = s.Check
		if _, err := tx.Exec(ctx, `INSERT INTO drift_checks (machine, check_name, title, failing_since, raised_at, evidence, last_checked)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (machine, check_name) DO UPDATE SET title = EXCLUDED.title,
			failing_since = EXCLUDED.failing_since, raised_at = EXCLUDED.raised_at, evidence = EXCLUDED.evidence,
			last_checked = EXCLUDED.last_checked`,
			machine, s.Check, s.Title, s.FailingSince, nullTime(s.RaisedAt), s.Evidence, s.LastChecked); err != nil {
			return nil, dbError(err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM drift_checks WHERE machine = $1 AND NOT (check_name = ANY($2))`, machine, keep); err != nil {
		return nil, dbError(err)
	}
	if checked.IsZero() {
		_, err = tx.Exec(ctx, `DELETE FROM drift_machines WHERE machine = $1`, machine)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO drift_machines (machine, last_checked, quiet) VALUES ($1, $2, nullif($3, ''))
			ON CONFLICT (machine) DO UPDATE SET last_checked = EXCLUDED.last_checked, quiet = EXCLUDED.quiet`, machine, checked, quiet)
	}
	if err != nil {
		return nil, dbError(err)
	}
	out := make([]drift.Event, len(events))
	for i, e := range events {
		e.Machine = machine
		if err := tx.QueryRow(ctx, `INSERT INTO drift_events (at, machine, check_name, title, change, since, evidence)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			e.At, e.Machine, e.Check, e.Title, string(e.Change), e.Since, e.Evidence).Scan(&e.ID); err != nil {
			return nil, dbError(err)
		}
		out[i] = e
	}
	return out, nil
}

func (d *driftLease) Heartbeat(ctx context.Context, w drift.Watcher) error {
	settings := map[string]any{"intervalSeconds": w.Interval.Seconds(), "offlineAfterSeconds": w.OfflineAfter.Seconds()}
	return d.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO drift_watcher (singleton, replica, leader_since, last_round_at, machines, problem, settings)
		VALUES (true, $1, $2, $3, $4, $5, $6) ON CONFLICT (singleton) DO UPDATE SET replica = EXCLUDED.replica,
		leader_since = EXCLUDED.leader_since, last_round_at = EXCLUDED.last_round_at, machines = EXCLUDED.machines,
		problem = EXCLUDED.problem, settings = EXCLUDED.settings`,
			w.Replica, w.LeaderSince, w.LastRoundAt, w.Machines, w.Problem, settings)
		return dbError(err)
	})
}
