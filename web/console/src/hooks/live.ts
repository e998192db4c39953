// Keeps pages live: what every resource's hook uses to read again. The fleet arrives on
// its own stream (hooks/fleet.ts), so the fleet page never reloads; other reads are asked
// again when an audit event is recorded (any change made through Apelora) and on a short
// interval (what changes outside it: a server joining, a member going offline).
import { createContext, useCallback, useContext, useEffect, useRef, useSyncExternalStore } from 'react';
import { useSubscription, type OperationContext } from 'urql';
import { AuditEventRecordedSubscription } from '../api/audit';
import type { SocketState } from '../api/client';

export const refreshIntervalMs = 5000;
// Several events in a burst (a change and its follow-ups) cost one read.
const eventDebounceMs = 250;

export const SocketContext = createContext<SocketState | null>(null);

const always: SocketState = { connected: () => true, subscribe: () => () => {} };

// useConnected says whether the subscriptions' socket is up now.
export function useConnected(): boolean {
  const s = useContext(SocketContext) ?? always;
  return useSyncExternalStore(s.subscribe, s.connected);
}

// useRefresh is a page's way to read again: never while its last read is on its way.
// Asking again would abandon that read (urql ends the request), so a read the server
// answers only after its request timeout (a machine page while MAAS hangs) would be asked
// for again and again and never shown. A read asked for meanwhile follows when it ends.
export function useRefresh(fetching: boolean, reexecute: (opts?: Partial<OperationContext>) => void): () => void {
  const busy = useRef(fetching);
  busy.current = fetching;
  const owed = useRef(false);
  const refresh = useCallback(() => {
    if (busy.current) {
      owed.current = true;
      return;
    }
    busy.current = true;
    reexecute({ requestPolicy: 'network-only' });
  }, [reexecute]);
  useEffect(() => {
    if (fetching || !owed.current) return;
    owed.current = false;
    busy.current = true;
    reexecute({ requestPolicy: 'network-only' });
  }, [fetching, reexecute]);
  return refresh;
}

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
