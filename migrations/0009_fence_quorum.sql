-- A fence refused by the quorum projection (package quorum): powering the member off would
-- leave Incus's database without a majority of its voters or without a member.
ALTER TABLE fence_events DROP CONSTRAINT fence_events_reason_check;
ALTER TABLE fence_events ADD CONSTRAINT fence_events_reason_check
    CHECK (reason IN ('NOT_MAPPED', 'TOO_MANY_OFFLINE', 'COOLDOWN', 'QUORUM', 'UUID_MISMATCH', 'MAAS_MACHINE_NOT_FOUND',
                      'MAAS_UNAVAILABLE', 'POWER_NOT_QUERYABLE', 'POWER_OFF_NOT_SENT', 'POWER_OFF_REFUSED', 'POWER_NOT_OFF'));
