// BulkDialog runs one step for a frozen set of machines: the plan for the set (every
// machine's dry run, summarised: how many would go ahead, the refusals grouped by reason;
// each machine's plan on demand), the count typed again above confirmAbove, then each
// machine's call with the planHash of the plan shown for it (the server refuses a machine
// whose plan changed meanwhile: PLAN_CHANGED, nothing changed), its result shown as it
// arrives, and the failed retried on demand. Every call of one confirmation carries one
// request id, which links the machines' audit events.
import { useEffect, useRef, useState } from 'react';
import { useMutation, type AnyVariables, type OperationContext, type OperationResult } from 'urql';
import { Dialog } from '../components/Dialog';
import { ReasonButton } from '../components/ui';
import { ClusterChooser, useClusterChooser } from '../components/ClusterChooser';
import { CommissionMachineMutation, InstallOperatingSystemMutation, ReleaseMachineMutation, RunHardwareTestsMutation } from '../api/maas';
import { RegisterMachineMutation } from '../api/machines';
import { AdmitMemberMutation } from '../api/members';
import { bounded, bulkSteps, confirmAbove, counts, inFlight, newRequestId, outcomeMeaning, outcomeOfCode, planLine, shownHashes, summarise, type BulkResult, type BulkStep, type BulkTarget } from '../lib/bulk';
import { planOf } from '../lib/plan';
import { codeLabel, reasonText } from '../lib/errors';
import { problemsOf } from '../lib/errors';

// cluster: the install's cluster chosen for the whole set ('' each machine's own).
interface Options { noTests: boolean; series: string; erase: boolean; cluster: string }

function contextWith(requestId: string): Partial<OperationContext> {
  return { fetchOptions: { credentials: 'same-origin', headers: { 'Content-Type': 'application/json', 'X-Request-Id': requestId } } };
}

