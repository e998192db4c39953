// Bulk steps: one step for a set of machines chosen in the fleet. The set is frozen to
// machine names when the step is confirmed (never re-filtered by the server); each
// machine's step is its own mutation call (its own audit event) and every call of one
// step carries one request id (X-Request-Id), which links the events. The server bounds how
// many run at once (APELORA_STEP_CONCURRENCY); the console keeps a few in flight so the
// results arrive one machine at a time.
import type { ChangeName } from '../api/changes.gen';
import type { Row } from './fleet';
import type { Plan } from './plan';
import { reasonText } from './errors';
import outcomes from './bulk-outcomes.json';

export type BulkStep = 'register' | 'commission' | 'test' | 'install' | 'admit' | 'release';

// bulkSteps are the steps a set may take; approve enrolment is not one (its join token is
// shown once, for one machine). A new step (evacuate, restore) is a line here and a case
// in the dialog's call.
export const bulkSteps: { step: BulkStep; label: string; change: ChangeName; maas: boolean }[] = [
  { step: 'register', label: 'Register (discovered)', change: 'registerMachine', maas: true },
  { step: 'commission', label: 'Commission', change: 'commissionMachine', maas: true },
  { step: 'test', label: 'Run hardware tests', change: 'runHardwareTests', maas: true },
  { step: 'install', label: 'Install and enrol', change: 'installOperatingSystem', maas: true },
  { step: 'admit', label: 'Admit', change: 'admitMember', maas: false },
  { step: 'release', label: 'Release', change: 'releaseMachine', maas: true },
];

const maasStepOf: Partial<Record<BulkStep, string>> = { commission: 'COMMISSION', test: 'HARDWARE_TESTS', install: 'INSTALL', release: 'RELEASE' };

// allows reports whether a machine may take the step now, as the fleet shows it: a
// discovered machine is registered first (a MAAS step needs a record), a MAAS step follows
// what the server says of it (Machine.maasSteps), and admit takes a member held or joined
// without the hold (one with no record is admitted from its own page, registered first).
export function allows(r: Row, step: BulkStep): boolean {
  switch (step) {
    case 'register':
      return r.phase === 'DISCOVERED' && !!r.maas;
    case 'admit':
      return r.phase === 'HELD' || r.phase === 'UNHELD';
    default:
      return r.phase !== 'DISCOVERED' && r.maasSteps.some((s) => s.step === maasStepOf[step] && s.allowed);
  }
}

// defaultStep is the step the bulk bar offers first for a selection: the first, in
// bulkSteps' order, that some machine of it may take now (Register for machines MAAS only
// discovered, not Commission, which would refuse them all).
export function defaultStep(rows: readonly Row[]): BulkStep {
  return bulkSteps.find((b) => rows.some((r) => allows(r, b.step)))?.step ?? bulkSteps[0].step;
}

// confirmAbove is the set size above which the count must be typed again.
export const confirmAbove = 10;

// inFlight is how many calls the console keeps open at once (the server bounds the rest).
export const inFlight = 6;

// toggled is the selection with one name in or out.
export function toggled(sel: ReadonlySet<string>, name: string, on: boolean): Set<string> {
  const next = new Set(sel);
  if (on) next.add(name);
  else next.delete(name);
  return next;
}

// ranged is a shift-click: every name between the anchor (the last one clicked) and name,
// in the order shown, takes name's new state. Without an anchor shown, only name does.
export function ranged(sel: ReadonlySet<string>, shown: readonly string[], anchor: string | null, name: string, on: boolean): Set<string> {
  const a = anchor === null ? -1 : shown.indexOf(anchor);
  const b = shown.indexOf(name);
  if (a < 0 || b < 0) return toggled(sel, name, on);
  const next = new Set(sel);
  for (const n of shown.slice(Math.min(a, b), Math.max(a, b) + 1)) {
    if (on) next.add(n);
    else next.delete(n);
  }
  return next;
}

// allMatching selects (or clears) every machine matching the filter, on every page.
export function allMatching(sel: ReadonlySet<string>, matching: readonly string[], on: boolean): Set<string> {
  const next = new Set(sel);
  for (const n of matching) {
    if (on) next.add(n);
    else next.delete(n);
  }
  return next;
}

// BulkTarget is one machine of the frozen set, with what its step is called with.
export interface BulkTarget { name: string; systemId?: string; hostname?: string }

