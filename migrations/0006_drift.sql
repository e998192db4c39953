-- Drift: admitted members re-checked. What the watcher knows now (drift_checks,
-- drift_machines), every raise and clear (drift_events), and the watcher itself.
-- Drift is not an administrator's change, so none of it is in the audit trail.

-- Each check that failed when last evaluated on an admitted machine. raised_at is NULL while
-- the check is under its threshold (failing, not drift yet). The row goes when the check
-- passes again or the machine is no longer admitted.
CREATE TABLE drift_checks (
    machine       text NOT NULL,
    check_name    text NOT NULL,
    title         text NOT NULL,
    failing_since timestamptz NOT NULL,
    raised_at     timestamptz,
    evidence      text NOT NULL,
    last_checked  timestamptz NOT NULL,
    PRIMARY KEY (machine, check_name)
);
-- The fleet reads raised drift for every machine in one query.
CREATE INDEX drift_checks_raised ON drift_checks (machine, check_name) WHERE raised_at IS NOT NULL;

-- When the watcher last looked at each admitted machine.
CREATE TABLE drift_machines (
    machine      text PRIMARY KEY,
    last_checked timestamptz NOT NULL
);

-- Every raise and clear. Never updated or deleted.
CREATE TABLE drift_events (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL,
    machine    text NOT NULL,
    check_name text NOT NULL,
    title      text NOT NULL,
    change     text NOT NULL CHECK (change IN ('RAISED', 'CLEARED')),
    since      timestamptz NOT NULL,
    evidence   text NOT NULL
);
CREATE INDEX drift_events_machine ON drift_events (machine, id);

-- Every API replica pushes new drift events to its subscribers: tell them at commit. This
-- is also the fleet's signal that a machine's warnings changed.
CREATE FUNCTION drift_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drift_events', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER drift_events_notify AFTER INSERT ON drift_events
    FOR EACH ROW EXECUTE FUNCTION drift_events_notify();

CREATE FUNCTION drift_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'drift events are append-only';
END;
$$;
CREATE TRIGGER drift_events_append_only BEFORE UPDATE OR DELETE ON drift_events
    FOR EACH ROW EXECUTE FUNCTION drift_events_append_only();

-- The leading watcher's last round (one row).
CREATE TABLE drift_watcher (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    replica       text NOT NULL,
    leader_since  timestamptz NOT NULL,
    last_round_at timestamptz NOT NULL,
    machines      integer NOT NULL,
    problem       text NOT NULL DEFAULT '',
    settings      jsonb NOT NULL
);
