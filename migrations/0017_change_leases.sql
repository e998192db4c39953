-- A change holds a lease on what it changes instead of a transaction's advisory lock, and
-- records its intent before it acts (issues 25.1 and 25.7; adapters/postgres/change.go).
--
-- change_leases: one row per lock key ('machine NAME', or a named lock: 'identities',
-- 'hardware profiles', 'placement guard', 'rolling reboots'). A change takes the row with
-- the next epoch when it is free (released, or expired on the database's clock), keeps it
-- while it plans again and acts, renews it while an Incus or MAAS call runs, and releases
-- it in the transaction that writes its outcome, which checks the epoch first: a change
-- that lost its lease (paused, cut off from the database) writes no outcome. Rows are never
-- deleted, so an epoch is never handed out twice.
CREATE TABLE change_leases (
    lock_key   text PRIMARY KEY CHECK (char_length(lock_key) BETWEEN 1 AND 200),
    epoch      bigint NOT NULL CHECK (epoch > 0),
    holder     text NOT NULL,
    action     text NOT NULL,
    request_id text NOT NULL,
    taken_at   timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- change_steps: a step sent to Incus or MAAS, from its intent (the approved step,
-- committed as an audit event with outcome STARTED before anything is sent) to its outcome
-- (the audit event that says what happened). A step whose outcome is still null when its
-- lease is gone was cut off (a crash, a failover, a lost database): the reconciler reads
-- Incus or MAAS and records its outcome once (outcome_event is unique, and the update that
-- sets it requires outcome IS NULL). This is state, not the trail: the reconciler reads
-- this table, never audit_events, and no foreign key ties the two.
CREATE TABLE change_steps (
    intent_event  bigint PRIMARY KEY,
    lock_key      text NOT NULL,
    lease_epoch   bigint NOT NULL,
    action        text NOT NULL,
    machine       text,
    actor         text NOT NULL,
    request_id    text NOT NULL,
    parameters    jsonb NOT NULL,
    details       jsonb NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    outcome       text CHECK (outcome IN ('SUCCEEDED', 'FAILED', 'REFUSED')),
    outcome_event bigint UNIQUE,
    finished_at   timestamptz,
    CHECK ((outcome IS NULL) = (outcome_event IS NULL)),
    CHECK ((outcome IS NULL) = (finished_at IS NULL))
);
CREATE INDEX change_steps_unfinished ON change_steps (lock_key) WHERE outcome IS NULL;

-- The intent's own outcome.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_outcome_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_outcome_check
    CHECK (outcome IN ('SUCCEEDED', 'FAILED', 'REFUSED', 'PLANNED', 'STARTED'));

-- The reconciler leads from one API replica at a time.
ALTER TABLE leader_leases DROP CONSTRAINT leader_leases_role_check;
ALTER TABLE leader_leases ADD CONSTRAINT leader_leases_role_check
    CHECK (role IN ('fence', 'drift', 'rolling', 'changes') OR role LIKE 'audit export %');
