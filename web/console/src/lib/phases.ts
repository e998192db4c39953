// Phases and warnings in the administrator's words (the schema's own descriptions), with a
// symbol each so that colour is never the only signal.
import type { Phase, WarningCode, CheckResult, MemberStatus } from '../gql/graphql';

export const phaseOrder: Phase[] = [
  'DISCOVERED', 'REGISTERED', 'AWAITING_JOIN', 'HELD', 'ADMITTED', 'EVACUATED', 'UNHELD', 'UNREGISTERED', 'UNKNOWN',
];

export const phaseInfo: Record<Phase, { label: string; meaning: string; symbol: string; tone: string }> = {
  DISCOVERED: { label: 'Discovered', symbol: '◇', tone: 'neutral', meaning: 'A machine MAAS reports that has no record and is not a member: register it to manage it.' },
  REGISTERED: { label: 'Registered', symbol: '○', tone: 'neutral', meaning: 'Recorded; no Incus member and no pending join token.' },
  AWAITING_JOIN: { label: 'Awaiting join', symbol: '◔', tone: 'info', meaning: 'A join token was issued for the name and has not been used yet.' },
  HELD: { label: 'Held', symbol: '◑', tone: 'caution', meaning: 'A member held out of automatic placement (scheduler.instance=manual), awaiting admission.' },
  ADMITTED: { label: 'Admitted', symbol: '●', tone: 'positive', meaning: 'A member admitted after passing the admission checks: Apelora recorded the admission, and the member carries its mark (user.apelora.admission).' },
  EVACUATED: { label: 'Evacuated', symbol: '◌', tone: 'caution', meaning: 'A member in maintenance: Incus lists it Evacuated. Its instances were moved or stopped, nothing is placed on it, the fencing worker never powers it off; Restore brings it back.' },
  UNHELD: { label: 'Unheld', symbol: '▲', tone: 'negative', meaning: 'A member placement can reach although it carries no mark of an admission Apelora recorded: Admit checks it and records the admission.' },
  UNREGISTERED: { label: 'Unregistered', symbol: '□', tone: 'neutral', meaning: 'An Incus member with no machine record (for example the cluster\'s founding member): Admit registers it first, then admits it.' },
  UNKNOWN: { label: 'Unknown', symbol: '?', tone: 'negative', meaning: 'Incus could not be asked (not configured or unreachable); see the warnings.' },
};

export const warningLabels: Record<WarningCode, string> = {
  JOINED_WITHOUT_HOLD: 'Joined without hold',
  INCUS_UNAVAILABLE: 'Incus unavailable',
  SCHEDULED_BY_GROUP: 'Scheduled by group',
  JOIN_TOKENS_UNKNOWN: 'Join tokens unknown',
  MAAS_UNAVAILABLE: 'MAAS unavailable',
  MAAS_MACHINE_MISSING: 'MAAS machine missing',
  HARDWARE_UUID_MISMATCH: 'Hardware UUID mismatch',
  DRIFT: 'Drift since admission',
  ADMISSION_NOT_RECORDED: 'Admission not recorded',
};

export const checkSymbols: Record<CheckResult, { symbol: string; tone: string; label: string }> = {
  PASS: { symbol: '✓', tone: 'positive', label: 'Pass' },
  WARN: { symbol: '!', tone: 'caution', label: 'Warn' },
  FAIL: { symbol: '✕', tone: 'negative', label: 'Fail' },
  SKIPPED: { symbol: '–', tone: 'neutral', label: 'Skipped' },
  NOT_CHECKED: { symbol: '?', tone: 'neutral', label: 'Not checked' },
};

export const memberStatusInfo: Record<MemberStatus, { symbol: string; tone: string; label: string }> = {
  ONLINE: { symbol: '●', tone: 'positive', label: 'Online' },
  OFFLINE: { symbol: '✕', tone: 'negative', label: 'Offline' },
  EVACUATED: { symbol: '◌', tone: 'caution', label: 'Evacuated' },
  BLOCKED: { symbol: '■', tone: 'negative', label: 'Blocked' },
  UNKNOWN: { symbol: '?', tone: 'neutral', label: 'Unknown' },
};

// codeTitle turns a warning code into a title: HEALING_ENABLED → "Healing enabled".
export function codeTitle(code: string): string {
  const s = code.replace(/_/g, ' ').toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}
