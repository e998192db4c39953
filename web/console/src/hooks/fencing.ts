// Fencing, live: the cluster as fencing sees it with every fence mapping (and the
// placement guard's state), read again at each fence event; fence events as apelora-worker
// records them.
import { useEffect, useState } from 'react';
import { useQuery, useSubscription } from 'urql';
import { FenceEventsQuery, FenceProgressSubscription, FencingQuery } from '../api/fencing';
import type { FenceEventRowFragment } from '../gql/graphql';
import { useRefresh } from './live';

// useFencing is the fencing page's read, its fence events, and a way to read it again.
export function useFencing() {
  const [res, reexecute] = useQuery({ query: FencingQuery });
  const events = useFenceEvents();
  const refresh = useRefresh(res.fetching, reexecute);
  // A fence event may change a mapping's last event or outage: read the view again.
  useEffect(() => {
    if (events.latestId) refresh();
  }, [events.latestId, refresh]);
  return { res, refresh, events: events.events };
}

// useFenceEvents is the newest fence events, then each one as it is recorded.
export function useFenceEvents() {
  const [page] = useQuery({ query: FenceEventsQuery, variables: { first: 50 }, requestPolicy: 'network-only' });
  const initial = page.data?.fenceEvents.edges.map((e) => e.node);
  const newest = initial?.[0]?.id;
  const [live, setLive] = useState<FenceEventRowFragment[]>([]);
  // Follow from the newest event read, so nothing between the page and the stream is lost.
  const [sub] = useSubscription({ query: FenceProgressSubscription, variables: { after: newest ?? null }, pause: !initial });
  const ev = sub.data?.fenceProgress;
  useEffect(() => {
    if (ev) setLive((l) => (l.some((x) => x.id === ev.id) ? l : [ev, ...l].slice(0, 200)));
  }, [ev]);
  const events = [...live, ...(initial ?? []).filter((e) => !live.some((l) => l.id === e.id))];
  return { events, latestId: live[0]?.id };
}
