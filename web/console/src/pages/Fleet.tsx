// Fleet: one row per machine (MAAS × Apelora record × Incus member), filtered, searched and
// sorted with the filter kept in the URL, live without reloads.
import { memo, useCallback, useDeferredValue, useEffect, useMemo, useRef, useState } from 'react';
import { useFleet } from '../hooks/fleet';
import { defaultPageSize, noCluster, filterRows, sortRows, filterParams, pageOf, pageSizes, parseFilter, parsePaging, provisionerOf, type FleetFilter, type Paging, type Row, type SortKey } from '../lib/fleet';
import { phaseInfo, phaseOrder, warningLabels } from '../lib/phases';
import { manageReason } from '../lib/actions';
import { Link, machinePath, useSearch } from '../router';
import { useViewer } from '../viewer';
import { Banner, Loading, MemberStatusBadge, PhaseBadge, Problems, ReasonButton } from '../components/ui';
import { problemsOf } from '../lib/errors';
import { hiddenColumnsText, parseHiddenColumns, type FleetColumn } from '../lib/display';
import { RegisterDialog, type RegisterTarget } from '../actions/RegisterDialog';
import { BulkDialog } from '../actions/BulkDialog';
import { allMatching, bulkSteps, defaultStep, freeze, ranged, type BulkStep, type BulkTarget } from '../lib/bulk';
import type { FleetQuery as FleetData, WarningCode } from '../gql/graphql';
import { inConsoleWords } from '../lib/words';

export function SourceBanners({ sources }: { sources: FleetData['fleet']['sources'] | undefined }) {
  if (!sources) return null;
  // With registered clusters, one banner per cluster that does not answer: only its rows
  // are Unknown, the other clusters' are whole.
  const down = (sources.clusters ?? []).filter((c) => !c.status.available);
  const perCluster = (sources.clusters ?? []).length > 0;
  return (
    <>
      {perCluster
        ? down.map((c) => (
            <Banner key={c.cluster.name} tone="negative" title={`Incus cluster ${c.cluster.name} cannot be asked`}>
              <span data-source="incus" data-cluster-source={c.cluster.name}>{inConsoleWords(c.status.message ?? '')}</span>
              <br />
              Its machines show as Unknown (filter by cluster {c.cluster.name} to see them), and changes to them are refused until it answers; the other clusters' rows are whole.
            </Banner>
          ))
        : null}
      {!perCluster && !sources.incus.available ? (
        <Banner tone={sources.incus.configured ? 'negative' : 'caution'} title={sources.incus.configured ? 'Incus cannot be asked' : 'Incus is not configured'}>
          <span data-source="incus">{inConsoleWords(sources.incus.message ?? '')}</span>
          <br />
          Phases show as Unknown, and changes are refused until Incus answers.
        </Banner>
      ) : null}
      {sources.maas.configured && !sources.maas.available ? (
        <Banner tone="caution" title="MAAS not answering">
          <span data-source="maas" data-since={sources.maas.since ?? undefined}>{inConsoleWords(sources.maas.message ?? '')}</span>
          <br />
          The rows show what Incus and Apelora's records know; MAAS's columns fill in when MAAS answers. MAAS steps are refused until then.
        </Banner>
      ) : null}
    </>
  );
}

// clusterNames are the cluster filter's choices: the registered clusters, and the one the
// URL names while the fleet does not list it (yet).
function clusterNames(sources: FleetData['fleet']['sources'] | undefined, chosen: string): string[] {
  const names = (sources?.clusters ?? []).map((c) => c.cluster.name);
  if (chosen && chosen !== noCluster && !names.includes(chosen)) names.push(chosen);
  return names;
}

// StreamState says when the rows shown may be behind: the socket is down (graphql-ws
// reconnects on its own, and the server then sends the whole fleet again) or a change was
// missed (the page subscribes again).
export function StreamState({ live, shown }: { live: boolean; shown: boolean }) {
  if (live || !shown) return null;
  return (
    <Banner tone="caution" title="Live updates paused">
      <span data-fleet-stream="disconnected">The connection to the server is lost; reconnecting. The rows below may be out of date until it is back.</span>
    </Banner>
  );
}

// firstRows is how many rows of a page a keystroke paints before the rest: more than a
// tall window shows.
const firstRows = 25;

