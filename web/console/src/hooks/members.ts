// A member's admission checks, live: each run's results as they are computed (pushed by
// admissionChecks, whoever runs them), and running a report.
import { useCallback, useEffect, useMemo, useState } from 'react';
import { useQuery, useSubscription } from 'urql';
import { AdmissionChecksSubscription, AdmissionReportQuery } from '../api/members';
import type { CheckLike } from '../lib/actions';
import type { AdmissionVerdict } from '../gql/graphql';

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

// useAdmission follows admissionChecks for the machine: each run's results as computed,
// then its verdict. Running a report (here or anywhere) makes them arrive.
export function useAdmission(name: string, member: boolean) {
  const [runs, setRuns] = useState<Run[]>([]);
  const [sub] = useSubscription({ query: AdmissionChecksSubscription, variables: { name }, pause: !member });
  const ev = sub.data?.admissionChecks;
  useEffect(() => {
    if (!ev) return;
    setRuns((prev) => {
      const i = prev.findIndex((r) => r.runId === ev.runId);
      const base: Run = i >= 0 ? prev[i] : { runId: ev.runId, trigger: ev.trigger, at: ev.at, checks: [], live: true };
      const checks = [...base.checks];
      for (const c of ev.checks) if (!checks.some((x) => x.name === c.name)) checks.push(c);
      const next: Run = { ...base, at: ev.at, checks, verdict: ev.verdict ?? base.verdict };
      return newestFirst(i >= 0 ? prev.map((r, j) => (j === i ? next : r)) : [next, ...prev]);
    });
  }, [ev]);
  const [report, runReport] = useQuery({ query: AdmissionReportQuery, variables: { name }, pause: true, requestPolicy: 'network-only' });
  // A report's own answer completes its run, should a pushed event have been missed.
  const answered = report.data?.admissionReport;
  useEffect(() => {
    if (!answered) return;
    setRuns((prev) => {
      const done: Run = { runId: answered.runId, trigger: answered.trigger, at: answered.at, checks: answered.checks, verdict: answered.verdict, live: prev.some((r) => r.runId === answered.runId && r.live) };
      return newestFirst(prev.some((r) => r.runId === done.runId) ? prev.map((r) => (r.runId === done.runId ? done : r)) : [done, ...prev]);
    });
  }, [answered]);
  const latest = runs[0] ?? null;
  const run = useCallback(() => runReport({ requestPolicy: 'network-only' }), [runReport]);
  return useMemo(
    () => ({ latest, running: report.fetching, error: report.error, run, subscribed: !sub.error }),
    [latest, report.fetching, report.error, run, sub.error],
  );
}

// Admission is what useAdmission returns: the latest run, and running the checks.
export type Admission = ReturnType<typeof useAdmission>;
