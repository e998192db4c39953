// Keeps fleet data live. Until the API has a fleet stream, the fleet is read again when an
// audit event is recorded (any change made through Apelora) and on a short interval (what
// changes outside it: a server joining, a member going offline, MAAS moving a machine on).
// This module is the one place that knows how: when the `fleetUpdates` subscription lands,
// swap the body of useLiveRefresh for it and the pages stay as they are.
import { useEffect, useRef } from 'react';
import { useSubscription } from 'urql';
import { AuditEventRecordedSubscription } from '../api/operations';

export const refreshIntervalMs = 5000;
// Several events in a burst (a change and its follow-ups) cost one read.
const eventDebounceMs = 250;

// useLiveRefresh calls refresh when the fleet may have changed. machine, when given, limits
// the audit events listened to to that machine's.
export function useLiveRefresh(refresh: () => void, machine?: string): void {
  const latest = useRef(refresh);
  latest.current = refresh;
  useChangeRefresh(refresh, machine);

  useEffect(() => {
    const tick = () => {
      if (document.visibilityState === 'visible') latest.current();
    };
    const t = setInterval(tick, refreshIntervalMs);
    document.addEventListener('visibilitychange', tick);
    return () => {
      clearInterval(t);
      document.removeEventListener('visibilitychange', tick);
    };
  }, []);
}

// useChangeRefresh calls refresh when a change is recorded through Apelora (by anyone, on
// any replica): for what changes only that way, such as identities and hardware profiles.
// Its subscription also keeps a socket open, so a revoked identity or a signed-out session
// returns the page to sign-in at once.
export function useChangeRefresh(refresh: () => void, machine?: string): void {
  const latest = useRef(refresh);
  latest.current = refresh;
  const [ev] = useSubscription({ query: AuditEventRecordedSubscription, variables: { machine } });
  const eventId = ev.data?.auditEventRecorded.id;
  useEffect(() => {
    if (!eventId) return;
    const t = setTimeout(() => latest.current(), eventDebounceMs);
    return () => clearTimeout(t);
  }, [eventId]);
}
