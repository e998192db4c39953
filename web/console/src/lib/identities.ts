// Identities as the console shows them: status in words, which permissions the viewer may
// grant, the permission rule checked before submit, the expiry as typed, and why Revoke is
// disabled (the server says why it would refuse: Identity.revokeRefusal).
import type { Permission } from '../gql/graphql';
import { manageReason, type Viewer } from './actions';
import { inConsoleWords } from './words';

export const permissionInfo: Record<Permission, { label: string; meaning: string }> = {
  VIEW_INFRASTRUCTURE: { label: 'view-infrastructure', meaning: 'Read machines, members and the audit trail.' },
  MANAGE_INFRASTRUCTURE: { label: 'manage-infrastructure', meaning: 'Every audited step: register, approve, admit, remove, provision. Includes viewing.' },
  HARDWARE_DELETE: { label: 'hardware.delete', meaning: 'Erase disks when releasing a machine. Only together with manage-infrastructure, which it widens.' },
};

export const allPermissions: Permission[] = ['VIEW_INFRASTRUCTURE', 'MANAGE_INFRASTRUCTURE', 'HARDWARE_DELETE'];

// sortPermissions orders permissions from the narrowest, as the form lists them.
export function sortPermissions(ps: readonly Permission[]): Permission[] {
  return [...ps].sort((a, b) => allPermissions.indexOf(a) - allPermissions.indexOf(b));
}

export function permissionLabel(p: Permission): string {
  return permissionInfo[p].label;
}

export interface IdentityLike {
  name: string;
  active: boolean;
  revokedAt?: string | null;
  expiresAt?: string | null;
  revokeRefusal?: string | null;
}

export type IdentityState = 'active' | 'revoked' | 'expired';

export function identityState(i: IdentityLike): IdentityState {
  if (i.revokedAt) return 'revoked';
  return i.active ? 'active' : 'expired';
}

// grantReason is why the viewer cannot grant p (an identity grants only what it holds,
// as the server checks), or undefined.
export function grantReason(v: Viewer | null | undefined, p: Permission): string | undefined {
  const perm = manageReason(v);
  if (perm) return perm;
  const holds = v!.permissions.includes(p) || (p === 'VIEW_INFRASTRUCTURE' && v!.permissions.includes('MANAGE_INFRASTRUCTURE'));
  return holds ? undefined : `You do not hold ${permissionLabel(p)}, so you cannot grant it.`;
}

// permissionsProblem is what the server would refuse in a set of permissions, in its
// words, before the form is sent.
export function permissionsProblem(perms: Permission[]): string | undefined {
  if (perms.length === 0) return 'Choose at least one permission (for example manage-infrastructure).';
  if (perms.includes('HARDWARE_DELETE') && !perms.includes('MANAGE_INFRASTRUCTURE')) {
    return 'hardware.delete only widens manage-infrastructure (erase disks on release): without it the identity could do nothing. Add manage-infrastructure, or leave hardware.delete out.';
  }
  return undefined;
}

export type ExpiryMode = 'never' | 'in' | 'at';

// expiryInput turns the form's expiry into createIdentity's fields. The server checks the
// duration's form and that the time is in the future; here only what cannot be sent.
export function expiryInput(mode: ExpiryMode, duration: string, at: string): { expiresIn?: string; expiresAt?: string; error?: { field: string; message: string } } {
  if (mode === 'in') {
    const d = duration.trim();
    if (!d) return { error: { field: 'expiresIn', message: 'Give a duration such as 30d, 12h or 90m.' } };
    return { expiresIn: d };
  }
  if (mode === 'at') {
    const t = at ? new Date(at) : null;
    if (!t || Number.isNaN(t.getTime())) return { error: { field: 'expiresAt', message: 'Give a date and time.' } };
    return { expiresAt: t.toISOString() };
  }
  return {};
}

// revokeReason is why Revoke is disabled for the identity, or undefined.
export function revokeReason(v: Viewer | null | undefined, i: IdentityLike): string | undefined {
  return manageReason(v) ?? (i.revokeRefusal ? inConsoleWords(i.revokeRefusal) : undefined);
}
