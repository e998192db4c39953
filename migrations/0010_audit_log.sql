-- The audit trail as a verifiable log (package auditlog): each event is a leaf of an
-- append-only Merkle tree. The leaf index and hash are written with the row, in its
-- transaction; the tree's stored hashes (golang.org/x/mod/sumdb/tlog's layout, by storage
-- index) let an append cost O(log n). Existing rows are given theirs in id order by the
-- step that runs after this file (adapters/postgres/auditlog.go, backfillAuditLog).
ALTER TABLE audit_events ADD COLUMN leaf_index bigint UNIQUE, ADD COLUMN leaf_hash bytea;

CREATE TABLE audit_tree_hashes (
    storage_index bigint PRIMARY KEY,
    hash          bytea NOT NULL CHECK (length(hash) = 32)
);

-- The tree's right edge: its size and the roots of its complete subtrees, largest first
-- (auditlog.Frontier), kept in step with the events under the audit order lock, so an
-- append reads one row instead of the tree.
CREATE TABLE audit_tree_state (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    size     bigint NOT NULL CHECK (size >= 0),
    frontier bytea[] NOT NULL
);

-- Signed checkpoints: tree size and root hash in a note signed by the key in
-- APELORA_STATE_DIR (never here). root_hash repeats what the signed text states so that
-- proofs need not parse it; `apelora audit verify` checks they agree.
CREATE TABLE audit_checkpoints (
    tree_size bigint PRIMARY KEY CHECK (tree_size > 0),
    root_hash bytea NOT NULL CHECK (length(root_hash) = 32),
    signed    text NOT NULL,
    signed_at timestamptz NOT NULL DEFAULT now()
);

-- Both are append-only, like the trail.
CREATE TRIGGER audit_tree_hashes_append_only BEFORE UPDATE OR DELETE ON audit_tree_hashes
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
