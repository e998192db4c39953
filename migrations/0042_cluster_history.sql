-- A removed cluster's history stays (issue 27 item 1). 0040 gave admissions, member
-- operations (evacuations and restores) and rolling reboots a foreign key to clusters ON
-- DELETE RESTRICT, so any cluster that ever had one, however long ago it ended, could not
-- be removed. removeCluster's rule refuses only while an admission is open or a task is
-- unfinished (clusters.References, counted under a FOR UPDATE lock on the cluster); what
-- has ended is history, read by id, and outlives its cluster as the fence events do (a
-- cluster's id is never reused: bigserial). The foreign keys go; a new row, or a row moved
-- to another cluster, must still name a cluster that exists, checked as a foreign key
-- checks it: the cluster's row is locked FOR KEY SHARE, so a task started while its cluster
-- is being removed either waits for the removal and is refused, or holds the removal until
-- it commits (whose count then sees the task and refuses the removal).
ALTER TABLE admissions DROP CONSTRAINT admissions_cluster_id_fkey;
ALTER TABLE member_operations DROP CONSTRAINT member_operations_cluster_id_fkey;
ALTER TABLE rolling_operations DROP CONSTRAINT rolling_operations_cluster_id_fkey;

-- Runs after member_row_cluster (BEFORE triggers fire in name order: <table>_cluster, then
-- <table>_cluster_exists), so a row that named no cluster is checked in the one chosen.
-- The error is the foreign key's (23503, its constraint's name): the store says the
-- cluster was removed meanwhile.
CREATE FUNCTION cluster_exists() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.cluster_id IS NULL OR (TG_OP = 'UPDATE' AND NEW.cluster_id IS NOT DISTINCT FROM OLD.cluster_id) THEN
        RETURN NEW;
    END IF;
    PERFORM 1 FROM clusters WHERE id = NEW.cluster_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a row of % names Incus cluster %, which is not registered (removed)', TG_TABLE_NAME, NEW.cluster_id
            USING ERRCODE = 'foreign_key_violation', TABLE = TG_TABLE_NAME, COLUMN = 'cluster_id',
                  CONSTRAINT = TG_TABLE_NAME || '_cluster_id_fkey',
                  HINT = 'list the clusters (clusters) and name one registered';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER admissions_cluster_exists BEFORE INSERT OR UPDATE OF cluster_id ON admissions
    FOR EACH ROW EXECUTE FUNCTION cluster_exists();
CREATE TRIGGER member_operations_cluster_exists BEFORE INSERT OR UPDATE OF cluster_id ON member_operations
    FOR EACH ROW EXECUTE FUNCTION cluster_exists();
CREATE TRIGGER rolling_operations_cluster_exists BEFORE INSERT OR UPDATE OF cluster_id ON rolling_operations
    FOR EACH ROW EXECUTE FUNCTION cluster_exists();

