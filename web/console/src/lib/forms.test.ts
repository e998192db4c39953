import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Viewer } from './actions';
import { fieldProblems, problemsOf } from './errors';
import { expiryInput, grantReason, identityState, permissionsProblem, revokeReason } from './identities';
import { configInput, rowErrors } from './memberConfig';
import { defaultImage, offeredImages } from './maas';
import { requirements, toNumber } from './hardware';
import { planOutcome, type Plan } from './plan';

const admin: Viewer = { name: 'admin', permissions: ['MANAGE_INFRASTRUCTURE'] };
const root: Viewer = { name: 'root', permissions: ['MANAGE_INFRASTRUCTURE', 'HARDWARE_DELETE'] };
const viewer: Viewer = { name: 'eve', permissions: ['VIEW_INFRASTRUCTURE'] };

test('identities: state in words, Revoke disabled with the server\'s reason', () => {
  assert.equal(identityState({ name: 'a', active: true }), 'active');
  assert.equal(identityState({ name: 'a', active: false, revokedAt: '2026-01-01T00:00:00Z' }), 'revoked');
  assert.equal(identityState({ name: 'a', active: false, expiresAt: '2026-01-01T00:00:00Z' }), 'expired');
  const last = 'identity "admin" is the last active one with manage-infrastructure: create another first';
  assert.equal(revokeReason(admin, { name: 'admin', active: true, revokeRefusal: last }), last);
  assert.equal(revokeReason(admin, { name: 'ops', active: true, revokeRefusal: null }), undefined);
  assert.match(revokeReason(viewer, { name: 'ops', active: true })!, /manage-infrastructure/);
});

test('identities: an identity grants only what it holds; hardware.delete only with manage', () => {
  assert.equal(grantReason(admin, 'VIEW_INFRASTRUCTURE'), undefined);
  assert.equal(grantReason(admin, 'MANAGE_INFRASTRUCTURE'), undefined);
  assert.match(grantReason(admin, 'HARDWARE_DELETE')!, /do not hold hardware\.delete/);
  assert.equal(grantReason(root, 'HARDWARE_DELETE'), undefined);
  assert.match(grantReason(viewer, 'VIEW_INFRASTRUCTURE')!, /manage-infrastructure/);
  assert.match(permissionsProblem(['HARDWARE_DELETE'])!, /only widens manage-infrastructure/);
  assert.match(permissionsProblem(['VIEW_INFRASTRUCTURE', 'HARDWARE_DELETE'])!, /only widens/);
  assert.equal(permissionsProblem(['MANAGE_INFRASTRUCTURE', 'HARDWARE_DELETE']), undefined);
  assert.match(permissionsProblem([])!, /at least one/);
});

test('identities: expiry as a duration, a time, or never', () => {
  assert.deepEqual(expiryInput('never', '90d', ''), {});
  assert.deepEqual(expiryInput('in', ' 30d ', ''), { expiresIn: '30d' });
  assert.equal(expiryInput('in', '  ', '').error?.field, 'expiresIn');
  assert.equal(expiryInput('at', '', '2030-05-01T10:30').expiresAt, new Date('2030-05-01T10:30').toISOString());
  assert.equal(expiryInput('at', '', '').error?.field, 'expiresAt');
});

test('member config: blank rows are not sent; the server\'s index lands on its row', () => {
  const rows = [
    { entity: 'storage-pool', name: ' local ', key: 'source', value: '/dev/sdb' },
    { entity: 'storage-pool', name: '', key: '', value: '' },
    { entity: 'network', name: 'uplink', key: 'parent', value: 'eno2' },
  ];
  const { input, rowOf } = configInput(rows);
  assert.deepEqual(input.map((r) => r.name), ['local', 'uplink']);
  assert.deepEqual(rowOf, [0, 2]);
  const problems = problemsOf({
    graphQLErrors: [{ message: 'the cluster has no member-specific key "network/uplink/parent"', extensions: { code: 'INVALID_INPUT', field: 'memberConfig', details: { index: 1 } } }],
  });
  const errs = fieldProblems(problems);
  assert.equal(errs.get('memberConfig.1'), problems[0].message);
  assert.deepEqual([...rowErrors(errs, rowOf)], [[2, problems[0].message]]);
});

