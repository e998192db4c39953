-- Rolling reboots through MAAS (startRollingReboot): each member in turn is evacuated,
-- power cycled, waited for, checked and restored. The row is the operation's whole state:
-- the worker that leads drives it from here, so a restart or a new leader carries on
-- where the last one stopped.
CREATE TABLE rolling_operations (
    id             bigserial PRIMARY KEY,
    members        text[] NOT NULL CHECK (cardinality(members) > 0),
    -- The member in progress (an index into members); cardinality(members) once done.
    position       int NOT NULL DEFAULT 0,
    step           text NOT NULL DEFAULT 'EVACUATE'
        CHECK (step IN ('EVACUATE', 'POWER_OFF', 'CONFIRM_OFF', 'POWER_ON', 'WAIT_ONLINE', 'RESTORE', 'DONE')),
    step_since     timestamptz NOT NULL DEFAULT clock_timestamp(),
    state          text NOT NULL DEFAULT 'RUNNING'
        CHECK (state IN ('RUNNING', 'PAUSED', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    -- Why it failed or was cancelled, in the administrator's words.
    reason         text NOT NULL DEFAULT '',
    started_by     text NOT NULL,
    request_id     text NOT NULL DEFAULT '',
    started_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at    timestamptz,
    CHECK ((finished_at IS NULL) = (state IN ('RUNNING', 'PAUSED')))
);
-- One rolling operation per cluster at a time: a second start is refused by this index
-- even when two API replicas race.
CREATE UNIQUE INDEX rolling_operations_one_active ON rolling_operations ((true)) WHERE finished_at IS NULL;
