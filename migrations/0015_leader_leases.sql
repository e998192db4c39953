-- Leaders (the fence worker, the drift watcher, the rolling reboot driver, each audit export sink's exporter) hold a lease instead of a session advisory
-- lock: a leader whose connection died server-side, or that was paused, cannot tell that
-- its lock is gone, and another would lead beside it. A lease ends at expires_at, which
-- every process reads on the database's clock, and epoch grows at every take-over; each
-- write a leader makes checks its epoch in the same transaction (adapters/postgres/lease.go).
-- Rows are never deleted, so an epoch is never handed out twice.
CREATE TABLE leader_leases (
    role       text PRIMARY KEY CHECK (role IN ('fence', 'drift', 'rolling') OR role LIKE 'audit export %'),
    epoch      bigint NOT NULL CHECK (epoch > 0),
    holder     text NOT NULL,
    taken_at   timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
