// The audit trail as people read and export it: values clipped so none can break a page's
// layout (the whole value one click away), and the current filter's events as JSON Lines
// or CSV.

// clipText keeps the first max characters of a value and says how long it was, so a
// 5,000-character name shows as its start and its length.
export function clipText(value: string, max = 160): { shown: string; clipped: boolean; length: number } {
  const chars = Array.from(value);
  if (chars.length <= max) return { shown: value, clipped: false, length: chars.length };
  return { shown: chars.slice(0, max).join('') + '…', clipped: true, length: chars.length };
}

// paramText writes a mutation's arguments as "key=value · key=value", the input's fields
// rather than the input object.
export function paramText(values: Record<string, unknown> | null | undefined): string {
  const input = ((values && (values as Record<string, unknown>).input) ?? values) as Record<string, unknown> | null | undefined;
  if (!input || typeof input !== 'object') return '';
  return Object.entries(input)
    .map(([k, v]) => `${k}=${valueText(v)}`)
    .join(' · ');
}

// valueText writes one value; a value the audit bounded ({text, bytes, sha256, truncated})
// as its kept start and its length.
function valueText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && 'text' in v && 'bytes' in v && 'sha256' in v) {
    const b = v as { text: string; bytes: number; truncated?: boolean };
    return b.truncated ? `${b.text}… (${b.bytes} bytes in all)` : b.text;
  }
  return JSON.stringify(v);
}

export interface ExportedEvent {
  id: string;
  at: string;
  actor: string;
  action: string;
  machine?: string | null;
  outcome: string;
  error?: string | null;
  requestId: string;
  parameters: unknown;
  details: unknown;
}

// jsonLine is one event as a line of JSON Lines, fields in a fixed order.
export function jsonLine(e: ExportedEvent): string {
  const { id, at, actor, action, machine, outcome, error, requestId, parameters, details } = e;
  return JSON.stringify({ id, at, actor, action, machine: machine ?? null, outcome, error: error ?? null, requestId, parameters, details }) + '\n';
}

export const csvHeader = 'id,at,actor,action,machine,outcome,error,requestId,parameters,details\r\n';

// csvField quotes a field as RFC 4180 does, and defuses a leading =, +, - or @ that a
// spreadsheet would run as a formula (the values are callers' input).
export function csvField(v: unknown): string {
  let s = v == null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;
  return /[",\r\n]/.test(s) || s !== s.trim() ? '"' + s.replace(/"/g, '""') + '"' : s;
}

export function csvLine(e: ExportedEvent): string {
  return [e.id, e.at, e.actor, e.action, e.machine, e.outcome, e.error, e.requestId, e.parameters, e.details].map(csvField).join(',') + '\r\n';
}

// exportName names a download after the filter it holds.
export function exportName(filter: Record<string, string | undefined | null>, format: 'jsonl' | 'csv', now = new Date()): string {
  const parts = Object.entries(filter)
    .filter(([, v]) => v)
    .map(([k, v]) => `${k}-${String(v).replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 40)}`);
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return ['apelora-audit', ...parts, stamp].join('_') + '.' + format;
}
