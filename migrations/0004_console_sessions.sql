-- Fabric Console sessions: a bearer token pasted once is exchanged for a random session
-- value kept only in an HttpOnly cookie; the database keeps its SHA-256. A session
-- authenticates as its identity, found through the same lookup as bearer tokens, so an
-- identity that may no longer authenticate ends its sessions too. Deleting an identity
-- deletes its sessions.
CREATE TABLE console_sessions (
    id          bigserial PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    identity_id bigint NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX console_sessions_identity ON console_sessions (identity_id);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
