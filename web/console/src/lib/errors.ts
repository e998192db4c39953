// What the server said went wrong, in the administrator's words: every error carries a
// stable extensions.code and, for bad input, extensions.field naming the input at fault.
import { inConsoleWords } from './words';

export interface Problem {
  message: string;
  code?: string;
  field?: string;
  // index is the entry at fault in a list field (extensions.details.index), such as a
  // member-config row.
  index?: number;
}

// The parts of urql's CombinedError this module reads (kept structural for the tests).
export interface ErrorLike {
  graphQLErrors?: ReadonlyArray<{ message: string; extensions?: Record<string, unknown> | null }>;
  networkError?: { message: string; name?: string } | Error | null;
  response?: { status?: number } | null;
}

export function problemsOf(err: ErrorLike | null | undefined): Problem[] {
  if (!err) return [];
  const out: Problem[] = [];
  for (const e of err.graphQLErrors ?? []) {
    const ext = e.extensions ?? {};
    const details = typeof ext.details === 'object' && ext.details ? (ext.details as Record<string, unknown>) : {};
    out.push({
      message: inConsoleWords(e.message),
      code: typeof ext.code === 'string' ? ext.code : undefined,
      field: typeof ext.field === 'string' ? ext.field : undefined,
      index: typeof details.index === 'number' ? details.index : undefined,
    });
  }
  if (err.networkError && out.length === 0 && err.networkError.name === 'DeadlineError') {
    out.push({ code: 'UNAVAILABLE', message: err.networkError.message });
  } else if (err.networkError && out.length === 0) {
    out.push({
      code: 'UNAVAILABLE',
      message: 'The server could not be reached or did not answer: check that apelora serve is running, then try again.',
    });
  }
  return out;
}

// codeWords is the one wording of each documented error code (docs/api.md's table), wherever
// the console shows why something was or would be refused: a dialog's problems, a plan's
// refusals, the confirm button's reason, a bulk step's groups and per-machine results.
// Whether a code is a refusal or a failure is bulk-outcomes.json's, shared with apeloractl.
export const codeWords: Record<string, string> = {
  UNAUTHENTICATED: 'not signed in',
  FORBIDDEN: 'not permitted to you',
  INVALID_INPUT: 'input not accepted',
  NOT_FOUND: 'not found',
  ALREADY_EXISTS: 'already exists',
  BUSY: 'another change to it is in progress',
  FAILED_PRECONDITION: 'not possible in its present state',
  PLAN_CHANGED: 'its plan changed since it was shown',
  UNAVAILABLE: 'an upstream or the server did not answer',
  INTERNAL: 'the server failed',
  REQUEST_TOO_LARGE: 'request too large',
  RATE_LIMITED: 'too many tries: wait',
};

// codeLabel is a code in words, with the code itself (what docs/api.md and the audit name).
export function codeLabel(code: string): string {
  const w = codeWords[code];
  return w ? `${w} (${code})` : code;
}

// reasonText is a reason the server gave, with its code in words.
export function reasonText(code: string | null | undefined, message: string): string {
  return code ? `${message} — ${codeLabel(code)}` : message;
}

// describe is the sentence the console shows for a problem. BUSY means another change to
// the same machine is in progress (the server holds one change per machine at a time).
export function describe(p: Problem, machine?: string): string {
  if (p.code === 'BUSY') {
    const who = machine ? machine : 'this machine';
    return `Someone else is changing ${who} right now. Wait for their change to finish, then try again. (${p.message})`;
  }
  return p.message;
}

// fieldKey is where a problem is shown: its field, or field.index for one entry of a list
// field (memberConfig.2); '' when the server named no field.
export function fieldKey(p: Problem): string {
  if (!p.field) return '';
  return p.index === undefined ? p.field : `${p.field}.${p.index}`;
}

// fieldProblems maps each input field the server named to its message; the rest go under ''.
export function fieldProblems(problems: Problem[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const p of problems) {
    const k = fieldKey(p);
    out.set(k, out.has(k) ? out.get(k) + ' ' + p.message : p.message);
  }
  return out;
}

// sessionLost reports whether an error means the console's session no longer
// authenticates (expired, signed out elsewhere, identity removed or revoked).
export function sessionLost(err: ErrorLike | null | undefined): boolean {
  if (!err) return false;
  if (err.response?.status === 401) return true;
  return (err.graphQLErrors ?? []).some((e) => e.extensions?.code === 'UNAUTHENTICATED');
}
