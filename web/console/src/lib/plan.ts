// A mutation's dry run (dryRun: true) answers its plan in the payload's plan field: the
// calls it would send (to Incus, MAAS, the database) and what would refuse or qualify it. The console asks for it before
// every change and shows it in the confirm dialog.

import { changes, type ChangeName } from '../api/changes.gen';
import { fieldKey, reasonText, type Problem } from './errors';
import { inConsoleWords } from './words';

export interface PlanChange { field: string; before?: string | null; after?: string | null }
export interface PlanCall { system: string; request: string; target: string; changes: PlanChange[] }
export interface PlanFinding { code?: string | null; message: string; field?: string | null }
export interface PlanFact { name: string; value: string }
export interface Plan { refused: boolean; planHash?: string | null; facts?: PlanFact[]; calls: PlanCall[]; refusals: PlanFinding[]; warnings: PlanFinding[] }

// planOf reads the plan in the answer of the change named (declared in schema/ with
// @change, so it takes dryRun and answers a plan: api/changes.gen.ts):
// { admitMember: { plan, … } }.
export function planOf(data: unknown, change: ChangeName): Plan | null {
  if (!data || typeof data !== 'object' || !(change in changes)) return null;
  const v = (data as Record<string, unknown>)[change];
  if (!v || typeof v !== 'object') return null;
  const p = (v as { plan?: Plan | null }).plan ?? null;
  if (!p) return null;
  // The server's words, as the console says them (lib/words).
  const words = (f: PlanFinding) => ({ ...f, message: inConsoleWords(f.message) });
  return { ...p, refusals: p.refusals.map(words), warnings: p.warnings.map(words) };
}

// refusalReason is why the confirm button is disabled for a plan that would be refused.
export function refusalReason(p: Plan | null): string | undefined {
  if (!p || !p.refused) return undefined;
  const r = p.refusals[0];
  return r ? `It would be refused: ${reasonText(r.code, r.message)}` : 'It would be refused.';
}

// changeText is one change of a call, before → after.
export function changeText(c: PlanChange): string {
  const b = c.before ?? '(none)';
  const a = c.after ?? '(removed)';
  return c.before == null ? `${c.field}: ${a}` : `${c.field}: ${b} → ${a}`;
}

// What a dry run said about the inputs as filled in, sorted for the dialog: each problem
// the server tied to a field the dialog shows (its extensions.field, or field.index for one
// entry of a list such as a member-config row) goes beside that field; the rest go in the
// plan box. The server's rule is the only rule: the console checks nothing itself here.
export interface PlanOutcome {
  // fields maps a field (or field.index) to the server's message for it.
  fields: Map<string, string>;
  // problem is what the server said that belongs to no field shown.
  problem?: string;
  // invalid is why the change cannot be made as filled in: a field the server refused,
  // or input it refused without naming a field shown.
  invalid?: string;
  // fieldMessage is the server's message for the first field it refused.
  fieldMessage?: string;
}

export function planOutcome(problems: Problem[], plan: Plan | null, fieldNames: string[]): PlanOutcome {
  const shown = (field: string | null | undefined, key: string) => !!field && (fieldNames.includes(key) || fieldNames.includes(field));
  const fields = new Map<string, string>();
  const add = (key: string, message: string) => fields.set(key, fields.has(key) ? `${fields.get(key)} ${message}` : message);
  const rest: Problem[] = [];
  for (const p of problems) {
    if (shown(p.field, fieldKey(p))) add(fieldKey(p), p.message);
    else rest.push(p);
  }
  const out: PlanOutcome = { fields };
  const first = fields.values().next().value;
  const bad = rest.find((p) => p.code === 'INVALID_INPUT');
  if (first !== undefined) {
    out.invalid = 'Correct the field marked above first.';
    out.fieldMessage = first;
  } else if (bad) out.invalid = `It would be refused: ${bad.message} (INVALID_INPUT)`;
  if (rest.length) out.problem = rest.map((p) => p.message).join(' ');
  // A refusal about a field (a name already taken) is said beside it too; the plan's
  // refusal is the reason the button gives (refusalReason).
  for (const r of plan?.refusals ?? []) {
    if (r.field && shown(r.field, r.field) && !fields.has(r.field)) add(r.field, r.message);
  }
  return out;
}
