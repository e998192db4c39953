import { test } from 'node:test';
import assert from 'node:assert/strict';
import { admitReason, eraseReason, machineActions, manageReason, type Viewer } from './actions';
import { describe, fieldProblems, problemsOf, sessionLost } from './errors';
import { parseTests } from './maas';
import type { Row } from './fleet';

const admin: Viewer = { name: 'admin', permissions: ['MANAGE_INFRASTRUCTURE'] };
const eraser: Viewer = { name: 'root', permissions: ['MANAGE_INFRASTRUCTURE', 'HARDWARE_DELETE'] };
const viewer: Viewer = { name: 'eve', permissions: ['VIEW_INFRASTRUCTURE'] };

const row = (phase: Row['phase'], maasSteps: Row['maasSteps'] = []) => ({ name: 'n1', phase, maasSteps }) as unknown as Row;
const ids = (v: Viewer, r: Row) => machineActions(r, v).map((a) => a.id + (a.reason ? '!' : ''));

test('each phase offers its own changes', () => {
  assert.deepEqual(ids(admin, row('DISCOVERED')), ['register']);
  assert.deepEqual(ids(admin, row('REGISTERED')), ['approve', 'unregister']);
  assert.deepEqual(ids(admin, row('AWAITING_JOIN')), ['revoke']);
  assert.deepEqual(ids(admin, row('HELD')), ['admit', 'remove']);
  assert.deepEqual(ids(admin, row('ADMITTED')), ['evacuate', 'remove']);
  assert.deepEqual(ids(admin, row('EVACUATED')), ['restore', 'remove']);
  // Admit where the operator stands: a member joined without the hold, or with no machine
  // record (the founding member: registered first, in Admit's dialog).
  assert.deepEqual(ids(admin, row('UNHELD')), ['admit', 'evacuate', 'remove']);
  assert.deepEqual(ids(admin, row('UNREGISTERED')), ['admit', 'evacuate', 'register', 'remove']);
  // Restore for every evacuated member, with a machine record or without.
  const evacuated = { ...row('UNREGISTERED'), member: { status: 'EVACUATED' } } as unknown as Row;
  assert.deepEqual(ids(admin, evacuated), ['restore', 'register', 'remove']);
  assert.deepEqual(ids(admin, row('UNKNOWN')), ['approve!']);
});

test('a discovered machine, in any MAAS state, is offered Register and no MAAS step', () => {
  const why = 'MAAS machine nnnn03 has no machine record in Apelora: register it first';
  const steps: Row['maasSteps'] = ['COMMISSION', 'INSTALL', 'HARDWARE_TESTS', 'RELEASE'].map((step) => ({ step, allowed: false, reason: why })) as Row['maasSteps'];
  assert.deepEqual(ids(admin, row('DISCOVERED', steps)), ['register']);
  assert.deepEqual(ids(admin, row('DISCOVERED', [{ step: 'COMMISSION', allowed: true, reason: null }])), ['register']);
});

test('MAAS steps follow what the server says, with its reason', () => {
  const r = row('REGISTERED', [
    { step: 'COMMISSION', allowed: true, reason: null },
    { step: 'HARDWARE_TESTS', allowed: false, reason: 'MAAS machine x is Deployed: release it first' },
  ]);
  const acts = machineActions(r, admin);
  assert.deepEqual(acts.map((a) => a.id), ['approve', 'unregister', 'commission', 'test']);
  assert.equal(acts[3].reason, 'MAAS machine x is Deployed: release it first');
  assert.equal(acts[2].reason, undefined);
});

test('a viewer sees every change disabled, with the permission as the reason', () => {
  const acts = machineActions(row('HELD', [{ step: 'RELEASE', allowed: true, reason: null }]), viewer);
  assert.equal(acts.length, 3);
  for (const a of acts) assert.match(a.reason!, /manage-infrastructure/);
  assert.equal(manageReason(admin), undefined);
  assert.match(manageReason(null)!, /manage-infrastructure/);
});

