-- Fence mappings: the MAAS machine that powers each Incus member, and the hardware UUID
-- MAAS must report for it before apelora-worker reads or powers anything.
CREATE TABLE fence_mappings (
    member         text PRIMARY KEY CHECK (member ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$'),
    maas_system_id text NOT NULL UNIQUE CHECK (maas_system_id ~ '^[a-z0-9]{4,16}$'),
    hardware_uuid  text NOT NULL UNIQUE CHECK (hardware_uuid ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
    set_by         text NOT NULL,
    set_at         timestamptz NOT NULL
);

-- What the fence worker observed of each member, so that a restart (of the worker or of
-- PostgreSQL) neither forgets an outage nor invents one.
CREATE TABLE fence_member_tracking (
    member             text PRIMARY KEY,
    first_seen_offline timestamptz,
    last_seen_online   timestamptz,
    last_observed      timestamptz NOT NULL
);

-- Every fence decision and step. Never updated or deleted.
CREATE TABLE fence_events (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL,
    member  text,
    kind    text NOT NULL CHECK (kind IN ('LEADING', 'OFFLINE', 'BACK_ONLINE', 'ELIGIBLE', 'REFUSED', 'REQUESTED', 'CONFIRMED', 'NOT_CONFIRMED')),
    reason  text CHECK (reason IN ('NOT_MAPPED', 'TOO_MANY_OFFLINE', 'COOLDOWN', 'UUID_MISMATCH', 'MAAS_MACHINE_NOT_FOUND',
                                   'MAAS_UNAVAILABLE', 'POWER_NOT_QUERYABLE', 'POWER_OFF_NOT_SENT', 'POWER_OFF_REFUSED', 'POWER_NOT_OFF')),
    message text NOT NULL DEFAULT '',
    worker  text NOT NULL,
    details jsonb NOT NULL DEFAULT '{}',
    CHECK ((member IS NULL) = (kind = 'LEADING')),
    CHECK ((reason IS NOT NULL) = (kind IN ('REFUSED', 'NOT_CONFIRMED')))
);
CREATE INDEX fence_events_member ON fence_events (member, id);

-- Every API replica pushes new fence events to its subscribers: tell them at commit.
CREATE FUNCTION fence_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('fence_events', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER fence_events_notify AFTER INSERT ON fence_events
    FOR EACH ROW EXECUTE FUNCTION fence_events_notify();

CREATE FUNCTION fence_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'fence events are append-only';
END;
$$;
CREATE TRIGGER fence_events_append_only BEFORE UPDATE OR DELETE ON fence_events
    FOR EACH ROW EXECUTE FUNCTION fence_events_append_only();

-- The last readiness drill of each mapped member (UUID check and a live power read, no
-- action). Forgotten when its mapping changes.
CREATE TABLE fence_drills (
    member         text PRIMARY KEY REFERENCES fence_mappings (member) ON DELETE CASCADE,
    at             timestamptz NOT NULL,
    maas_system_id text NOT NULL,
    hardware_uuid  text NOT NULL,
    ok             boolean NOT NULL,
    power_state    text,
    problem        text NOT NULL DEFAULT '',
    worker         text NOT NULL
);

-- The leading fence worker's last round (one row).
CREATE TABLE fence_worker (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    worker        text NOT NULL,
    leader_since  timestamptz NOT NULL,
    last_round_at timestamptz NOT NULL,
    settings      jsonb NOT NULL
);