test('MAAS images: those for the machine\'s architecture, newest Ubuntu first chosen', () => {
  const images = [
    { name: 'ubuntu/jammy', architectures: ['amd64/ga-22.04'] },
    { name: 'ubuntu/noble', architectures: ['amd64/ga-24.04', 'arm64/ga-24.04'] },
    { name: 'custom/rocky', architectures: ['arm64/generic'] },
  ];
  assert.deepEqual(offeredImages(images, 'amd64/generic').map((i) => i.name), ['ubuntu/jammy', 'ubuntu/noble']);
  assert.deepEqual(offeredImages(images, 'arm64/generic').map((i) => i.name), ['ubuntu/noble', 'custom/rocky']);
  assert.equal(offeredImages(images, null).length, 3);
  assert.equal(defaultImage(images), 'ubuntu/noble');
  assert.equal(defaultImage([{ name: 'custom/rocky', architectures: [] }]), 'custom/rocky');
  assert.equal(defaultImage([]), '');
});

test('hardware profiles: what a profile asks, in words; numbers as typed', () => {
  const p = { name: 'compute', description: '', architecture: 'x86_64', minCpuCores: 32, minMemoryMiB: 131072, minDisks: 2, minDiskSizeGB: 960, minNics: 2, minNicSpeedMbps: 25000 };
  assert.deepEqual(requirements(p), ['x86_64', '≥ 32 CPUs', '≥ 128 GiB memory', '≥ 2 disks of ≥ 960 GB', '≥ 2 NICs at ≥ 25 Gbit/s']);
  assert.deepEqual(requirements({ ...p, minCpuCores: 0, minMemoryMiB: 1000, minDisks: 0, minNics: 1, minNicSpeedMbps: 0 }), ['x86_64', '≥ 1000 MiB memory', '≥ 1 NIC']);
  assert.equal(toNumber(''), 0);
  assert.equal(toNumber(' 42 '), 42);
  assert.ok(Number.isNaN(toNumber('4x')));
});

test('a dry run\'s field error goes beside its field and disables the change; the rest go in the plan box', () => {
  const invalidName = problemsOf({
    graphQLErrors: [{ message: 'name "Node_1" is not valid: use 1–63 lower-case letters, digits and hyphens', extensions: { code: 'INVALID_INPUT', field: 'name' } }],
  });
  const o = planOutcome(invalidName, null, ['name', 'description', 'maasSystemId']);
  assert.equal(o.fields.get('name'), invalidName[0].message);
  assert.equal(o.problem, undefined);
  assert.equal(o.invalid, 'Correct the field marked above first.');
  assert.equal(o.fieldMessage, invalidName[0].message);

  // A field the dialog does not show: said in the plan box, and still not sendable.
  const elsewhere = planOutcome(invalidName, null, ['description']);
  assert.equal(elsewhere.fields.size, 0);
  assert.equal(elsewhere.problem, invalidName[0].message);
  assert.match(elsewhere.invalid!, /INVALID_INPUT/);

  // A refusal about a field (a name taken) is said beside it; the plan's refusal disables.
  const plan: Plan = { refused: true, calls: [], warnings: [], refusals: [{ code: 'ALREADY_EXISTS', message: 'a machine named "node-a" is already registered', field: 'name' }] };
  const taken = planOutcome([], plan, ['name']);
  assert.equal(taken.fields.get('name'), plan.refusals[0].message);
  assert.equal(taken.invalid, undefined); // the button says the plan's refusal (refusalReason)
  assert.equal(planOutcome([], { ...plan, refused: false, refusals: [] }, ['name']).invalid, undefined);

  // Not the user's input: no field, no block (the plan box says it).
  const down = planOutcome(problemsOf({ graphQLErrors: [{ message: 'MAAS could not be reached', extensions: { code: 'UNAVAILABLE' } }] }), null, ['name']);
  assert.equal(down.invalid, undefined);
  assert.equal(down.problem, 'MAAS could not be reached');
});

test('member config: a dry run\'s bad entry lands beside its row, not in the plan box', () => {
  const rows = [
    { entity: 'storage-pool', name: '', key: '', value: '' },
    { entity: 'network', name: 'uplink', key: 'nope', value: 'x' },
  ];
  const { rowOf } = configInput(rows);
  const fieldNames = ['memberConfig', ...rows.map((_, i) => `memberConfig.${i}`)];
  const problems = problemsOf({
    graphQLErrors: [{ message: 'the cluster has no member-specific key "network/uplink/nope"', extensions: { code: 'INVALID_INPUT', field: 'memberConfig', details: { index: 0 } } }],
  });
  const o = planOutcome(problems, null, fieldNames);
  assert.equal(o.problem, undefined);
  assert.ok(o.invalid);
  assert.deepEqual([...rowErrors(o.fields, rowOf)], [[1, problems[0].message]]);
});
