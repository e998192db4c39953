import { test } from 'node:test';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { allMatching, allows, bounded, counts, defaultStep, freeze, newRequestId, outcomeOfCode, planLine, ranged, shownHashes, summarise, toggled } from './bulk';
import type { Row } from './fleet';
import { codeLabel, codeWords } from './errors';

const shown = ['a', 'b', 'c', 'd', 'e'];

test('shift-click selects the range from the last click, in the order shown, either way', () => {
  let sel = toggled(new Set(), 'b', true);
  sel = ranged(sel, shown, 'b', 'd', true);
  assert.deepEqual([...sel].sort(), ['b', 'c', 'd']);
  sel = ranged(sel, shown, 'd', 'c', false);
  assert.deepEqual([...sel].sort(), ['b']);
  // An anchor no longer shown (filtered away) makes it a plain click.
  assert.deepEqual([...ranged(sel, shown, 'zz', 'e', true)].sort(), ['b', 'e']);
});

test('select all matching, then deselect one: the one stays out', () => {
  let sel = allMatching(new Set(['x']), shown, true);
  sel = toggled(sel, 'c', false);
  assert.deepEqual([...sel].sort(), ['a', 'b', 'd', 'e', 'x']);
  assert.deepEqual([...allMatching(sel, shown, false)], ['x']);
});

test('the frozen set is the selected rows in the fleet order, with their MAAS ids', () => {
  const rows = [
    { name: 'n2', maas: { systemId: 's2', hostname: 'n2' } },
    { name: 'n1', maas: null },
    { name: 'n3', maas: { systemId: 's3', hostname: 'n3' } },
  ] as unknown as Row[];
  assert.deepEqual(freeze(new Set(['n3', 'n1', 'gone']), rows), [
    { name: 'n1', systemId: undefined, hostname: undefined },
    { name: 'n3', systemId: 's3', hostname: 'n3' },
  ]);
});

test('the plan for a set: how many go ahead, refusals grouped by reason without the machine', () => {
  const targets = [{ name: 'n1', systemId: 'aa01' }, { name: 'n2', systemId: 'aa02' }, { name: 'n3', systemId: 'aa03' }, { name: 'n4' }];
  const s = summarise([
    { name: 'n1', outcome: 'ahead' },
    { name: 'n2', outcome: 'refused', code: 'FAILED_PRECONDITION', message: 'MAAS machine aa02 (n2) is Deployed: release it first' },
    { name: 'n3', outcome: 'refused', code: 'FAILED_PRECONDITION', message: 'MAAS machine aa03 (n3) is Deployed: release it first' },
    { name: 'n4', outcome: 'failed', code: 'UNAVAILABLE', message: 'MAAS did not answer' },
  ], targets);
  assert.equal(s.ahead, 1);
  assert.deepEqual(s.groups, [
    { code: 'FAILED_PRECONDITION', reason: 'MAAS machine … (…) is Deployed: release it first', machines: ['n2', 'n3'] },
    { code: 'UNAVAILABLE', reason: 'MAAS did not answer', machines: ['n4'] },
  ]);
});

test('refused is the server saying no; anything else failed and may be retried', () => {
  for (const c of ['FORBIDDEN', 'BUSY', 'FAILED_PRECONDITION', 'NOT_FOUND', 'INVALID_INPUT']) assert.equal(outcomeOfCode(c), 'refused', c);
  for (const c of ['UNAVAILABLE', 'INTERNAL', undefined]) assert.equal(outcomeOfCode(c), 'failed', String(c));
  assert.equal(counts([{ name: 'a', outcome: 'done' }, { name: 'b', outcome: 'failed' }, { name: 'c', outcome: 'done' }]).done, 2);
});

test('bounded keeps at most the limit in flight and runs every item', async () => {
  let running = 0;
  let most = 0;
  const ran: number[] = [];
  await bounded([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, 5));
    ran.push(n);
    running--;
  });
  assert.equal(most, 3);
  assert.deepEqual(ran.sort(), [1, 2, 3, 4, 5, 6, 7]);
  assert.match(newRequestId(), /^bulk-[0-9a-f]{18}$/);
});

// The same cases as apeloractl's refusedCode (cmd/apeloractl/bulk_test.go reads this file
// too), for every code the API answers with.
test('refused or failed, code by code, as apeloractl says', () => {
  const cases = JSON.parse(readFileSync('src/lib/bulk-outcomes.json', 'utf8')) as Record<string, 'refused' | 'failed'>;
  for (const [code, want] of Object.entries(cases)) assert.equal(outcomeOfCode(code), want, code);
});

test('each machine is confirmed with the hash of the plan shown for it; its plan reads in a line', () => {
  const ahead = { refused: false, planHash: 'h1', calls: [{ system: 'MAAS', request: 'commission', target: 's1', changes: [] }], refusals: [], warnings: [] };
  const refused = { refused: true, planHash: 'h2', calls: [], refusals: [{ code: 'FAILED_PRECONDITION', message: 'Deployed: release it first' }], warnings: [] };
  const results = [
    { name: 'a', outcome: 'ahead' as const, plan: ahead },
    { name: 'b', outcome: 'refused' as const, code: 'FAILED_PRECONDITION', message: 'Deployed: release it first', plan: refused },
    { name: 'c', outcome: 'failed' as const, code: 'UNAVAILABLE', message: 'MAAS not answering' },
  ];
  assert.deepEqual([...shownHashes(results)], [['a', 'h1'], ['b', 'h2']]);
  assert.equal(planLine(results[0]), 'MAAS commission on s1');
  assert.equal(planLine(results[1]), 'refused: Deployed: release it first — not possible in its present state (FAILED_PRECONDITION)');
  assert.equal(planLine(results[2]), 'MAAS not answering — an upstream or the server did not answer (UNAVAILABLE)');
});

test('every code a bulk result can carry has its words, in one place', () => {
  const cases = JSON.parse(readFileSync('src/lib/bulk-outcomes.json', 'utf8')) as Record<string, string>;
  for (const code of Object.keys(cases)) assert.ok(codeWords[code], `no words for ${code}`);
  assert.equal(codeLabel('BUSY'), 'another change to it is in progress (BUSY)');
  assert.equal(codeLabel('SOMETHING_NEW'), 'SOMETHING_NEW');
});

test('the bulk step offered first is the first the selection allows', () => {
  const r = (phase: string, steps: string[] = [], maas = true) =>
    ({ name: 'x', phase, maas: maas ? { systemId: 's' } : null, maasSteps: ['COMMISSION', 'INSTALL', 'HARDWARE_TESTS', 'RELEASE'].map((step) => ({ step, allowed: steps.includes(step), reason: null })) }) as unknown as Row;
  // Machines MAAS only discovered must be registered first: not Commission, which refuses them.
  assert.equal(defaultStep([r('DISCOVERED', ['COMMISSION']), r('DISCOVERED')]), 'register');
  assert.equal(defaultStep([r('REGISTERED', ['COMMISSION', 'RELEASE'])]), 'commission');
  assert.equal(defaultStep([r('REGISTERED', ['INSTALL'])]), 'install');
  assert.equal(defaultStep([r('HELD', [], false), r('REGISTERED')]), 'admit');
  assert.equal(defaultStep([r('UNREGISTERED', [], false)]), 'register');
  assert.ok(allows(r('UNHELD', [], false), 'admit') && !allows(r('UNREGISTERED', [], false), 'admit'));
  assert.equal(outcomeOfCode('SOMETHING_NEW'), 'failed');
});
