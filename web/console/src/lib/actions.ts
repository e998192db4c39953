// Which changes the console offers for a machine, and why one is not possible now: the
// caller's permissions, the machine's phase, and the MAAS step rules the server reports
// (Machine.maasSteps). A change that is not possible stays visible, disabled, with its
// reason.
import type { AdmissionVerdict, CheckResult, MaasStep, Permission } from '../gql/graphql';
import type { Row } from './fleet';
import { inConsoleWords } from './words';

export interface Viewer {
  name: string;
  // What it may do in every cluster; grants, what it may do in one cluster only.
  permissions: Permission[];
  grants?: { permission: Permission; cluster: string }[];
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

// canManage: the viewer may change something, in every cluster or in some.
export function canManage(v: Viewer | null | undefined): boolean {
  return !!v && (v.permissions.includes('MANAGE_INFRASTRUCTURE') || scopedIn(v, 'MANAGE_INFRASTRUCTURE').length > 0);
}

// scopedIn lists the clusters where the viewer holds p in that cluster only, sorted.
export function scopedIn(v: Viewer | null | undefined, p: Permission): string[] {
  return (v?.grants ?? []).filter((g) => g.permission === p).map((g) => g.cluster).sort();
}

// manageReason is why the viewer may not make a change, or undefined. cluster is the
// cluster the change is about (a machine's); undefined or null for a change about no
// single cluster, which a viewer who may manage some clusters only may not make (the
// server's rule: docs/security.md, "Permissions scoped to clusters").
export function manageReason(v: Viewer | null | undefined, cluster?: string | null): string | undefined {
  if (v?.permissions.includes('MANAGE_INFRASTRUCTURE')) return undefined;
  const some = scopedIn(v, 'MANAGE_INFRASTRUCTURE');
  if (some.length === 0) return 'Needs the manage-infrastructure permission: this identity may only view.';
  if (cluster && some.includes(cluster)) return undefined;
  const why = cluster ? `this machine is in ${cluster}` : 'this change is about no single cluster';
  return `You may manage ${some.join(', ')} only; ${why}.`;
}

// eraseReason is why the viewer may not erase disks on release, or undefined.
export function eraseReason(v: Viewer | null | undefined, cluster?: string | null): string | undefined {
  const perm = manageReason(v, cluster);
  if (perm) return perm;
  if (v!.permissions.includes('HARDWARE_DELETE') || (cluster && scopedIn(v, 'HARDWARE_DELETE').includes(cluster))) return undefined;
  return 'Erasing disks needs the hardware.delete permission as well.';
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
  const perm = manageReason(v, r.cluster?.name);
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
export function admitReason(v: Viewer | null | undefined, report: { verdict?: AdmissionVerdict | null; checks: CheckLike[] } | null, cluster?: string | null): string | undefined {
  const perm = manageReason(v, cluster);
  if (perm) return perm;
  if (!report) return 'Run the admission checks first.';
  if (!report.verdict) return 'The admission checks are still running.';
  if (report.verdict === 'ADMISSIBLE') return undefined;
  const failed = report.checks.filter((c) => c.result === 'FAIL');
  if (failed.length === 0) return 'The admission checks blocked admission.';
  // The server's words for it (admission.BlockedBy): admit's refusal and apeloractl say the same.
  return 'Admission blocked by ' + failed.map((c) => `${c.title}: ${inConsoleWords(c.message)}`).join('; ');
}
