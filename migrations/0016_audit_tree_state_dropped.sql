-- The audit tree's right edge is no longer kept in a row every append read and rewrote
-- (an UPDATE per audit event, a measurable share of a mutation's latency): an append now
-- reads the tree's last stored hash under the audit order lock and takes the frontier from
-- its process's memory when that hash is its own, or from audit_tree_hashes
-- (adapters/postgres/auditlog.go, auditEdge). The tree's size follows from the tree
-- hashes' highest storage index (auditlog.SizeOfStoredHashes).
DROP TABLE audit_tree_state;
