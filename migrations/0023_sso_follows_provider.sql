-- SSO sessions follow the identity provider (issue 25). An SSO identity holds the
-- permissions of its groups only while the provider has confirmed those groups within
-- APELORA_OIDC_RECHECK_INTERVAL; past sso_confirmed_until it has view-infrastructure alone
-- (identity.Identity.Granted). sso_confirmed_at is the provider's last word. Identities
-- signed in before this migration have neither: view-only until their users sign in again.
ALTER TABLE identities
    ADD COLUMN sso_confirmed_at    timestamptz,
    ADD COLUMN sso_confirmed_until timestamptz,
    ADD CONSTRAINT identities_sso_confirmed CHECK (sso_confirmed_until IS NULL OR sso_subject IS NOT NULL);

-- The provider's refresh token of each SSO session (a console session, or `apeloractl
-- login`'s), sealed with AES-256-GCM under the key of APELORA_OIDC_TOKEN_KEY_FILE, which
-- never enters the database: a superuser reads ciphertext bound to its session's id.
-- key_id names the key (8 bytes of its SHA-256): a replica without that key leaves the row
-- to one that has it. next_check_at is when the provider is asked again; claimed_until keeps
-- two replicas from asking at once (a provider that rotates refresh tokens would refuse
-- the second). The row goes with its session: signed out, expired or its identity gone.
CREATE TABLE sso_grants (
    console_session_id bigint PRIMARY KEY REFERENCES console_sessions (id) ON DELETE CASCADE,
    key_id        bytea NOT NULL CHECK (length(key_id) = 8),
    sealed        bytea NOT NULL CHECK (length(sealed) BETWEEN 29 AND 16384),
    next_check_at timestamptz NOT NULL,
    claimed_until timestamptz
);
CREATE INDEX sso_grants_due ON sso_grants (next_check_at);

-- Every replica re-authorises the open websockets of an identity whose permissions change
-- or whose groups the provider confirms again (the socket's identity is replaced, so a
-- demotion takes effect on it at once and a confirmation keeps it from lapsing), besides
-- closing them on revocation and expiry as before.
DROP TRIGGER identities_notify_update ON identities;
CREATE TRIGGER identities_notify_update AFTER UPDATE OF revoked_at, expires_at, permissions, sso_confirmed_until ON identities
    FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
        OR OLD.permissions IS DISTINCT FROM NEW.permissions OR OLD.sso_confirmed_until IS DISTINCT FROM NEW.sso_confirmed_until)
    EXECUTE FUNCTION identities_notify();
