-- Identities: only a SHA-256 of each bearer token is kept.
CREATE TABLE identities (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9._-]{0,62}$'),
    token_hash  bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    permissions text[] NOT NULL CHECK (permissions <@ ARRAY['view-infrastructure','manage-infrastructure','hardware.delete']::text[]),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Machine records. No status column: a machine's phase is derived on every read.
CREATE TABLE machine_records (
    name           text PRIMARY KEY CHECK (name ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$'),
    provisioner    text NOT NULL CHECK (provisioner IN ('MANUAL', 'MAAS')),
    description    text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1024),
    maas_system_id text UNIQUE,
    hardware_uuid  text,
    registered_at  timestamptz NOT NULL,
    registered_by  text NOT NULL,
    CHECK ((provisioner = 'MAAS') = (maas_system_id IS NOT NULL))
);

-- The audit trail: one row per mutation, allowed or refused. Never updated or deleted.
CREATE TABLE audit_events (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text NOT NULL,
    action     text NOT NULL,
    machine    text,
    parameters jsonb NOT NULL DEFAULT '{}',
    outcome    text NOT NULL CHECK (outcome IN ('SUCCEEDED', 'FAILED', 'REFUSED')),
    error      text,
    request_id text NOT NULL,
    details    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_events_machine ON audit_events (machine, id);

-- Every API replica pushes new audit events to its subscribers: tell them at commit.
CREATE FUNCTION audit_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('audit_events', NEW.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER audit_events_notify AFTER INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_notify();

-- The trail is append-only.
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only';
END;
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