const columns: { id: FleetColumn | 'name'; key: SortKey | null; label: string }[] = [
  { id: 'name', key: 'name', label: 'Name' },
  { id: 'phase', key: 'phase', label: 'Phase' },
  { id: 'cluster', key: 'cluster', label: 'Cluster' },
  { id: 'warnings', key: null, label: 'Warnings' },
  { id: 'provisioner', key: 'provisioner', label: 'Provisioner' },
  { id: 'member', key: 'member', label: 'Member' },
  { id: 'maas', key: 'maas', label: 'MAAS status' },
  { id: 'power', key: 'power', label: 'Power' },
  { id: 'testing', key: 'testing', label: 'Hardware tests' },
  { id: 'actions', key: null, label: 'Actions' },
];

const columnsKey = 'apelora.fleet.hiddenColumns';

// useHiddenColumns is the administrator's choice of columns, kept in localStorage (a
// preference for this browser, not part of a shared filter).
function useHiddenColumns(): [ReadonlySet<FleetColumn>, (c: FleetColumn, shown: boolean) => void] {
  const [hidden, setHidden] = useState<ReadonlySet<FleetColumn>>(() => {
    try {
      return parseHiddenColumns(localStorage.getItem(columnsKey));
    } catch {
      return new Set();
    }
  });
  const toggle = useCallback((c: FleetColumn, shown: boolean) => {
    setHidden((h) => {
      const next = new Set(h);
      if (shown) next.delete(c);
      else next.add(c);
      try {
        const text = hiddenColumnsText(next);
        if (text) localStorage.setItem(columnsKey, text);
        else localStorage.removeItem(columnsKey);
      } catch {
        // Storage refused: the choice lasts for this page only.
      }
      return next;
    });
  }, []);
  return [hidden, toggle];
}

function ColumnChooser({ hidden, toggle }: { hidden: ReadonlySet<FleetColumn>; toggle(c: FleetColumn, shown: boolean): void }) {
  // The checkboxes exist only while the chooser is open, so they never stand beside the
  // filters' own fields (Warning, Provisioner…) for assistive technology.
  const [open, setOpen] = useState(false);
  return (
    <details
      className="columns-chooser"
      data-columns-chooser
      open={open}
      onToggle={(e) => setOpen(e.currentTarget.open)}
      onKeyDown={(e) => {
        // Escape closes the chooser and returns to its button, as a menu would.
        if (e.key !== 'Escape' || !open) return;
        setOpen(false);
        e.currentTarget.querySelector('summary')?.focus();
      }}
    >
      <summary className="btn btn-plain btn-small">Columns{hidden.size ? ` (${hidden.size} hidden)` : ''}</summary>
      {open ? (
        <fieldset>
          <legend>Columns shown</legend>
          {columns.map((c) =>
            c.id === 'name' ? null : (
              <label key={c.id} className="check">
                <input type="checkbox" checked={!hidden.has(c.id)} onChange={(e) => toggle(c.id as FleetColumn, e.target.checked)} data-column={c.id} /> {c.label}
              </label>
            ),
          )}
        </fieldset>
      ) : null}
    </details>
  );
}