// freeze turns the selection into the set the step runs for, in the fleet's order, each
// with its MAAS ids as the fleet shows them now.
export function freeze(sel: ReadonlySet<string>, rows: readonly Row[]): BulkTarget[] {
  return rows.filter((r) => sel.has(r.name)).map((r) => ({ name: r.name, systemId: r.maas?.systemId, hostname: r.maas?.hostname }));
}

export type Outcome = 'waiting' | 'running' | 'ahead' | 'done' | 'refused' | 'failed';
// plan is the machine's dry run as shown in the dialog (its planHash goes with its call).
export interface BulkResult { name: string; outcome: Outcome; code?: string; message?: string; plan?: Plan | null }

// shownHashes maps each machine of the plan shown to its plan's hash: each machine's call
// carries the hash of the plan it was shown with, so the server refuses it (PLAN_CHANGED,
// nothing changed) when that machine's plan is no longer the same, as a single
// confirmation does.
export function shownHashes(planned: readonly BulkResult[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of planned) if (r.plan?.planHash) out.set(r.name, r.plan.planHash);
  return out;
}

// planLine is one machine's plan in a line: its calls, or why it would be refused.
export function planLine(r: BulkResult): string {
  const p = r.plan;
  if (!p) return r.message ? reasonText(r.code, r.message) : 'no plan';
  if (p.refused) return `refused: ${p.refusals.map((f) => reasonText(f.code, f.message)).join('; ') || 'it would be refused'}`;
  const calls = p.calls.map((c) => `${c.system} ${c.request}${c.target ? ` on ${c.target}` : ''}`).join(', then ');
  const warnings = p.warnings.length ? ` (${p.warnings.map((w) => w.message).join('; ')})` : '';
  return (calls || 'no call: nothing would be changed') + warnings;
}

// outcomeOfCode: refused is the server saying no before changing anything; failed is a step
// tried and not completed, worth retrying. The one rule is bulk-outcomes.json, which the
// server's audit (apperr.Refusal) and apeloractl read too.
export function outcomeOfCode(code: string | undefined): 'refused' | 'failed' {
  return code !== undefined && (outcomes as Record<string, string>)[code] === 'refused' ? 'refused' : 'failed';
}

// outcomeMeaning says each outcome in a line, where the bulk dialog counts them.
export const outcomeMeaning = {
  refused: 'refused: the server said no before changing anything (its reason says what to change first)',
  failed: 'failed: tried and not completed, worth retrying (an upstream or the server did not answer)',
} as const;

// reasonOf is a refusal without the machine's own name and ids, so one reason is one group.
export function reasonOf(message: string, t: BulkTarget): string {
  let m = message;
  for (const s of [t.name, t.systemId, t.hostname]) if (s) m = m.split(s).join('…');
  return m;
}

export interface RefusalGroup { code: string; reason: string; machines: string[] }

// summarise is the plan for the set: how many would go ahead, and the rest grouped by
// reason, largest group first.
export function summarise(results: readonly BulkResult[], targets: readonly BulkTarget[]): { ahead: number; groups: RefusalGroup[] } {
  const byName = new Map(targets.map((t) => [t.name, t]));
  const groups: RefusalGroup[] = [];
  let ahead = 0;
  for (const r of results) {
    if (r.outcome === 'ahead') {
      ahead++;
      continue;
    }
    if (r.outcome !== 'refused' && r.outcome !== 'failed') continue;
    const code = r.code ?? 'UNAVAILABLE';
    const reason = reasonOf(r.message ?? '', byName.get(r.name) ?? { name: r.name });
    let g = groups.find((x) => x.code === code && x.reason === reason);
    if (!g) groups.push((g = { code, reason, machines: [] }));
    g.machines.push(r.name);
  }
  groups.sort((a, b) => b.machines.length - a.machines.length);
  return { ahead, groups };
}

// counts are how many results have each outcome.
export function counts(results: readonly BulkResult[]): Record<Outcome, number> {
  const c: Record<Outcome, number> = { waiting: 0, running: 0, ahead: 0, done: 0, refused: 0, failed: 0 };
  for (const r of results) c[r.outcome]++;
  return c;
}

// bounded runs fn for every item, at most limit at once, in order of the items.
export async function bounded<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}

// newRequestId names one bulk step's calls (the server keeps ids of [A-Za-z0-9-_.:]).
export function newRequestId(): string {
  const b = new Uint8Array(9);
  crypto.getRandomValues(b);
  return 'bulk-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
