-- The audit trail's tail is sealed (package auditlog, Sealer): every event is written with
-- the HMAC-SHA-256, under a key derived from the audit key (never in the database), of the
-- tree head its leaf ends (its leaf index + 1 and the root hash). Rows written before this
-- migration are sealed once, in leaf order, by the first server start that holds the key
-- (Store.SealAuditBacklog).
ALTER TABLE audit_events ADD COLUMN seal bytea CHECK (seal IS NULL OR length(seal) = 32);
-- From now on every event is written sealed: a replica still on the previous release (which
-- writes none) has its events, and so its changes, refused until it is upgraded. Rows
-- written before are left to the backlog's sealing (NOT VALID: not checked until updated).
ALTER TABLE audit_events ADD CONSTRAINT audit_events_sealed CHECK (seal IS NOT NULL) NOT VALID;

-- A checkpoint row that someone else put at a size (signed by another key, inserted in the
-- database) must not keep the real one out: rows are unique by size and signed text, and
-- readers keep the ones the audit key verifies.
ALTER TABLE audit_checkpoints DROP CONSTRAINT audit_checkpoints_pkey;
CREATE UNIQUE INDEX audit_checkpoints_size_text ON audit_checkpoints (tree_size, md5(signed));

-- TRUNCATE fires no row trigger: the trail's tables refuse it outright. (A superuser can
-- still disable a trigger: `apelora audit verify` and the running server then name the cut
-- against the heads each replica witnessed.)
CREATE FUNCTION audit_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is part of the audit trail, which is append-only: TRUNCATE is refused', TG_TABLE_NAME;
END;
$$;
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
CREATE TRIGGER audit_tree_hashes_no_truncate BEFORE TRUNCATE ON audit_tree_hashes
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