export function FleetPage() {
  const { res, live } = useFleet();
  const viewer = useViewer();
  const [params, setParams] = useSearch();
  const filter = useMemo(() => parseFilter(params), [params]);
  const [register, setRegister] = useState<RegisterTarget | null>(null);

  const rows = res.data?.fleet.machines;
  const paging = parsePaging(params);
  // A keystroke filters rows sorted once per fleet and order (not sorted again), and paints
  // the count and the first rows of the page at once; the rest of the page follows in a
  // deferred render (below the fold at any window height), which the next keystroke may
  // interrupt. Mounting a page of 100 rows was most of a keystroke's time. Measured by
  // TestConsoleFleetBeforeMAAS (bench/README.md).
  const sorted = useMemo(() => (rows ? sortRows(rows, filter.sort, filter.desc) : []), [rows, filter.sort, filter.desc]);
  const matching = useMemo(() => filterRows(sorted, filter), [sorted, filter]);
  const shown = useMemo(() => pageOf(matching, paging), [matching, paging.page, paging.size]);
  const settled = useDeferredValue(filter) === filter;
  const painted = settled ? shown.rows : shown.rows.slice(0, firstRows);
  // A new filter starts at its first page; the page size stays.
  const update = (patch: Partial<FleetFilter>) => {
    const p = filterParams({ ...filter, ...patch });
    if (paging.size !== defaultPageSize) p.set('size', String(paging.size));
    setParams(p);
  };
  const goPage = (next: Partial<Paging>) => {
    const p = new URLSearchParams(params);
    const to = { ...paging, ...next };
    if (to.page > 1) p.set('page', String(to.page));
    else p.delete('page');
    if (to.size !== defaultPageSize) p.set('size', String(to.size));
    else p.delete('size');
    setParams(p);
  };
  const sortBy = (k: SortKey) => update(filter.sort === k ? { desc: !filter.desc } : { sort: k, desc: false });
  const perm = manageReason(viewer);
  const onRegister = useCallback((t: RegisterTarget) => setRegister(t), []);
  const [hidden, toggleColumn] = useHiddenColumns();
  const shownColumns = columns.filter((c) => c.id === 'name' || !hidden.has(c.id));
  const clearFilters = () => setParams(new URLSearchParams());

  // Selection for bulk steps: by name, across pages and filters; shift-click selects the
  // range from the last click in the order shown. Confirming freezes it to those names.
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const anchor = useRef<string | null>(null);
  const shownNames = useRef<string[]>([]);
  shownNames.current = shown.rows.map((r) => r.name);
  const onSelect = useCallback((name: string, on: boolean, range: boolean) => {
    // Read now: the updater runs later, after the anchor has moved to this row.
    const from = range ? anchor.current : null;
    const order = shownNames.current;
    setSelected((sel) => ranged(sel, order, from, name, on));
    anchor.current = name;
  }, []);
  const matchingNames = useMemo(() => matching.map((r) => r.name), [matching]);
  const allSelected = matchingNames.length > 0 && matchingNames.every((n) => selected.has(n));
  // The step offered first is the first the selection allows; once chosen, it stays.
  const [chosenStep, setBulkStep] = useState<BulkStep | null>(null);
  const selectedRows = useMemo(() => (rows ?? []).filter((r) => selected.has(r.name)), [rows, selected]);
  const bulkStep = chosenStep ?? defaultStep(selectedRows);
  useEffect(() => {
    if (selected.size === 0) setBulkStep(null);
  }, [selected.size]);
  const [bulk, setBulk] = useState<{ step: BulkStep; targets: BulkTarget[] } | null>(null);
  const hiddenSelected = useMemo(() => {
    const m = new Set(matchingNames);
    return [...selected].filter((n) => !m.has(n)).length;
  }, [selected, matchingNames]);

  return (
    <section aria-labelledby="fleet-title">
      <div className="page-head">
        <h1 id="fleet-title">Fleet</h1>
        <ReasonButton variant="primary" reason={perm} onClick={() => setRegister({ kind: 'manual' })}>
          Register a machine
        </ReasonButton>
      </div>
      <StreamState live={live} shown={!!res.data} />
      <SourceBanners sources={res.data?.fleet.sources} />
      <Problems problems={problemsOf(res.error)} />
      <form className="filters" role="search" aria-label="Filter machines" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input
            className="input"
            type="search"
            value={filter.q}
            placeholder="name, system id or hardware UUID (press /)"
            aria-keyshortcuts="/"
            onChange={(e) => update({ q: e.target.value })}
            data-fleet-search
          />
        </label>
        <label>
          Phase
          <select className="input" value={filter.phases[0] ?? ''} onChange={(e) => update({ phases: e.target.value ? [e.target.value as Row['phase']] : [] })}>
            <option value="">Any phase</option>
            {phaseOrder.map((p) => (
              <option key={p} value={p}>{phaseInfo[p].label}</option>
            ))}
          </select>
        </label>
        <label>
          Warning
          <select className="input" value={filter.warning} onChange={(e) => update({ warning: e.target.value as FleetFilter['warning'] })}>
            <option value="">Any</option>
            <option value="any">With a warning</option>
            <option value="none">Without warnings</option>
            {(Object.keys(warningLabels) as WarningCode[]).map((w) => (
              <option key={w} value={w}>{warningLabels[w]}</option>
            ))}
          </select>
        </label>
        <label>
          Cluster
          <select className="input" value={filter.cluster} onChange={(e) => update({ cluster: e.target.value })} data-fleet-cluster>
            <option value="">Any</option>
            {clusterNames(res.data?.fleet.sources, filter.cluster).map((n) => (
              <option key={n} value={n}>{n}</option>
            ))}
            <option value={noCluster}>None (no cluster)</option>
          </select>
        </label>
        <label>
          Provisioner
          <select className="input" value={filter.provisioner} onChange={(e) => update({ provisioner: e.target.value as FleetFilter['provisioner'] })}>
            <option value="">Any</option>
            <option value="MAAS">MAAS</option>
            <option value="MANUAL">Manual</option>
            <option value="NONE">None (no record)</option>
          </select>
        </label>
        {params.toString() ? (
          <button type="button" className="btn btn-plain" onClick={clearFilters}>
            Clear filters
          </button>
        ) : null}
      </form>
      {!rows ? (
        res.error ? null : <Loading what="the fleet" />
      ) : rows.length === 0 ? (
        <div className="empty">
          <h2>No machines yet</h2>
          <p>Register a server by hand with “Register a machine”, or configure MAAS (APELORA_MAAS_URL) to see the machines it discovered here.</p>
        </div>
      ) : (
        <>
          <div className="table-head">
            <p className="count" role="status" data-fleet-count={matching.length} data-fleet-live={live ? 'yes' : 'no'}>
              {matching.length === rows.length ? `${rows.length} machines` : `${matching.length} of ${rows.length} machines match`}
              {shown.pages > 1 ? ` · page ${shown.page} of ${shown.pages}` : ''}
            </p>
            {selected.size ? (
              <div className="bulk-bar" role="group" aria-label="Selected machines" data-bulk-bar={selected.size}>
                <span>
                  <strong>{selected.size}</strong> selected{hiddenSelected ? ` (${hiddenSelected} not matching the filter)` : ''}
                </span>
                <label>
                  Step{' '}
                  <select className="input input-small" value={bulkStep} onChange={(e) => setBulkStep(e.target.value as BulkStep)} data-bulk-step>
                    {bulkSteps.map((b) => (
                      <option key={b.step} value={b.step}>{b.label}</option>
                    ))}
                  </select>
                </label>
                <ReasonButton variant="primary" className="btn-small" reason={perm} onClick={() => setBulk({ step: bulkStep, targets: freeze(selected, rows) })} data-bulk-open>
                  Take action…
                </ReasonButton>
                <button type="button" className="btn btn-plain btn-small" onClick={() => setSelected(new Set())} data-bulk-clear>
                  Clear selection
                </button>
              </div>
            ) : null}
            <div className="table-tools">
              <ColumnChooser hidden={hidden} toggle={toggleColumn} />
              <Pager page={shown.page} pages={shown.pages} size={paging.size} go={goPage} />
            </div>
          </div>
          {matching.length === 0 ? (
            <div className="empty" data-fleet-empty>
              <h2>No machine matches this filter</h2>
              <p>None of the {rows.length} machines matches{filter.q ? ` “${filter.q}”` : ''} with the filters chosen above.</p>
              <button type="button" className="btn btn-primary" onClick={clearFilters}>
                Clear filters
              </button>
            </div>
          ) : (
            <div className="table-wrap">
              <table className="table fleet-table">
                <caption className="visually-hidden">Machines: MAAS, Apelora record and Incus member side by side</caption>
                <thead>
                  <tr>
                    <th scope="col" className="select-col">
                      <input
                        type="checkbox"
                        checked={allSelected}
                        onChange={(e) => setSelected((sel) => allMatching(sel, matchingNames, e.target.checked))}
                        aria-label={`Select all ${matchingNames.length} machines matching the filter`}
                        title={`Select all ${matchingNames.length} matching, on every page`}
                        data-select-all
                      />
                    </th>
                    {shownColumns.map((c) => (
                      <th key={c.id} scope="col" aria-sort={c.key && filter.sort === c.key ? (filter.desc ? 'descending' : 'ascending') : undefined}>
                        {c.key ? (
                          <button type="button" className="sort" onClick={() => sortBy(c.key!)}>
                            {c.label}
                            <span aria-hidden="true">{filter.sort === c.key ? (filter.desc ? ' ▼' : ' ▲') : ''}</span>
                          </button>
                        ) : (
                          c.label
                        )}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {painted.map((r) => (
                    <FleetRowView key={r.name} row={r} perm={perm} onRegister={onRegister} hidden={hidden} selected={selected.has(r.name)} onSelect={onSelect} />
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {shown.pages > 1 ? <Pager page={shown.page} pages={shown.pages} size={paging.size} go={goPage} /> : null}
        </>
      )}
      {register ? <RegisterDialog target={register} onClose={() => setRegister(null)} /> : null}
      {bulk ? <BulkDialog step={bulk.step} targets={bulk.targets} onClose={() => setBulk(null)} /> : null}
    </section>
  );
}

const FleetRowView = memo(function FleetRowView({ row: r, perm, onRegister, hidden, selected, onSelect }: {
  row: Row; perm?: string; onRegister(t: RegisterTarget): void; hidden: ReadonlySet<FleetColumn>; selected: boolean; onSelect(name: string, on: boolean, range: boolean): void;
}) {
  const m = r.member;
  const prov = provisionerOf(r);
  const show = (c: FleetColumn) => !hidden.has(c);
  // A machine registered from MAAS while MAAS does not answer: its MAAS columns are not
  // empty but unknown until MAAS answers.
  const noMAAS = r.maas ? null : r.warnings.some((w) => w.code === 'MAAS_UNAVAILABLE') ? <span className="muted" data-maas-missing>MAAS not answering</span> : <span className="muted">—</span>;
  return (
    <tr data-machine={r.name} data-phase={r.phase}>
      <td className="select-col">
        <input
          type="checkbox"
          checked={selected}
          onChange={() => {}}
          onClick={(e) => onSelect(r.name, e.currentTarget.checked, e.shiftKey)}
          aria-label={`Select ${r.name}`}
          data-select={r.name}
        />
      </td>
      <th scope="row">
        <Link to={machinePath(r.name)}>{r.name}</Link>
      </th>
      {show('phase') ? <td><PhaseBadge phase={r.phase} /></td> : null}
      {show('cluster') ? <td data-cluster={r.cluster?.name ?? ''}>{r.cluster ? r.cluster.name : <span className="muted">—</span>}</td> : null}
      {show('warnings') ? <td>
        {r.warnings.length === 0 ? (
          <span className="muted">—</span>
        ) : (
          <ul className="warnings">
            {r.warnings.map((w) => (
              <li key={w.code} title={inConsoleWords(w.message)}>
                <span aria-hidden="true">! </span>
                {warningLabels[w.code]}
              </li>
            ))}
          </ul>
        )}
      </td> : null}
      {show('provisioner') ? <td>{prov === 'NONE' ? <span className="muted">none</span> : prov === 'MAAS' ? 'MAAS' : 'Manual'}</td> : null}
      {show('member') ? <td>
        {m ? (
          <div className="member-cell">
            <MemberStatusBadge status={m.status} />
            {m.held ? <span className="tag">held</span> : null}
            {m.roles.length ? <span className="sub">roles: {m.roles.join(', ')}</span> : null}
            {m.failureDomain ? <span className="sub">domain: {m.failureDomain}</span> : null}
          </div>
        ) : r.pendingJoinToken ? (
          <span className="muted">join token issued</span>
        ) : (
          <span className="muted">not a member</span>
        )}
      </td> : null}
      {show('maas') ? <td>{r.maas ? r.maas.status : noMAAS}</td> : null}
      {show('power') ? <td>{r.maas ? r.maas.powerState : noMAAS}</td> : null}
      {show('testing') ? <td>{r.maas ? r.maas.testingStatus : noMAAS}</td> : null}
      {show('actions') ? <td>
        {r.phase === 'DISCOVERED' && r.maas ? (
          <ReasonButton reason={perm} className="btn-small" onClick={() => onRegister({ kind: 'maas', systemId: r.maas!.systemId, hostname: r.maas!.hostname, hardwareUuid: r.maas!.hardwareUuid })} data-action="register">
            Register
          </ReasonButton>
        ) : (
          <Link to={machinePath(r.name)} className="btn btn-plain btn-small" aria-label={`Open ${r.name}`}>
            Open
          </Link>
        )}
      </td> : null}
    </tr>
  );
});

function Pager({ page, pages, size, go }: { page: number; pages: number; size: number; go(p: Partial<Paging>): void }) {
  return (
    <nav className="pager" aria-label="Pages of machines">
      {pages > 1 ? (
        <>
          <button type="button" className="btn btn-plain btn-small" disabled={page <= 1} onClick={() => go({ page: page - 1 })}>
            ‹ Previous
          </button>
          <span>
            Page {page} of {pages}
          </span>
          <button type="button" className="btn btn-plain btn-small" disabled={page >= pages} onClick={() => go({ page: page + 1 })}>
            Next ›
          </button>
        </>
      ) : null}
      <label>
        Rows per page{' '}
        <select className="input input-small" value={size} onChange={(e) => go({ size: Number(e.target.value), page: 1 })}>
          {pageSizes.map((n) => (
            <option key={n} value={n}>{n}</option>
          ))}
        </select>
      </label>
    </nav>
  );
}
