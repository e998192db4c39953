// Audit: the trail newest first, in pages, filtered by machine, actor and outcome as they
// are typed (kept in the URL), with new events arriving live at the top; long values
// clipped, the current filter exported as JSON Lines or CSV. The latest signed checkpoint
// is shown above the trail, and an event's inclusion proof on request, checked here.
import { useEffect, useRef, useState } from 'react';
import { clipText, csvHeader, csvLine, exportName, jsonLine, paramText } from '../lib/audit';
import { useAuditCheckpoint, useAuditReads, useAuditTrail, type AuditFilter, type AuditVars } from '../hooks/audit';
import { browserSHA256, checkInclusion } from '../lib/auditproof';
import { problemsOf, sessionLost } from '../lib/errors';
import { Link, machinePath, useSearch } from '../router';
import { Loading, Problems, Time } from '../components/ui';
import type { AuditEventsQuery as AuditEventsQueryResult, AuditOutcome } from '../gql/graphql';
import { outcomeMeaning } from '../lib/bulk';

// STARTED: a step's intent, recorded before it was sent to Incus or MAAS; its outcome is a
// later event whose details.intent names it.
const outcomeSymbols: Record<AuditOutcome, string> = { SUCCEEDED: '✓', FAILED: '✕', REFUSED: '⊘', STARTED: '▸', PLANNED: '◌' };

type AuditReads = ReturnType<typeof useAuditReads>;

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
                  <td className="clip-cell"><Clip text={e.actor} max={40} /></td>
                  <td className="clip-cell"><code><Clip text={e.action} max={40} /></code></td>
                  {showMachine ? <td className="clip-cell">{e.machine ? <Link to={machinePath(e.machine)}><Clip text={e.machine} max={40} plain /></Link> : '—'}</td> : null}
                  <td className={`outcome outcome-${e.outcome.toLowerCase()}`}>
                    <span aria-hidden="true">{outcomeSymbols[e.outcome]} </span>
                    {e.outcome.toLowerCase()}
                  </td>
                  <td className="details">
                    {e.error ? <div className="error-text"><Clip text={e.error} max={200} /></div> : null}
                    <Params values={e.parameters} />
                    <span className="sub">request {e.requestId}</span>
                    <ProofButton id={e.id} />
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

// CheckpointLine states the latest signed checkpoint: how many events the trail held when
// it was signed, and when. Read again every 30 s and whenever asked.
export function CheckpointLine() {
  const res = useAuditCheckpoint();
  const cp = res.data?.auditCheckpoint;
  // While the server's check finds a problem (the banner above says what), the checkpoint
  // is still the key's, but the trail is not verified up to it.
  const trusted = res.data?.auditTrail.verifies !== false;
  // A lost session is the page's to say (the trail's query says it once, and the console
  // returns to sign-in): the line does not repeat it.
  if (res.error) return sessionLost(res.error) ? null : <Problems problems={problemsOf(res.error)} />;
  if (!res.data) return null;
  return (
    <div className="checkpoint" data-checkpoint={cp?.treeSize ?? 0} aria-live="polite">
      {cp ? (
        <>
          {trusted ? (
            <>
              <span aria-hidden="true">✓ </span>Verified up to checkpoint {cp.treeSize} at <Time at={cp.at} />
            </>
          ) : (
            <>
              <span aria-hidden="true">✕ </span>Checkpoint {cp.treeSize} signed at <Time at={cp.at} />, but the trail does not verify
            </>
          )}
          <details>
            <summary>What this means</summary>
            <p className="hint">
              The first {cp.treeSize} events are the leaves of a Merkle tree whose root, {cp.rootHash}, the server signed with its audit key.
              An event changed, removed or inserted in the database afterwards no longer fits: <code>apelora audit verify</code> names the first one.
              Public key: <code className="break">{cp.verifierKey}</code>
            </p>
          </details>
        </>
      ) : (
        <span className="muted">No checkpoint signed yet: the first one comes within a minute of the first event.</span>
      )}
    </div>
  );
}

