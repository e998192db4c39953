package postgres

// advisoryLockGranted is the pg_locks probe, as SQL that is true when the two-key advisory
// lock ($1, key) is granted to any backend in this database (does a change hold the
// machine's lock?). key is SQL for the second int4 key ("hashtext($2)" for a machine's
// name). pg_locks shows a lock taken with two int4 keys with the first in classid, the
// second in objid (both as oid) and objsubid 2. (Leaders used to probe their own session
// lock with it; they hold a lease now, lease.go.)
func advisoryLockGranted(key string) string {
	return `EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = $1::int4::oid AND objid = (` + key + `)::int4::oid AND objsubid = 2)`
}
