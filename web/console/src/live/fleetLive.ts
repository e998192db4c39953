// Keeps pages live. The fleet arrives on the `fleetUpdates` stream (a snapshot, then each
// change; see lib/fleetStream), so the fleet page never reloads. Other pages read again
// when an audit event is recorded (any change made through Apelora) and on a short
// interval (what changes outside it: a server joining, a member going offline).
import { createContext, useCallback, useContext, useEffect, useRef, useState, useSyncExternalStore } from 'react';
import { useSubscription, type OperationContext } from 'urql';
import { AuditEventRecordedSubscription } from '../api/audit';
import { FleetUpdatesSubscription } from '../api/fleet';
import type { SocketState } from '../api/client';
import { applyUpdate, emptyFleet, type FleetState } from '../lib/fleetStream';

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

export interface FleetStream {
  fleet: FleetState | undefined;
  error: ReturnType<typeof useSubscription>[0]['error'];
  // live: the stream is connected and nothing was missed; otherwise rows may be behind.
  live: boolean;
}

// useFleetStream follows fleetUpdates. When a change does not follow the last revision,
// it subscribes again with that revision and starts over from the fresh snapshot; after a
// lost socket, graphql-ws subscribes again by itself and the server sends a snapshot too.
// A stream that ends in an error is subscribed again after a few seconds; meanwhile the
// last rows stay on screen, marked as not live.
export function useFleetStream(): FleetStream {
  const [after, setAfter] = useState<number | null>(null);
  const [res, resubscribe] = useSubscription({ query: FleetUpdatesSubscription, variables: { after } }, (prev: FleetState | undefined, data) =>
    applyUpdate(prev ?? emptyFleet, data.fleetUpdates),
  );
  const last = useRef<FleetState | undefined>(undefined);
  if (res.data) last.current = res.data;
  const fleet = res.data ?? last.current;
  const missed = res.data?.missed ?? false;
  useEffect(() => {
    if (missed && res.data) setAfter(res.data.revision);
  }, [missed, res.data]);
  const failed = !!res.error;
  useEffect(() => {
    if (!failed) return;
    const t = setTimeout(() => resubscribe({ requestPolicy: 'network-only' }), resubscribeMs);
    return () => clearTimeout(t);
  }, [failed, resubscribe]);
  const connected = useConnected();
  return { fleet, error: res.error, live: connected && !!res.data && !missed && !failed };
}

const resubscribeMs = 3000;

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
