// A mutation's dry run (dryRun: true) answers its plan in the payload's plan field: the
// steps it would take and what would refuse or qualify it. The console asks for it before
// every change and shows it in the confirm dialog.

import { changes, type ChangeName } from '../api/changes.gen';

export interface PlanChange { field: string; before?: string | null; after?: string | null }
export interface PlanStep { system: string; call: string; target: string; changes: PlanChange[] }
export interface PlanFinding { code?: string | null; message: string; field?: string | null }
export interface Plan { refused: boolean; steps: PlanStep[]; refusals: PlanFinding[]; warnings: PlanFinding[] }

// planOf reads the plan in the answer of the change named (declared in schema/ with
// @change, so it takes dryRun and answers a plan: api/changes.gen.ts):
// { admitMember: { plan, … } }.
export function planOf(data: unknown, change: ChangeName): Plan | null {
  if (!data || typeof data !== 'object' || !(change in changes)) return null;
  const v = (data as Record<string, unknown>)[change];
  if (!v || typeof v !== 'object') return null;
  return (v as { plan?: Plan | null }).plan ?? null;
}

// refusalReason is why the confirm button is disabled for a plan that would be refused.
export function refusalReason(p: Plan | null): string | undefined {
  if (!p || !p.refused) return undefined;
  const r = p.refusals[0];
  return r ? `It would be refused: ${r.message}${r.code ? ` (${r.code})` : ''}` : 'It would be refused.';
}

// changeText is one change of a step, before → after.
export function changeText(c: PlanChange): string {
  const b = c.before ?? '(none)';
  const a = c.after ?? '(removed)';
  return c.before == null ? `${c.field}: ${a}` : `${c.field}: ${b} → ${a}`;
}
