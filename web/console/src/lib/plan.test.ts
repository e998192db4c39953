import { test } from 'node:test';
import assert from 'node:assert/strict';
import { changeText, planOf, refusalReason, type Plan } from './plan';

const refused: Plan = {
  refused: true,
  steps: [],
  refusals: [{ code: 'ALREADY_EXISTS', message: 'a machine named node-a is already registered' }],
  warnings: [],
};

test('the plan is found in any mutation answer, and only there', () => {
  assert.equal(planOf({ registerMachine: { machine: null, plan: refused } }), refused);
  assert.equal(planOf({ registerMachine: { machine: { name: 'x' }, plan: null } }), null);
  assert.equal(planOf(null), null);
  assert.equal(planOf('plan'), null);
});

test('a refused plan gives the reason the button is disabled, with its code', () => {
  assert.equal(refusalReason(refused), 'It would be refused: a machine named node-a is already registered (ALREADY_EXISTS)');
  assert.equal(refusalReason({ ...refused, refused: false, refusals: [] }), undefined);
  assert.equal(refusalReason(null), undefined);
});

test('changes read before → after, a removal and a new value each in their words', () => {
  assert.equal(changeText({ field: 'config.scheduler.instance', before: 'manual', after: null }), 'config.scheduler.instance: manual → (removed)');
  assert.equal(changeText({ field: 'roles', before: 'a', after: 'a,b' }), 'roles: a → a,b');
  assert.equal(changeText({ field: 'erase', before: null, after: 'true' }), 'erase: true');
});
