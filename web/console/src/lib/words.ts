// The console's words for what the server says. The API's messages name its mutations
// (admitMember, restoreMember, "registerMachine with provisioner MAAS") because API callers
// and apeloractl read them too; where the console shows such a message it names its own
// button instead, in “quotes”, and writes the server's times (RFC 3339) in the one format
// the console uses everywhere (components/ui's Time: "6 Dec 2026, 04:27:35").
import type { ChangeName } from '../api/changes.gen';

// buttonNames: each mutation's button (or switch) in the console.
export const buttonNames: Record<ChangeName, string> = {
  registerMachine: 'Register',
  unregisterMachine: 'Unregister',
  approveEnrolment: 'Approve enrolment',
  revokeJoinToken: 'Revoke join token',
  admitMember: 'Admit',
  removeMember: 'Remove member',
  evacuateMember: 'Evacuate',
  restoreMember: 'Restore',
  commissionMachine: 'Commission',
  installOperatingSystem: 'Install OS',
  runHardwareTests: 'Hardware tests',
  releaseMachine: 'Release',
  setFenceMapping: 'Set mapping (Fencing)',
  removeFenceMapping: 'Remove mapping (Fencing)',
  setHardwareProfile: 'Declare a profile (Hardware)',
  removeHardwareProfile: 'Remove profile (Hardware)',
  assignHardwareProfile: 'Assign a profile',
  clearHardwareProfile: 'Clear profile',
  createIdentity: 'Create an identity (Identities)',
  revokeIdentity: 'Revoke (Identities)',
  setPlacementGuard: 'Placement guard switch (Fencing)',
  startRollingReboot: 'Start a rolling reboot',
  pauseRollingReboot: 'Pause',
  resumeRollingReboot: 'Resume',
  cancelRollingReboot: 'Cancel',
  registerCluster: 'Register a cluster (Clusters)',
  removeCluster: 'Remove cluster (Clusters)',
};

// phrases the server writes around a mutation's name that read badly with a button's:
// replaced whole, before the names themselves.
const phrases: [RegExp, string][] = [
  [/\bregisterMachine with provisioner MAAS and this system id\b/g, '“Register” on its row'],
  [/\bregisterMachine with provisioner MAAS\b/g, '“Register”'],
  [/\buntil admitMember admits a member\b/g, 'until a member is admitted (“Admit”)'],
  [/\bsetPlacementGuard \(apeloractl placement-guard on\)/g, 'the placement guard switch of its cluster on the Clusters page'],
  [/, setPlacementGuard or apeloractl placement-guard on\)/g, ': the switch on the Fencing page)'],
];

const names = new RegExp(`\\b(${Object.keys(buttonNames).join('|')})\\b`, 'g');

// RFC 3339 times as the server writes them (UTC, optional fraction).
const isoTime = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\b/g;

// timeText is a time in the console's one format (the Time component's).
export function timeText(at: string | Date): string {
  return new Date(at).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}

// inConsoleWords is a server message as the console shows it.
export function inConsoleWords(message: string): string {
  let m = message;
  for (const [re, to] of phrases) m = m.replace(re, to);
  m = m.replace(names, (n) => `“${buttonNames[n as ChangeName]}”`);
  return m.replace(isoTime, (t) => (Number.isNaN(Date.parse(t)) ? t : timeText(t)));
}
