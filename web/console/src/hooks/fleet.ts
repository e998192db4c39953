// The fleet, live: it arrives on the `fleetUpdates` stream (a snapshot, then each change;
// lib/fleetStream applies each message), so the fleet and enrolment pages never reload.
import { useEffect, useMemo, useRef, useState } from 'react';
import { useSubscription } from 'urql';
import { FleetUpdatesSubscription } from '../api/fleet';
import { applyUpdate, emptyFleet, type FleetState } from '../lib/fleetStream';
import { useConnected } from './live';

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

// useFleet is the fleet as the `fleet` query shapes it, kept live by the fleet stream:
// rows change in place as the server pushes them, without reloading.
export function useFleet() {
  const { fleet, error, live } = useFleetStream();
  const data = useMemo(() => (fleet?.sources ? { fleet: { machines: fleet.rows, sources: fleet.sources } } : undefined), [fleet]);
  return { res: { data, error }, live };
}