type ProofState =
  | { state: 'idle' }
  | { state: 'asking' }
  | { state: 'shown'; leafIndex: number; treeSize: number; at: string; hashes: string[]; checked: boolean | null }
  | { state: 'failed'; message: string };

// ProofButton asks for an event's inclusion proof in the latest checkpoint and checks it
// in the browser (where WebCrypto is available: HTTPS or localhost).
function ProofButton({ id }: { id: string }) {
  const reads = useAuditReads();
  const [p, setP] = useState<ProofState>({ state: 'idle' });
  const ask = async () => {
    setP({ state: 'asking' });
    const res = await reads.proof(id);
    const proof = res.data?.auditProof;
    if (res.error || !proof) {
      setP({ state: 'failed', message: problemsOf(res.error).map((x) => x.message).join(' ') || 'no proof' });
      return;
    }
    const digest = browserSHA256();
    const checked = digest
      ? await checkInclusion({ leafIndex: proof.leafIndex, treeSize: proof.checkpoint.treeSize, leafHash: proof.leafHash, hashes: proof.hashes, rootHash: proof.checkpoint.rootHash }, digest)
      : null;
    setP({ state: 'shown', leafIndex: proof.leafIndex, treeSize: proof.checkpoint.treeSize, at: proof.checkpoint.at, hashes: proof.hashes, checked });
  };
  if (p.state === 'idle' || p.state === 'asking') {
    return (
      <button type="button" className="btn-link proof-button" onClick={ask} disabled={p.state === 'asking'} data-proof={id}>
        {p.state === 'asking' ? 'Proving…' : 'Proof'}
      </button>
    );
  }
  if (p.state === 'failed') return <div className="proof error-text" data-proof-result="failed">{p.message}</div>;
  return (
    <details className="proof" open data-proof-result={p.checked === null ? 'unchecked' : p.checked ? 'checked' : 'mismatch'}>
      <summary>
        {p.checked === false ? '✕ ' : p.checked ? '✓ ' : ''}Leaf {p.leafIndex} of checkpoint {p.treeSize} (<Time at={p.at} />):{' '}
        {p.checked === null
          ? 'proof shown; this browser cannot check it (WebCrypto needs HTTPS)'
          : p.checked
            ? 'the proof leads to the signed root, checked in this browser'
            : 'the proof does NOT lead to the signed root: run apelora audit verify'}
      </summary>
      <ol className="proof-hashes">
        {p.hashes.map((h, i) => <li key={i}><code>{h}</code></li>)}
      </ol>
    </details>
  );
}

function Params({ values }: { values: Record<string, unknown> }) {
  const text = paramText(values);
  if (!text) return null;
  return <span className="params"><Clip text={text} max={200} /></span>;
}

// Clip shows a value's start; a longer value keeps its length and a button that shows it
// whole (plain: no button, for a value inside a link).
function Clip({ text, max, plain = false }: { text: string; max: number; plain?: boolean }) {
  const [whole, setWhole] = useState(false);
  const c = clipText(text, max);
  if (!c.clipped) return <>{text}</>;
  if (plain) return <span title={`${c.length} characters`}>{c.shown}</span>;
  return (
    <span className="clip">
      {whole ? text : c.shown}{' '}
      <button type="button" className="btn-link" aria-expanded={whole} onClick={() => setWhole(!whole)}>
        {whole ? 'show less' : `show all ${c.length} characters`}
      </button>
    </span>
  );
}

// exportTrail pages through the filter's events (oldest pages last, as listed) and
// returns them as one file's text.
async function exportTrail(reads: AuditReads, vars: AuditVars, format: 'jsonl' | 'csv', progress: (n: number) => void, cancelled: () => boolean): Promise<string> {
  const parts: string[] = format === 'csv' ? [csvHeader] : [];
  let after: string | null = null;
  let n = 0;
  for (;;) {
    const res = await reads.events(vars, 500, after);
    if (res.error) throw res.error;
    const conn: AuditEventsQueryResult['auditEvents'] = res.data!.auditEvents;
    for (const edge of conn.edges) {
      parts.push(format === 'csv' ? csvLine(edge.node) : jsonLine(edge.node));
    }
    n += conn.edges.length;
    progress(n);
    if (cancelled() || !conn.pageInfo.hasNextPage || !conn.pageInfo.endCursor) break;
    after = conn.pageInfo.endCursor;
  }
  return parts.join('');
}

