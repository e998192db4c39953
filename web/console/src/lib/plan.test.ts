import { test } from 'node:test';
import assert from 'node:assert/strict';
import { changeText, planOf, refusalReason, type Plan } from './plan';
import { changes, type ChangeName } from '../api/changes.gen';

const refused: Plan = {
  refused: true,
  calls: [],
  refusals: [{ code: 'ALREADY_EXISTS', message: 'a machine named node-a is already registered' }],
  warnings: [],
};

test('the plan is read from the answer of the change named, and only there', () => {
  assert.deepEqual(planOf({ registerMachine: { machine: null, plan: refused } }, 'registerMachine'), refused);
  // Its findings in the console's words (lib/words).
  const named = { ...refused, refusals: [{ code: 'FAILED_PRECONDITION', message: 'restore it (restoreMember) first' }] };
  assert.equal(planOf({ admitMember: { plan: named } }, 'admitMember')?.refusals[0].message, 'restore it (“Restore”) first');
  assert.equal(planOf({ registerMachine: { machine: { name: 'x' }, plan: null } }, 'registerMachine'), null);
  assert.equal(planOf({ admitMember: { plan: refused } }, 'registerMachine'), null);
  assert.equal(planOf(null, 'registerMachine'), null);
  assert.equal(planOf('plan', 'registerMachine'), null);
  assert.equal(planOf({ noSuchChange: { plan: refused } }, 'noSuchChange' as ChangeName), null);
});

test('every declared change takes a dry run and answers its plan', () => {
  const names = Object.keys(changes);
  assert.ok(names.length >= 18, `${names.length} declared changes`);
  for (const [name, c] of Object.entries(changes)) {
    assert.ok(c.input.endsWith('Input'), `${name}: input ${c.input}`);
    assert.ok(['MACHINE', 'IDENTITIES', 'HARDWARE_PROFILES', 'PLACEMENT_GUARD', 'ROLLING_REBOOTS', 'CLUSTERS'].includes(c.lock), `${name}: lock ${c.lock}`);
  }
});

test('a refused plan gives the reason the button is disabled, with its code', () => {
  assert.equal(refusalReason(refused), 'It would be refused: a machine named node-a is already registered — already exists (ALREADY_EXISTS)');
  assert.equal(refusalReason({ ...refused, refused: false, refusals: [] }), undefined);
  assert.equal(refusalReason(null), undefined);
});

test('changes read before → after, a removal and a new value each in their words', () => {
  assert.equal(changeText({ field: 'config.scheduler.instance', before: 'manual', after: null }), 'config.scheduler.instance: manual → (removed)');
  assert.equal(changeText({ field: 'roles', before: 'a', after: 'a,b' }), 'roles: a → a,b');
  assert.equal(changeText({ field: 'erase', before: null, after: 'true' }), 'erase: true');
});
