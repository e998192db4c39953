// The audit trail: its events page by page with those recorded since arriving live, the
// latest signed checkpoint, whether the trail still verifies, and one-off reads (a page as
// it is now, an inclusion proof).
import { useEffect, useMemo, useState } from 'react';
import { useClient, useQuery, useSubscription } from 'urql';
import { AuditCheckpointQuery, AuditEventRecordedSubscription, AuditEventsQuery, AuditProofQuery, AuditTrailQuery } from '../api/audit';
import type { AuditEventRowFragment, AuditOutcome } from '../gql/graphql';

export interface AuditFilter {
  machine?: string;
  actor?: string;
  outcome?: AuditOutcome;
}

// useAuditTrail reads the trail page by page (older pages appended) and puts events
// recorded since at the top as they arrive.
export function useAuditTrail(filter: AuditFilter, pageSize = 50) {
  const vars = { machine: filter.machine || null, actor: filter.actor || null, outcome: filter.outcome || null };
  const key = JSON.stringify(vars);
  const [after, setAfter] = useState<string | null>(null);
  const [older, setOlder] = useState<AuditEventRowFragment[]>([]);
  const [live, setLive] = useState<AuditEventRowFragment[]>([]);
  useEffect(() => {
    setAfter(null);
    setOlder([]);
    setLive([]);
  }, [key]);
  const [page] = useQuery({ query: AuditEventsQuery, variables: { ...vars, first: pageSize, after }, requestPolicy: 'network-only' });
  const [first] = useQuery({ query: AuditEventsQuery, variables: { ...vars, first: pageSize, after: null }, requestPolicy: 'cache-and-network' });
  // The live events start after the newest event of the first page read for this filter
  // (the server sends those recorded since first), so an event recorded between that read
  // and the subscription's start is not lost: a filter changed just before a step was seen
  // to miss it (CI run 40).
  const [since, setSince] = useState<{ key: string; id: string } | null>(null);
  useEffect(() => {
    if (first.data && !first.stale && since?.key !== key) setSince({ key, id: first.data.auditEvents.edges[0]?.node.id ?? '0' });
  }, [first.data, first.stale, key, since]);
  const [sub] = useSubscription({ query: AuditEventRecordedSubscription, variables: { ...vars, after: since?.id ?? null }, pause: since?.key !== key });
  const ev = sub.data?.auditEventRecorded;
  useEffect(() => {
    if (ev) setLive((l) => (l.some((x) => x.id === ev.id) ? l : [ev, ...l]));
  }, [ev]);
  useEffect(() => {
    if (after && page.data) setOlder((o) => [...o, ...page.data!.auditEvents.edges.map((e) => e.node).filter((n) => !o.some((x) => x.id === n.id))]);
  }, [page.data, after]);
  const firstEvents = first.data?.auditEvents.edges.map((e) => e.node) ?? [];
  const events = useMemo(() => {
    const seen = new Set<string>();
    const out: AuditEventRowFragment[] = [];
    for (const e of [...live, ...firstEvents, ...older]) {
      if (!seen.has(e.id)) {
        seen.add(e.id);
        out.push(e);
      }
    }
    return out.sort((a, b) => Number(b.id) - Number(a.id));
  }, [live, firstEvents, older]);
  const info = (after ? page.data : first.data)?.auditEvents.pageInfo;
  return {
    events,
    loading: !first.data && first.fetching,
    error: first.error ?? page.error,
    hasMore: !!info?.hasNextPage,
    loadMore: () => info?.endCursor && setAfter(info.endCursor),
    loadingMore: !!after && page.fetching,
  };
}

// checkpointPoll is how often the checkpoint and the trail's state are read again.
const checkpointPoll = 30_000;

// useAuditCheckpoint is the latest signed checkpoint and whether the trail verifies up to
// it, read again every 30 s.
export function useAuditCheckpoint() {
  const [res, again] = useQuery({ query: AuditCheckpointQuery, requestPolicy: 'cache-and-network' });
  useEffect(() => {
    const t = setInterval(() => again({ requestPolicy: 'network-only' }), checkpointPoll);
    return () => clearInterval(t);
  }, [again]);
  return res;
}

// useAuditTrailState is the server's latest check of the audit trail (every page says when
// it does not verify), read again every 30 s.
export function useAuditTrailState() {
  const [res, again] = useQuery({ query: AuditTrailQuery, requestPolicy: 'network-only' });
  useEffect(() => {
    const t = setInterval(() => again({ requestPolicy: 'network-only' }), checkpointPoll);
    return () => clearInterval(t);
  }, [again]);
  return res.data?.auditTrail;
}

export interface AuditVars {
  machine: string | null;
  actor: string | null;
  outcome: AuditOutcome | null;
}

// useAuditReads are one-off reads of the trail, as it is at the moment they are asked:
// a page of events (newest first), and an event's inclusion proof in the latest checkpoint.
export function useAuditReads() {
  const client = useClient();
  return useMemo(
    () => ({
      events: (vars: AuditVars, first: number, after: string | null) =>
        client.query(AuditEventsQuery, { ...vars, first, after }, { requestPolicy: 'network-only' }).toPromise(),
      proof: (id: string) => client.query(AuditProofQuery, { id }, { requestPolicy: 'network-only' }).toPromise(),
    }),
    [client],
  );
}
