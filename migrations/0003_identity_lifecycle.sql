-- Identities may expire and can be revoked; the row stays (with its token hash, never the
-- token) so the list shows who was revoked, when and by whom, and a revoked token is
-- refused by name. last_used_at is written at most about once a minute per identity.
ALTER TABLE identities
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN revoked_at   timestamptz,
    ADD COLUMN revoked_by   text,
    ADD COLUMN last_used_at timestamptz,
    ADD CONSTRAINT identities_revoked_by CHECK ((revoked_at IS NULL) = (revoked_by IS NULL)),
    ADD CONSTRAINT identities_expiry_after_creation CHECK (expires_at IS NULL OR expires_at > created_at);

-- Every API replica closes the open websockets of an identity that is revoked, deleted or
-- whose expiry changes: tell them at commit (the payload is the identity's id). Writes of
-- last_used_at alone notify nobody.
CREATE FUNCTION identities_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('identities', OLD.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER identities_notify_update AFTER UPDATE OF revoked_at, expires_at ON identities
    FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
    EXECUTE FUNCTION identities_notify();
CREATE TRIGGER identities_notify_delete AFTER DELETE ON identities
    FOR EACH ROW EXECUTE FUNCTION identities_notify();