function ExportButtons({ filter }: { filter: AuditFilter }) {
  const reads = useAuditReads();
  const [state, setState] = useState<{ format?: string; count: number; error?: string }>({ count: 0 });
  const cancel = useRef(false);
  useEffect(() => () => { cancel.current = true; }, []);
  const run = async (format: 'jsonl' | 'csv') => {
    cancel.current = false;
    setState({ format, count: 0 });
    try {
      const vars = { machine: filter.machine || null, actor: filter.actor || null, outcome: filter.outcome || null };
      const text = await exportTrail(reads, vars, format, (count) => setState({ format, count }), () => cancel.current);
      if (cancel.current) return;
      const url = URL.createObjectURL(new Blob([text], { type: format === 'csv' ? 'text/csv' : 'application/x-ndjson' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = exportName({ machine: filter.machine, actor: filter.actor, outcome: filter.outcome }, format);
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setState((s) => ({ count: s.count }));
    } catch (e) {
      setState({ count: 0, error: e instanceof Error ? e.message : String(e) });
    }
  };
  const busy = !!state.format;
  return (
    <div className="export" role="group" aria-label="Export the filtered trail">
      <button type="button" className="btn btn-plain" disabled={busy} onClick={() => run('jsonl')} data-export="jsonl">Export JSON Lines</button>
      <button type="button" className="btn btn-plain" disabled={busy} onClick={() => run('csv')} data-export="csv">Export CSV</button>
      <span className="muted" aria-live="polite">
        {busy ? `Exporting… ${state.count} events` : state.error ? `Export failed: ${state.error}` : state.count ? `Exported ${state.count} events` : ''}
      </span>
    </div>
  );
}

// useDebounced calls apply with value once it has stopped changing for ms.
function useDebounced<T>(value: T, ms: number, apply: (v: T) => void) {
  const first = useRef(true);
  const latest = useRef(apply);
  latest.current = apply;
  const key = JSON.stringify(value);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const t = setTimeout(() => latest.current(value), ms);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, ms]);
}

export function AuditPage() {
  const [params, setParams] = useSearch();
  const filter: AuditFilter = {
    machine: params.get('machine') ?? '',
    actor: params.get('actor') ?? '',
    outcome: (['SUCCEEDED', 'FAILED', 'REFUSED', 'STARTED', 'PLANNED'].includes(params.get('outcome') ?? '') ? params.get('outcome') : undefined) as AuditOutcome | undefined,
  };
  const [draft, setDraft] = useState({ machine: filter.machine ?? '', actor: filter.actor ?? '' });
  const trail = useAuditTrail(filter);
  // Filters apply as they are typed, once typing pauses, and stay in the URL.
  useDebounced(draft, 300, (d) => {
    const p = new URLSearchParams(params);
    for (const [k, v] of Object.entries(d)) {
      if (v.trim()) p.set(k, v.trim());
      else p.delete(k);
    }
    if (p.toString() !== params.toString()) setParams(p);
  });
  const set = (k: string, v: string) => {
    const p = new URLSearchParams(params);
    if (v) p.set(k, v);
    else p.delete(k);
    setParams(p);
  };
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit</h1>
      <p className="hint">Every change, allowed or refused, newest first. New events appear at the top as they are recorded. Filters apply as you type.</p>
      <p className="hint" data-outcome-meaning>
        Outcomes — {outcomeMeaning.refused}; {outcomeMeaning.failed}.
      </p>
      <CheckpointLine />
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
            <option value="STARTED">Started (a step's intent)</option>
            <option value="PLANNED">Planned (dry runs of earlier releases)</option>
          </select>
        </label>
      </form>
      <ExportButtons filter={filter} />
      <AuditTable trail={trail} highlight={params.get('event')} />
    </section>
  );
}
