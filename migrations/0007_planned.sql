-- A dry run (dryRun: true) is audited with its own outcome, PLANNED.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_outcome_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_outcome_check
    CHECK (outcome IN ('SUCCEEDED', 'FAILED', 'REFUSED', 'PLANNED'));