test('a viewer who may manage some clusters only: changes in others, and about none, are disabled with why', () => {
  const rack1: Viewer = { name: 'ops', permissions: [], grants: [{ permission: 'MANAGE_INFRASTRUCTURE', cluster: 'rack1' }, { permission: 'HARDWARE_DELETE', cluster: 'rack1' }] };
  const inCluster = (c: string | null) => ({ ...row('HELD', [{ step: 'RELEASE', allowed: true, reason: null }]), cluster: c ? { name: c } : null }) as unknown as Row;
  assert.deepEqual(machineActions(inCluster('rack1'), rack1).map((a) => a.reason), [undefined, undefined, undefined]);
  for (const a of machineActions(inCluster('rack2'), rack1)) assert.equal(a.reason, 'You may manage rack1 only; this machine is in rack2.');
  for (const a of machineActions(inCluster(null), rack1)) assert.equal(a.reason, 'You may manage rack1 only; this change is about no single cluster.');
  assert.equal(manageReason(rack1), 'You may manage rack1 only; this change is about no single cluster.');
  assert.equal(eraseReason(rack1, 'rack1'), undefined);
  assert.match(eraseReason(rack1, 'rack2')!, /rack1 only/);
  assert.match(eraseReason({ ...rack1, grants: rack1.grants!.slice(0, 1) }, 'rack1')!, /hardware\.delete/);
});

test('erasing needs hardware.delete as well', () => {
  assert.match(eraseReason(admin)!, /hardware\.delete/);
  assert.equal(eraseReason(eraser), undefined);
  assert.match(eraseReason(viewer)!, /manage-infrastructure/);
});

test('Admit is enabled only when admissible, else names the failing check', () => {
  assert.match(admitReason(admin, null)!, /Run the admission checks/);
  assert.match(admitReason(admin, { verdict: null, checks: [] })!, /still running/);
  assert.equal(admitReason(admin, { verdict: 'ADMISSIBLE', checks: [] }), undefined);
  const blocked = admitReason(admin, {
    verdict: 'BLOCKED',
    checks: [
      { name: 'online', title: 'Member online', result: 'PASS', message: 'ok' },
      { name: 'kernel', title: 'Kernel', result: 'FAIL', message: 'kernel 6.1 is older than 6.12' },
    ],
  });
  // The same case as admission's TestBlockedByIsOneWording: one wording for BLOCKED.
  assert.equal(blocked, 'Admission blocked by Kernel: kernel 6.1 is older than 6.12');
  assert.match(admitReason(viewer, { verdict: 'ADMISSIBLE', checks: [] })!, /manage-infrastructure/);
});

test('errors: the server\'s message, field errors by field, BUSY names the machine', () => {
  const err = {
    graphQLErrors: [
      { message: 'name "X" is not valid', extensions: { code: 'INVALID_INPUT', field: 'name' } },
      { message: 'another change to node-1 is in progress', extensions: { code: 'BUSY' } },
    ],
  };
  const ps = problemsOf(err);
  assert.deepEqual(ps.map((p) => p.code), ['INVALID_INPUT', 'BUSY']);
  assert.equal(fieldProblems(ps).get('name'), 'name "X" is not valid');
  assert.match(describe(ps[1], 'node-1'), /^Someone else is changing node-1 right now/);
  assert.equal(describe(ps[0]), 'name "X" is not valid');
  assert.match(problemsOf({ networkError: new Error('boom') })[0].message, /could not be reached/);
  assert.deepEqual(problemsOf(undefined), []);
});

test('a lost session is UNAUTHENTICATED or HTTP 401, and nothing else', () => {
  assert.equal(sessionLost({ graphQLErrors: [{ message: 'expired', extensions: { code: 'UNAUTHENTICATED' } }] }), true);
  assert.equal(sessionLost({ response: { status: 401 } }), true);
  assert.equal(sessionLost({ graphQLErrors: [{ message: 'no', extensions: { code: 'FORBIDDEN' } }] }), false);
  assert.equal(sessionLost(null), false);
});

test('tests: split on commas and spaces, at most 16, none twice', () => {
  assert.deepEqual(parseTests(' smartctl-validate, memtester  fio '), { tests: ['smartctl-validate', 'memtester', 'fio'] });
  assert.deepEqual(parseTests(''), { tests: [] });
  assert.match(parseTests(Array.from({ length: 17 }, (_, i) => 't' + i).join(',')).error!, /at most 16/);
  assert.match(parseTests('a b a').error!, /named twice/);
});
