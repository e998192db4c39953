// A member's admission checks, live: each run's results as they are computed (pushed by
// admissionChecks, whoever runs them), and running a report.
import { useCallback, useEffect, useMemo, useState } from 'react';
import { useQuery, useSubscription } from 'urql';
import { AdmissionChecksSubscription, AdmissionReportQuery } from '../api/members';
import type { CheckLike } from '../lib/actions';
import type { AdmissionChecksSubscription as AdmissionChecksEvent, AdmissionVerdict } from '../gql/graphql';

export interface Run {
  runId: string;
  trigger: string;
  at: string;
  checks: CheckLike[];
  verdict?: AdmissionVerdict | null;
  live: boolean;
}

// newestFirst orders runs by when they ran: a report's own answer may arrive after a newer
// run's pushed events.
function newestFirst(runs: Run[]): Run[] {
  return [...runs].sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
}

// withEvent adds one pushed event to the runs: its checks to its run (a run first seen
// here is live), its verdict once it ends.
function withEvent(prev: Run[], ev: AdmissionChecksEvent['admissionChecks']): Run[] {
  const i = prev.findIndex((r) => r.runId === ev.runId);
  const base: Run = i >= 0 ? prev[i] : { runId: ev.runId, trigger: ev.trigger, at: ev.at, checks: [], live: true };
  const checks = [...base.checks];
  for (const c of ev.checks) if (!checks.some((x) => x.name === c.name)) checks.push(c);
  const next: Run = { ...base, at: ev.at, checks, verdict: ev.verdict ?? base.verdict };
  return newestFirst(i >= 0 ? prev.map((r, j) => (j === i ? next : r)) : [next, ...prev]);
}

// useAdmission follows admissionChecks for the machine: each run's results as computed,
// then its verdict. Running a report (here or anywhere) makes them arrive.
export function useAdmission(name: string, member: boolean) {
  // Every pushed event goes through the handler, in order: reading only the subscription's
  // latest data in an effect lost events that arrived in one render (a run's checks pushed
  // together under load showed 6 of its 12 rows, CI run 48).
  const [sub] = useSubscription<AdmissionChecksEvent, Run[]>(
    { query: AdmissionChecksSubscription, variables: { name }, pause: !member },
    (prev, data) => withEvent(prev ?? [], data.admissionChecks),
  );
  const live = sub.data;
  const [report, runReport] = useQuery({ query: AdmissionReportQuery, variables: { name }, pause: true, requestPolicy: 'network-only' });
  // A report's own answer completes its run, should a pushed event have been missed.
  const answered = report.data?.admissionReport;
  const [answers, setAnswers] = useState<Run[]>([]);
  useEffect(() => {
    if (!answered) return;
    const done: Run = { runId: answered.runId, trigger: answered.trigger, at: answered.at, checks: answered.checks, verdict: answered.verdict, live: false };
    setAnswers((prev) => [done, ...prev.filter((r) => r.runId !== done.runId)]);
  }, [answered]);
  const runs = useMemo(() => {
    const out = [...(live ?? [])];
    for (const a of answers) {
      const i = out.findIndex((r) => r.runId === a.runId);
      if (i >= 0) out[i] = { ...a, live: out[i].live };
      else out.push(a);
    }
    return newestFirst(out);
  }, [live, answers]);
  const latest = runs[0] ?? null;
  const run = useCallback(() => runReport({ requestPolicy: 'network-only' }), [runReport]);
  return useMemo(
    () => ({ latest, running: report.fetching, error: report.error, run, subscribed: !sub.error }),
    [latest, report.fetching, report.error, run, sub.error],
  );
}

// Admission is what useAdmission returns: the latest run, and running the checks.
export type Admission = ReturnType<typeof useAdmission>;
