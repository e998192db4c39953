// Audit: the trail newest first, in pages, filtered by machine, actor and outcome (kept in
// the URL), with new events arriving live at the top.
import { useEffect, useMemo, useState } from 'react';
import { useQuery, useSubscription } from 'urql';
import { AuditEventRecordedSubscription, AuditEventsQuery } from '../api/operations';
import { problemsOf } from '../lib/errors';
import { Link, machinePath, useSearch } from '../router';
import { Loading, Problems, Time } from '../components/ui';
import type { AuditEventRowFragment, AuditOutcome } from '../gql/graphql';

export interface AuditFilter {
  machine?: string;
  actor?: string;
  outcome?: AuditOutcome;
}

const outcomeSymbols: Record<AuditOutcome, string> = { SUCCEEDED: '✓', FAILED: '✕', REFUSED: '⊘', PLANNED: '◌' };

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
  const [sub] = useSubscription({ query: AuditEventRecordedSubscription, variables: vars });
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

// highlight is an event to point out (a toast's link names it): marked and scrolled to.
export function AuditTable({ trail, showMachine = true, highlight }: { trail: ReturnType<typeof useAuditTrail>; showMachine?: boolean; highlight?: string | null }) {
  const found = !!highlight && trail.events.some((e) => e.id === highlight);
  useEffect(() => {
    if (found) document.getElementById('audit-' + highlight)?.scrollIntoView({ block: 'center' });
  }, [found, highlight]);
  if (trail.loading) return <Loading what="the audit trail" />;
  return (
    <>
      <Problems problems={problemsOf(trail.error)} />
      {trail.events.length === 0 ? (
        <p className="muted">No audited action yet.</p>
      ) : (
        <div className="table-wrap">
          <table className="table audit-table">
            <caption className="visually-hidden">Audited actions, newest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Actor</th>
                <th scope="col">Action</th>
                {showMachine ? <th scope="col">Machine</th> : null}
                <th scope="col">Outcome</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {trail.events.map((e) => (
                <tr key={e.id} id={'audit-' + e.id} data-audit-action={e.action} data-outcome={e.outcome} className={e.id === highlight ? 'highlight' : undefined} aria-current={e.id === highlight ? 'true' : undefined}>
                  <td><Time at={e.at} /></td>
                  <td>{e.actor}</td>
                  <td><code>{e.action}</code></td>
                  {showMachine ? <td>{e.machine ? <Link to={machinePath(e.machine)}>{e.machine}</Link> : '—'}</td> : null}
                  <td className={`outcome outcome-${e.outcome.toLowerCase()}`}>
                    <span aria-hidden="true">{outcomeSymbols[e.outcome]} </span>
                    {e.outcome.toLowerCase()}
                  </td>
                  <td className="details">
                    {e.error ? <div className="error-text">{e.error}</div> : null}
                    <Params values={e.parameters} />
                    <span className="sub">request {e.requestId}</span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {trail.hasMore ? (
        <button type="button" className="btn btn-plain" onClick={trail.loadMore} disabled={trail.loadingMore}>
          {trail.loadingMore ? 'Loading…' : 'Load older events'}
        </button>
      ) : null}
    </>
  );
}

function Params({ values }: { values: Record<string, unknown> }) {
  const input = (values.input ?? values) as Record<string, unknown>;
  const entries = typeof input === 'object' && input ? Object.entries(input) : [];
  if (entries.length === 0) return null;
  return <span className="params">{entries.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ')}</span>;
}

export function AuditPage() {
  const [params, setParams] = useSearch();
  const filter: AuditFilter = {
    machine: params.get('machine') ?? '',
    actor: params.get('actor') ?? '',
    outcome: (['SUCCEEDED', 'FAILED', 'REFUSED', 'PLANNED'].includes(params.get('outcome') ?? '') ? params.get('outcome') : undefined) as AuditOutcome | undefined,
  };
  const [draft, setDraft] = useState({ machine: filter.machine ?? '', actor: filter.actor ?? '' });
  const trail = useAuditTrail(filter);
  const set = (k: string, v: string) => {
    const p = new URLSearchParams(params);
    if (v) p.set(k, v);
    else p.delete(k);
    setParams(p);
  };
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit</h1>
      <p className="hint">Every change, allowed or refused, newest first. New events appear at the top as they are recorded.</p>
      <form
        className="filters"
        role="search"
        aria-label="Filter the audit trail"
        onSubmit={(e) => {
          e.preventDefault();
          const p = new URLSearchParams(params);
          for (const [k, v] of Object.entries(draft)) {
            if (v.trim()) p.set(k, v.trim());
            else p.delete(k);
          }
          setParams(p);
        }}
      >
        <label>
          Machine
          <input className="input" value={draft.machine} onChange={(e) => setDraft({ ...draft, machine: e.target.value })} name="machine" />
        </label>
        <label>
          Actor
          <input className="input" value={draft.actor} onChange={(e) => setDraft({ ...draft, actor: e.target.value })} name="actor" />
        </label>
        <label>
          Outcome
          <select className="input" value={filter.outcome ?? ''} onChange={(e) => set('outcome', e.target.value)}>
            <option value="">Any</option>
            <option value="SUCCEEDED">Succeeded</option>
            <option value="FAILED">Failed</option>
            <option value="REFUSED">Refused</option>
            <option value="PLANNED">Planned (dry runs)</option>
          </select>
        </label>
        <button type="submit" className="btn btn-plain">Apply</button>
      </form>
      <AuditTable trail={trail} highlight={params.get('event')} />
    </section>
  );
}
