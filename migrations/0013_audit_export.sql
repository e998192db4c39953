-- Export of the audit trail to SIEM sinks (package auditexport): per sink, the next leaf
-- index to send. The leading exporter of a sink moves it forward only after the sink
-- acknowledged every event before it, so delivery resumes there after an outage or a
-- restart (at least once, in order). A sink is named by its destination
-- ("syslog tcp://host:port", "jsonl /path"): a new destination starts from leaf 0.
-- (0013, not 0012: 0012 may be taken by a change made at the same time.)
CREATE TABLE audit_export_progress (
    sink            text PRIMARY KEY,
    next_leaf       bigint NOT NULL CHECK (next_leaf >= 0),
    acknowledged_at timestamptz NOT NULL DEFAULT now()
);
