-- Quorum loss is a state (issue 24): the fence worker records when Incus answers but its
-- database does not (no quorum), once, as a fence event about the cluster (no member), and
-- keeps the time in its report, which the cluster view shows ("Incus has no quorum since T:
-- fencing paused").
ALTER TABLE fence_events DROP CONSTRAINT fence_events_kind_check;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_kind_check
    CHECK (kind IN ('LEADING', 'OFFLINE', 'BACK_ONLINE', 'ELIGIBLE', 'REFUSED', 'REQUESTED', 'CONFIRMED', 'NOT_CONFIRMED',
                    'QUORUM_LOST', 'QUORUM_BACK'));
-- The member-less kinds: a worker taking the lease, and the cluster's quorum.
DO $$
DECLARE c text;
BEGIN
    SELECT conname INTO c FROM pg_constraint
        WHERE conrelid = 'fence_events'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%member IS NULL%';
    IF c IS NOT NULL THEN
        EXECUTE format('ALTER TABLE fence_events DROP CONSTRAINT %I', c);
    END IF;
END $$;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_member_check
    CHECK ((member IS NULL) = (kind IN ('LEADING', 'QUORUM_LOST', 'QUORUM_BACK')));

-- Since when the leading worker has seen Incus without quorum; null while it has it.
ALTER TABLE fence_worker ADD COLUMN no_quorum_since timestamptz;
