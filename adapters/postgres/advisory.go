package postgres

// advisoryLockGranted is the one pg_locks probe, as SQL that is true when the two-key
// advisory lock ($1, key) is granted in this database: to any backend when mine is false
// (does a change hold the machine's lock?), to this connection's backend when it is true
// (does the leader's connection still hold its lock?). key is SQL for the second int4 key
// ("$2", or "hashtext($2)" for a machine's name). pg_locks shows a lock taken with two
// int4 keys with the first in classid, the second in objid (both as oid) and objsubid 2.
func advisoryLockGranted(key string, mine bool) string {
	q := `EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = $1::int4::oid AND objid = (` + key + `)::int4::oid AND objsubid = 2`
	if mine {
		q += ` AND pid = pg_backend_pid()`
	}
	return q + `)`
}
