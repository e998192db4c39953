-- The audit tree's right edge is no longer kept in a row every append read and rewrote
-- (an UPDATE per audit event, a measurable share of a mutation's latency): an append now
-- reads the tree's last leaf under the audit order lock and takes the frontier from its
-- process's memory when that leaf is its own, or from audit_tree_hashes
-- (adapters/postgres/auditlog.go, auditEdge). The tree's size is max(leaf_index) + 1.
DROP TABLE audit_tree_state;