export function BulkDialog({ step, targets, onClose }: { step: BulkStep; targets: BulkTarget[]; onClose(): void }) {
  const info = bulkSteps.find((s) => s.step === step)!;
  const [, register] = useMutation(RegisterMachineMutation);
  const [, commission] = useMutation(CommissionMachineMutation);
  const [, test] = useMutation(RunHardwareTestsMutation);
  const [, install] = useMutation(InstallOperatingSystemMutation);
  const [, admit] = useMutation(AdmitMemberMutation);
  const [, release] = useMutation(ReleaseMachineMutation);
  const [opts, setOpts] = useState<Options>({ noTests: false, series: 'noble', erase: false, cluster: '' });
  const chooser = useClusterChooser(null, opts.cluster, true);
  const [plan, setPlan] = useState<{ key: string; results: BulkResult[] } | null>(null);
  const [results, setResults] = useState<BulkResult[] | null>(null);
  const [running, setRunning] = useState(false);
  const [requestId, setRequestId] = useState('');
  const [typed, setTyped] = useState('');
  const key = JSON.stringify({ ...opts, cluster: chooser.cluster });

  // call sends one machine's step (or its dry run) and says how it ended.
  const call = async (t: BulkTarget, dryRun: boolean, rid: string, planHash: string | null = null): Promise<BulkResult> => {
    if (info.maas && !t.systemId) return { name: t.name, outcome: 'refused', code: 'FAILED_PRECONDITION', message: `${t.name} is not a MAAS machine: this is a MAAS step` };
    const ctx = contextWith(rid);
    const sid = t.systemId ?? '';
    let res: OperationResult<Record<string, unknown>, AnyVariables>;
    switch (step) {
      case 'register': res = await register({ input: { name: t.name, provisioner: 'MAAS', maasSystemId: sid, dryRun, planHash } }, ctx); break;
      case 'commission': res = await commission({ input: { systemId: sid, tests: opts.noTests ? [] : null, dryRun, planHash } }, ctx); break;
      case 'test': res = await test({ input: { systemId: sid, hostname: t.hostname ?? t.name, dryRun, planHash } }, ctx); break;
      case 'install': res = await install({ input: { name: t.name, series: opts.series.trim(), cluster: chooser.cluster, dryRun, planHash } }, ctx); break;
      case 'admit': res = await admit({ input: { name: t.name, dryRun, planHash } }, ctx); break;
      case 'release': res = await release({ input: { systemId: sid, erase: opts.erase, dryRun, planHash } }, ctx); break;
    }
    const e = res.error?.graphQLErrors[0];
    if (res.error) {
      const code = (e?.extensions?.code as string | undefined) ?? (res.error.networkError ? 'UNAVAILABLE' : undefined);
      return { name: t.name, outcome: outcomeOfCode(code), code, message: problemsOf(res.error)[0]?.message ?? res.error.message };
    }
    if (!dryRun) return { name: t.name, outcome: 'done' };
    const p = planOf(res.data, info.change);
    if (p?.refused) return { name: t.name, outcome: 'refused', code: p.refusals[0]?.code ?? undefined, message: p.refusals[0]?.message ?? 'it would be refused', plan: p };
    return { name: t.name, outcome: 'ahead', plan: p };
  };
  const callRef = useRef(call);
  callRef.current = call;

  // The plan for the set, again after a pause when the options change.
  useEffect(() => {
    let stop = false;
    const timer = setTimeout(async () => {
      const rid = newRequestId();
      const out: BulkResult[] = targets.map((t) => ({ name: t.name, outcome: 'waiting' }));
      await bounded(targets.map((t, i) => [t, i] as const), inFlight, async ([t, i]) => {
        if (!stop) out[i] = await callRef.current(t, true, rid);
      });
      if (!stop) setPlan({ key, results: out });
    }, plan ? 400 : 0);
    return () => {
      stop = true;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, targets]);

  const runFor = async (set: BulkTarget[]) => {
    // The plans shown when confirmed: a retry sends the same ones.
    const hashes = shownHashes(plan?.results ?? []);
    const rid = newRequestId();
    setRequestId(rid);
    setRunning(true);
    const names = new Set(set.map((t) => t.name));
    setResults((prev) => {
      const base = prev ?? targets.map((t) => ({ name: t.name, outcome: 'waiting' as const }));
      return base.map((r) => (names.has(r.name) ? { name: r.name, outcome: 'waiting' } : r));
    });
    await bounded(set, inFlight, async (t) => {
      setResults((prev) => prev!.map((r) => (r.name === t.name ? { name: t.name, outcome: 'running' } : r)));
      const r = await callRef.current(t, false, rid, hashes.get(t.name) ?? null);
      setResults((prev) => prev!.map((x) => (x.name === t.name ? r : x)));
    });
    setRunning(false);
  };

  const n = targets.length;
  const planned = plan && plan.key === key ? summarise(plan.results, targets) : null;
  const mustType = n > confirmAbove;
  const reason = !planned
    ? 'Waiting for the plan for every machine.'
    : planned.ahead === 0
      ? 'No machine of the set would go ahead.'
      : step === 'install' && !opts.series.trim()
        ? 'Give the series to install.'
        : mustType && typed.trim() !== String(n)
          ? `Type ${n}, the number of machines, to confirm.`
          : undefined;
  const c = results ? counts(results) : null;
  const failed = results ? targets.filter((t) => results.find((r) => r.name === t.name)?.outcome === 'failed') : [];

  return (
    <Dialog title={`${info.label}: ${n} machine${n === 1 ? '' : 's'}`} onClose={onClose} wide>
      <div className="bulk-dialog" data-bulk-dialog={step}>
        <p>
          Each machine's step is its own request and its own audit event; the set is these {n} machines, whatever the fleet shows meanwhile. The server runs a bounded number at once.
        </p>
        {!results ? (
          <>
            {step === 'commission' ? (
              <label className="check">
                <input type="checkbox" checked={opts.noTests} onChange={(e) => setOpts({ ...opts, noTests: e.target.checked })} /> Run no tests after commissioning
              </label>
            ) : null}
            {step === 'install' ? (
              <>
                <label>
                  Series <input className="input" value={opts.series} onChange={(e) => setOpts({ ...opts, series: e.target.value })} data-bulk-series />
                </label>
                <ClusterChooser
                  chooser={chooser}
                  onChange={(cluster) => setOpts({ ...opts, cluster })}
                  hint="The Incus cluster every machine of the set joins (each machine's join token comes from it), or each machine's own: the cluster its record names."
                />
              </>
            ) : null}
            {step === 'release' ? (
              <label className="check">
                <input type="checkbox" checked={opts.erase} onChange={(e) => setOpts({ ...opts, erase: e.target.checked })} /> Erase the disks
              </label>
            ) : null}
            <section aria-label="Plan for the set" className="bulk-plan" data-bulk-plan={planned ? planned.ahead : undefined} aria-busy={!planned}>
              {!planned ? (
                <p className="muted">Asking the server for the plan of each of the {n} machines…</p>
              ) : (
                <>
                  <p>
                    <strong data-bulk-ahead>{planned.ahead} of {n}</strong> would go ahead{planned.groups.length ? '; the others would be refused:' : '.'}
                  </p>
                  {planned.groups.length ? (
                    <ul className="bulk-refusals">
                      {planned.groups.map((g) => (
                        <li key={g.code + g.reason} data-bulk-refusal={g.code}>
                          <strong>{g.machines.length}</strong> {codeLabel(g.code)}: {g.reason}
                          <span className="sub"> {g.machines.slice(0, 12).join(', ')}{g.machines.length > 12 ? ` and ${g.machines.length - 12} more` : ''}</span>
                        </li>
                      ))}
                    </ul>
                  ) : null}
                  <MachinePlans results={plan!.results} />
                </>
              )}
            </section>
            {mustType ? (
              <label>
                Type {n}, the number of machines, to confirm
                <input className="input" inputMode="numeric" value={typed} onChange={(e) => setTyped(e.target.value)} data-bulk-typed />
              </label>
            ) : null}
            <div className="dialog-actions">
              <button type="button" className="btn btn-plain" onClick={onClose}>Cancel</button>
              <ReasonButton variant="primary" reason={reason} onClick={() => void runFor(targets)} data-bulk-confirm data-planned={planned ? 'yes' : undefined}>
                {info.label} {n} machine{n === 1 ? '' : 's'}
              </ReasonButton>
            </div>
          </>
        ) : (
          <>
            <p role="status" data-bulk-counts={running ? 'running' : 'finished'}>
              {c!.done} done · {c!.refused} refused · {c!.failed} failed{running ? ` · ${c!.waiting + c!.running} to go` : ''}
              <span className="sub"> request id <code data-bulk-request-id>{requestId}</code></span>
            </p>
            <p className="hint" data-outcome-meaning>
              {outcomeMeaning.refused}; {outcomeMeaning.failed}.
            </p>
            <ul className="bulk-results">
              {results.map((r) => (
                <li key={r.name} data-bulk-result={r.name} data-outcome={r.outcome} className={`bulk-${r.outcome}`}>
                  <strong>{r.name}</strong> <span className="tag">{r.outcome}</span>
                  {r.message ? <span className="sub"> {reasonText(r.code, r.message)}</span> : null}
                  {r.code === 'PLAN_CHANGED' ? <span className="sub"> Its plan changed after it was shown, so nothing was changed: start the step again for it to see the new plan.</span> : null}
                </li>
              ))}
            </ul>
            <div className="dialog-actions">
              {failed.length ? (
                <ReasonButton reason={running ? 'Wait until every machine has its result.' : undefined} onClick={() => void runFor(failed)} data-bulk-retry>
                  Retry the {failed.length} failed
                </ReasonButton>
              ) : null}
              <button type="button" className="btn btn-primary" onClick={onClose}>Close</button>
            </div>
          </>
        )}
      </div>
    </Dialog>
  );
}

// MachinePlans lists each machine's plan, one line each, built only once opened (a set can
// hold hundreds).
function MachinePlans({ results }: { results: BulkResult[] }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="bulk-machine-plans" data-bulk-plans open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Each machine's plan ({results.length})</summary>
      {open ? (
        <ul>
          {results.map((r) => (
            <li key={r.name} data-bulk-machine-plan={r.name} data-plan-hash={r.plan?.planHash ?? undefined}>
              <strong>{r.name}</strong>: {planLine(r)}
            </li>
          ))}
        </ul>
      ) : null}
    </details>
  );
}
