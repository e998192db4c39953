-- Drift says why it is quiet (issue 24): the checks that need a member up are suspended
-- while it is in maintenance (it may be down on purpose); the watcher keeps the reason with
-- the machine's last check, and the fleet shows it (Machine.driftQuiet). Null while every
-- check runs.
ALTER TABLE drift_machines ADD COLUMN quiet text;
