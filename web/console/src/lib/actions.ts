// Which changes the console offers for a machine, and why one is not possible now: the
// caller's permissions, the machine's phase, and the MAAS step rules the server reports
// (Machine.maasSteps). A change that is not possible stays visible, disabled, with its
// reason.
import type { AdmissionVerdict, CheckResult, MaasStep, Permission } from '../gql/graphql';
import type { Row } from './fleet';
import { inConsoleWords } from './words';

export interface Viewer {
  name: string;
  permissions: Permission[];
}

export type ActionId =
  | 'register' | 'approve' | 'revoke' | 'admit' | 'evacuate' | 'restore' | 'remove' | 'unregister'
  | 'commission' | 'install' | 'test' | 'release';

export interface Action {
  id: ActionId;
  label: string;
  // reason is why the action cannot be taken now; undefined when it can.
  reason?: string;
}

export function canManage(v: Viewer | null | undefined): boolean {
  return !!v && v.permissions.includes('MANAGE_INFRASTRUCTURE');
}

// manageReason is why the viewer may change nothing, or undefined.
export function manageReason(v: Viewer | null | undefined): string | undefined {
  if (canManage(v)) return undefined;
  return 'Needs the manage-infrastructure permission: this identity may only view.';
}

// eraseReason is why the viewer may not erase disks on release, or undefined.
export function eraseReason(v: Viewer | null | undefined): string | undefined {
  return manageReason(v) ?? (v!.permissions.includes('HARDWARE_DELETE') ? undefined : 'Erasing disks needs the hardware.delete permission as well.');
}

const stepIds: Record<MaasStep, ActionId> = {
  COMMISSION: 'commission',
  INSTALL: 'install',
  HARDWARE_TESTS: 'test',
  RELEASE: 'release',
};

const labels: Record<ActionId, string> = {
  register: 'Register',
  approve: 'Approve enrolment',
  revoke: 'Revoke join token',
  admit: 'Admit',
  evacuate: 'Evacuate',
  restore: 'Restore',
  remove: 'Remove member',
  unregister: 'Unregister',
  commission: 'Commission',
  install: 'Install OS',
  test: 'Hardware tests',
  release: 'Release',
};

// machineActions lists the changes the machine's phase allows, then its MAAS steps.
export function machineActions(r: Row, v: Viewer | null | undefined, maasSteps: Row['maasSteps'] = r.maasSteps): Action[] {
  const perm = manageReason(v);
  const out: Action[] = [];
  const add = (id: ActionId, reason?: string) => out.push({ id, label: labels[id], reason: perm ?? reason });
  switch (r.phase) {
    case 'DISCOVERED':
      add('register');
      break;
    case 'REGISTERED':
      add('approve');
      add('unregister');
      break;
    case 'AWAITING_JOIN':
      add('revoke');
      break;
    case 'HELD':
      add('admit');
      add('remove');
      break;
    case 'ADMITTED':
      add('evacuate');
      add('remove');
      break;
    case 'UNHELD':
      // Joined without the hold: placement may reach it already, but Apelora never admitted
      // it. Admit runs every check and records the admission.
      add('admit');
      add('evacuate');
      add('remove');
      break;
    case 'EVACUATED':
      add('restore');
      add('remove');
      break;
    case 'UNREGISTERED':
      // A member with no machine record (the founding member, one joined by hand): Admit
      // registers it first, in the same dialog; an evacuated one is restored (restoreMember
      // needs no record).
      if (r.member?.status === 'EVACUATED') {
        add('restore');
      } else {
        add('admit');
        add('evacuate');
      }
      add('register');
      add('remove');
      break;
    case 'UNKNOWN':
      add('approve', 'Incus could not be asked, so the machine\'s phase is unknown: see the banner and the warnings.');
      break;
  }
  // A machine only discovered is registered first, whatever its MAAS state: every MAAS
  // step then lands in its history under its name (the server refuses them before).
  if (r.phase === 'DISCOVERED') return out;
  for (const s of maasSteps) {
    add(stepIds[s.step], s.allowed ? undefined : s.reason ? inConsoleWords(s.reason) : 'Not possible in this state.');
  }
  return out;
}

export interface CheckLike {
  name: string;
  title: string;
  result: CheckResult;
  message: string;
}

// admitReason is why Admit is disabled given the latest admission report, or undefined
// when it may be pressed (the server runs every check again anyway).
export function admitReason(v: Viewer | null | undefined, report: { verdict?: AdmissionVerdict | null; checks: CheckLike[] } | null): string | undefined {
  const perm = manageReason(v);
  if (perm) return perm;
  if (!report) return 'Run the admission checks first.';
  if (!report.verdict) return 'The admission checks are still running.';
  if (report.verdict === 'ADMISSIBLE') return undefined;
  const failed = report.checks.filter((c) => c.result === 'FAIL');
  if (failed.length === 0) return 'The admission checks blocked admission.';
  // The server's words for it (admission.BlockedBy): admit's refusal and apeloractl say the same.
  return 'Admission blocked by ' + failed.map((c) => `${c.title}: ${inConsoleWords(c.message)}`).join('; ');
}
