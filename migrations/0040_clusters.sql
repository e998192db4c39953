-- Many Incus clusters behind one MAAS region (issue 27). A cluster is a record, registered
-- by an audited step (registerCluster) or adopted at start from APELORA_INCUS_* (the
-- environment's cluster). One rule decides every key: a fact about a member is keyed
-- (cluster, member); a fact about a machine by its name (machine names stay unique across
-- Apelora, member names are unique within a cluster only).
CREATE TABLE clusters (
    id               bigserial PRIMARY KEY,
    -- The member-name rule (machines.ValidateName).
    name             text NOT NULL UNIQUE CHECK (name ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$'),
    -- Member URLs to start from: the registration URL, then the member URLs its plan read
    -- (those learned later are not written back: no unaudited writes).
    seed_urls        text[] NOT NULL DEFAULT '{}' CHECK (cardinality(seed_urls) <= 64),
    -- Only the cluster adopted from APELORA_INCUS_SOCKET: the local daemon's socket.
    socket           text CHECK (socket IS NULL OR char_length(socket) BETWEEN 1 AND 4096),
    -- The cluster certificate (PEM, public): every CERTIFICATE block is pinned.
    certificate      text CHECK (certificate IS NULL OR octet_length(certificate) BETWEEN 1 AND 65536),
    -- SHA-256 of the first block: one cluster is registered once, whatever its name.
    fingerprint      text UNIQUE CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    -- Carried over from APELORA_INCUS_* (at most one): adopted at each start.
    from_environment boolean NOT NULL DEFAULT false,
    -- False only for the placeholder below, until a start adopts it.
    adopted          boolean NOT NULL DEFAULT true,
    registered_by    text NOT NULL CHECK (char_length(registered_by) BETWEEN 1 AND 200),
    registered_at    timestamptz NOT NULL DEFAULT now(),
    -- An adopted cluster is reached over HTTPS (seeds, the pinned certificate) or through
    -- the socket (its certificate once read); the placeholder holds no connection at all.
    CONSTRAINT clusters_reachable CHECK (NOT adopted OR socket IS NOT NULL
        OR (cardinality(seed_urls) > 0 AND certificate IS NOT NULL AND fingerprint IS NOT NULL)),
    CONSTRAINT clusters_placeholder CHECK (adopted OR (socket IS NULL AND certificate IS NULL AND fingerprint IS NULL
        AND cardinality(seed_urls) = 0 AND from_environment)),
    CONSTRAINT clusters_pinned CHECK ((fingerprint IS NULL) = (certificate IS NULL))
);
CREATE UNIQUE INDEX clusters_one_from_environment ON clusters ((true)) WHERE from_environment;

-- An upgraded database: everything it holds is about the one cluster it knew. Its name and
-- connection arrive at start, from APELORA_INCUS_* (clusters.Adopt); until then it is the
-- placeholder "default", not adopted.
INSERT INTO clusters (name, from_environment, adopted, registered_by)
SELECT 'default', true, false, 'apelora (migration)'
WHERE EXISTS (SELECT 1 FROM machine_records) OR EXISTS (SELECT 1 FROM fence_mappings)
   OR EXISTS (SELECT 1 FROM admissions) OR EXISTS (SELECT 1 FROM rolling_operations)
   OR EXISTS (SELECT 1 FROM member_operations) OR EXISTS (SELECT 1 FROM fence_member_tracking)
   OR EXISTS (SELECT 1 FROM fence_events WHERE kind <> 'LEADING') OR EXISTS (SELECT 1 FROM fence_worker);

-- Every replica's registry (and so its Incus connections) and the worker follow the
-- clusters: tell them at commit (the payload is the cluster's id).
CREATE FUNCTION clusters_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('clusters', coalesce(NEW.id, OLD.id)::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER clusters_notify AFTER INSERT OR UPDATE OR DELETE ON clusters
    FOR EACH ROW EXECUTE FUNCTION clusters_notify();

-- The cluster a row of a member table is about when the code that writes it names none:
-- the environment's cluster, else the only cluster. Apelora's code of this release names
-- the cluster only where issue 27's work has reached (clusters themselves); the member
-- domain and the worker write their rows as before and land in the cluster they act in,
-- which is the environment's. A row that cannot be placed so is refused, naming why.
CREATE FUNCTION member_row_cluster() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE c bigint;
BEGIN
    IF NEW.cluster_id IS NOT NULL THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'fence_events' THEN
        IF NEW.kind = 'LEADING' THEN
            RETURN NEW; -- a worker taking the lease is about no cluster
        END IF;
    END IF;
    SELECT id INTO c FROM clusters WHERE from_environment;
    IF c IS NULL THEN
        SELECT min(id) INTO c FROM clusters HAVING count(*) = 1;
    END IF;
    IF c IS NULL THEN
        RAISE EXCEPTION 'a row of % names no Incus cluster, and there is no single one it can be about', TG_TABLE_NAME
            USING ERRCODE = 'not_null_violation', COLUMN = 'cluster_id',
                  HINT = 'register a cluster (registerCluster) or set APELORA_INCUS_*, and name the cluster';
    END IF;
    NEW.cluster_id := c;
    RETURN NEW;
END;
$$;

-- Machine records: null until the record is enrolled somewhere; today every record is the
-- one cluster's.
ALTER TABLE machine_records ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE RESTRICT;
UPDATE machine_records SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
CREATE INDEX machine_records_cluster ON machine_records (cluster_id);

-- Admissions: in the cluster the member was admitted to.
ALTER TABLE admissions ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE RESTRICT;
UPDATE admissions SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE admissions ALTER COLUMN cluster_id SET NOT NULL;
CREATE INDEX admissions_cluster ON admissions (cluster_id) WHERE ended_at IS NULL;
CREATE TRIGGER admissions_cluster BEFORE INSERT ON admissions FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

-- Fence mappings: keyed (cluster, member). A MAAS machine powers one member: system id and
-- hardware UUID stay unique across clusters.
ALTER TABLE fence_drills DROP CONSTRAINT fence_drills_member_fkey;
ALTER TABLE fence_mappings ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE RESTRICT;
UPDATE fence_mappings SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE fence_mappings ALTER COLUMN cluster_id SET NOT NULL;
ALTER TABLE fence_mappings DROP CONSTRAINT fence_mappings_pkey;
ALTER TABLE fence_mappings ADD PRIMARY KEY (cluster_id, member);
CREATE TRIGGER fence_mappings_cluster BEFORE INSERT ON fence_mappings FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

ALTER TABLE fence_drills ADD COLUMN cluster_id bigint;
UPDATE fence_drills SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE fence_drills ALTER COLUMN cluster_id SET NOT NULL;
ALTER TABLE fence_drills DROP CONSTRAINT fence_drills_pkey;
ALTER TABLE fence_drills ADD PRIMARY KEY (cluster_id, member);
ALTER TABLE fence_drills ADD CONSTRAINT fence_drills_mapping
    FOREIGN KEY (cluster_id, member) REFERENCES fence_mappings (cluster_id, member) ON DELETE CASCADE;
CREATE TRIGGER fence_drills_cluster BEFORE INSERT ON fence_drills FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

-- What the fence worker observed, per cluster: removing a cluster forgets it.
ALTER TABLE fence_member_tracking ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE CASCADE;
UPDATE fence_member_tracking SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE fence_member_tracking ALTER COLUMN cluster_id SET NOT NULL;
ALTER TABLE fence_member_tracking DROP CONSTRAINT fence_member_tracking_pkey;
ALTER TABLE fence_member_tracking ADD PRIMARY KEY (cluster_id, member);
CREATE TRIGGER fence_member_tracking_cluster BEFORE INSERT ON fence_member_tracking FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

-- Fence events name their cluster, but for LEADING (a worker taking the lease leads every
-- cluster). No foreign key: the trail is append-only and outlives a removed cluster (its
-- id is never reused). The backfill is the one UPDATE the trail ever sees, in this
-- migration's transaction with the append-only trigger off around it.
ALTER TABLE fence_events ADD COLUMN cluster_id bigint;
ALTER TABLE fence_events DISABLE TRIGGER fence_events_append_only;
UPDATE fence_events SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted) WHERE kind <> 'LEADING';
ALTER TABLE fence_events ENABLE TRIGGER fence_events_append_only;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_cluster_check CHECK ((cluster_id IS NULL) = (kind = 'LEADING'));
CREATE INDEX fence_events_cluster_member ON fence_events (cluster_id, member, id);
CREATE TRIGGER fence_events_cluster BEFORE INSERT ON fence_events FOR EACH ROW EXECUTE FUNCTION member_row_cluster();
-- A cluster the worker cannot read pauses fencing in it alone: UNREADABLE once per outage,
-- READABLE at its end (no member).
ALTER TABLE fence_events DROP CONSTRAINT fence_events_kind_check;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_kind_check
    CHECK (kind IN ('LEADING', 'OFFLINE', 'BACK_ONLINE', 'ELIGIBLE', 'REFUSED', 'REQUESTED', 'CONFIRMED', 'NOT_CONFIRMED',
                    'QUORUM_LOST', 'QUORUM_BACK', 'UNREADABLE', 'READABLE'));
ALTER TABLE fence_events DROP CONSTRAINT fence_events_member_check;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_member_check
    CHECK ((member IS NULL) = (kind IN ('LEADING', 'QUORUM_LOST', 'QUORUM_BACK', 'UNREADABLE', 'READABLE')));

-- The fence worker's state per cluster (fence_worker stays the leader's one report): when
-- it last read the cluster, since when it could not, since when it has answered again (the
-- settle period), since when Incus has no quorum, and why fencing is paused there.
CREATE TABLE fence_clusters (
    cluster_id       bigint PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    last_read_at     timestamptz,
    unreadable_since timestamptz,
    answering_since  timestamptz,
    no_quorum_since  timestamptz,
    paused_reason    text CHECK (paused_reason IS NULL OR char_length(paused_reason) BETWEEN 1 AND 1024)
);
INSERT INTO fence_clusters (cluster_id, last_read_at, no_quorum_since)
SELECT c.id, w.last_round_at, w.no_quorum_since FROM clusters c, fence_worker w WHERE NOT c.adopted;

-- Evacuations and restores: the follower asks the task's cluster for its Incus operation.
ALTER TABLE member_operations ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE RESTRICT;
UPDATE member_operations SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE member_operations ALTER COLUMN cluster_id SET NOT NULL;
CREATE INDEX member_operations_cluster_running ON member_operations (cluster_id) WHERE finished_at IS NULL;
CREATE TRIGGER member_operations_cluster BEFORE INSERT ON member_operations FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

-- Rolling reboots: one running or paused per cluster (was: one in all).
ALTER TABLE rolling_operations ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE RESTRICT;
UPDATE rolling_operations SET cluster_id = (SELECT id FROM clusters WHERE NOT adopted);
ALTER TABLE rolling_operations ALTER COLUMN cluster_id SET NOT NULL;
DROP INDEX rolling_operations_one_active;
CREATE UNIQUE INDEX rolling_operations_one_active ON rolling_operations (cluster_id) WHERE finished_at IS NULL;
CREATE INDEX rolling_operations_cluster ON rolling_operations (cluster_id, id);
CREATE TRIGGER rolling_operations_cluster BEFORE INSERT ON rolling_operations FOR EACH ROW EXECUTE FUNCTION member_row_cluster();

-- Permissions scoped to clusters: identities.permissions keeps the unscoped grants (so old
-- rows mean what they meant); a scoped grant is one row per (permission, cluster). Removing
-- a cluster removes its grants, and every replica re-authorises the identity's sockets.
CREATE TABLE identity_grants (
    identity_id bigint NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    permission  text NOT NULL CHECK (permission IN ('view-infrastructure', 'manage-infrastructure', 'hardware.delete')),
    cluster_id  bigint NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    PRIMARY KEY (identity_id, permission, cluster_id)
);
CREATE INDEX identity_grants_cluster ON identity_grants (cluster_id);
CREATE FUNCTION identity_grants_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('identities', coalesce(NEW.identity_id, OLD.identity_id)::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER identity_grants_notify AFTER INSERT OR DELETE ON identity_grants
    FOR EACH ROW EXECUTE FUNCTION identity_grants_notify();
