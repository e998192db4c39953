-- Admissions are facts of their own: whether a member counts as admitted is no longer read
-- from the audit trail (which a superuser can empty, and whose action names are the API's).
-- A row is written by admitMember in the change's own transaction, and ended (ended_at) in
-- the transaction of the step that ends it: removeMember, or a new join (approveEnrolment,
-- installOperatingSystem). At most one admission of a machine is open.
CREATE TABLE admissions (
    id             bigserial PRIMARY KEY,
    machine        text NOT NULL,
    member         text NOT NULL,
    -- As Incus listed them at admission; roles NULL: not known (carried over from a trail
    -- event that did not list them), so drift has nothing to compare.
    roles          text[],
    groups         text[],
    failure_domain text,
    admitted_by    text NOT NULL,
    admitted_at    timestamptz NOT NULL DEFAULT now(),
    request_id     text NOT NULL,
    -- The admitMember audit event. Filled in the same transaction once the event is inserted
    -- (its id is drawn at insert, after the Incus update that wrote the mark); no foreign
    -- key: the trail is a record of what happened, not a part of this fact.
    audit_event_id bigint,
    -- Carried over from the audit trail by this migration: the member does not carry the
    -- admission mark yet. The server marks it at start, then clears the flag.
    carried_over   boolean NOT NULL DEFAULT false,
    ended_at       timestamptz,
    ended_by       text,
    ended_action   text,
    ended_request  text,
    CHECK ((ended_at IS NULL) = (ended_by IS NULL))
);
CREATE UNIQUE INDEX admissions_open ON admissions (machine) WHERE ended_at IS NULL;

-- Today's admissions, from the trail the previous release read them from: the machine's
-- latest successful membership step is admitMember (its details list the roles).
INSERT INTO admissions (machine, member, roles, admitted_by, admitted_at, request_id, audit_event_id, carried_over)
SELECT latest.machine, latest.machine,
       CASE WHEN jsonb_typeof(latest.details->'roles') = 'array'
            THEN ARRAY(SELECT jsonb_array_elements_text(latest.details->'roles')) END,
       latest.actor, latest.at, latest.request_id, latest.id, true
FROM (SELECT DISTINCT ON (machine) id, at, actor, action, machine, request_id, details FROM audit_events
      WHERE outcome = 'SUCCEEDED' AND machine IS NOT NULL
        AND action IN ('approveEnrolment', 'installOperatingSystem', 'admitMember', 'removeMember')
      ORDER BY machine, id DESC) latest
WHERE latest.action = 'admitMember' AND EXISTS (SELECT 1 FROM machine_records r WHERE r.name = latest.machine);
