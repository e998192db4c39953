-- Single sign-on (OIDC). An administrator who signs in through the company's identity
-- provider becomes an identity like any other (listed, revocable, audited), keyed by the
-- provider's issuer and subject; it has no bearer token, so token_hash may be empty for it.
-- sso_groups are the groups of its last sign-in, from which its permissions were mapped.
ALTER TABLE identities
    ALTER COLUMN token_hash DROP NOT NULL,
    ADD COLUMN sso_issuer  text,
    ADD COLUMN sso_subject text,
    ADD COLUMN sso_groups  text[],
    ADD CONSTRAINT identities_credential CHECK (token_hash IS NOT NULL OR sso_subject IS NOT NULL),
    ADD CONSTRAINT identities_sso CHECK ((sso_issuer IS NULL) = (sso_subject IS NULL)),
    ADD CONSTRAINT identities_sso_subject UNIQUE (sso_issuer, sso_subject);

-- A sign-in in progress: the browser went to the provider with a state, a nonce and a PKCE
-- challenge; the callback must bring the same state back (kept here as a hash, and in the
-- browser's cookie), once, within expires_at. Taking the row deletes it, so a replayed
-- callback (its state, its code, its nonce) finds nothing.
CREATE TABLE sso_sign_ins (
    state_hash bytea PRIMARY KEY CHECK (length(state_hash) = 32),
    nonce      text NOT NULL,
    verifier   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX sso_sign_ins_expires ON sso_sign_ins (expires_at);
