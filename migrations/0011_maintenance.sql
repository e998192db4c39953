-- Maintenance (evacuateMember, restoreMember, or Incus's own `incus cluster evacuate`).

-- The fence worker keeps whether a member was Evacuated when Incus last listed it other
-- than Offline: an evacuated member that stops answering is listed Offline, and it is
-- in maintenance, never powered off (reason MAINTENANCE).
ALTER TABLE fence_member_tracking ADD COLUMN maintenance boolean NOT NULL DEFAULT false;
ALTER TABLE fence_events DROP CONSTRAINT fence_events_reason_check;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_reason_check
    CHECK (reason IN ('NOT_MAPPED', 'TOO_MANY_OFFLINE', 'COOLDOWN', 'QUORUM', 'MAINTENANCE', 'UUID_MISMATCH', 'MAAS_MACHINE_NOT_FOUND',
                      'MAAS_UNAVAILABLE', 'POWER_NOT_QUERYABLE', 'POWER_OFF_NOT_SENT', 'POWER_OFF_REFUSED', 'POWER_NOT_OFF'));

-- Every evacuation and restore Apelora asked Incus for: the Incus operation that carries
-- it out, recorded in the change's transaction, so a restarted server finds it again.
CREATE TABLE member_operations (
    id              bigserial PRIMARY KEY,
    machine         text NOT NULL,
    action          text NOT NULL CHECK (action IN ('evacuate', 'restore')),
    mode            text NOT NULL DEFAULT '',
    incus_operation text NOT NULL,
    started_by      text NOT NULL,
    request_id      text NOT NULL DEFAULT '',
    started_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The plan's instances and their fates as the operation began (the end reports each).
    instances       jsonb NOT NULL DEFAULT '[]',
    -- Null while Incus's operation runs; then SUCCEEDED, FAILED, or UNKNOWN (Incus
    -- forgot the operation before anyone saw it end: the member's status says the rest).
    finished_at     timestamptz,
    outcome         text CHECK (outcome IN ('SUCCEEDED', 'FAILED', 'UNKNOWN')),
    message         text NOT NULL DEFAULT '',
    CHECK ((finished_at IS NULL) = (outcome IS NULL))
);
CREATE INDEX member_operations_machine ON member_operations (machine, id);
CREATE INDEX member_operations_running ON member_operations (id) WHERE finished_at IS NULL;

-- Progress of those operations as Incus reported it (each instance stopped, moved or
-- started; then the end). Never updated or deleted.
CREATE TABLE member_operation_events (
    id           bigserial PRIMARY KEY,
    operation_id bigint NOT NULL REFERENCES member_operations (id),
    machine      text NOT NULL,
    at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind         text NOT NULL CHECK (kind IN ('STARTED', 'PROGRESS', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    message      text NOT NULL DEFAULT ''
);
CREATE INDEX member_operation_events_machine ON member_operation_events (machine, id);

CREATE FUNCTION member_operation_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('member_operation_events', NEW.id::text);
    RETURN NULL;
END $$;
CREATE TRIGGER member_operation_events_notify AFTER INSERT ON member_operation_events
    FOR EACH ROW EXECUTE FUNCTION member_operation_events_notify();
