import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyUpdate, emptyFleet, type FleetUpdate } from './fleetStream';
import type { Row } from './fleet';

const row = (name: string, phase: Row['phase'] = 'REGISTERED') => ({ name, phase, warnings: [] }) as unknown as Row;
const sources = (maasUp: boolean) => ({
  incus: { configured: true, available: true, message: 'ok', since: null },
  maas: {
    configured: true, available: maasUp, since: maasUp ? null : '2026-12-03T22:18:44Z',
    message: maasUp ? 'ok' : 'MAAS not answering (since 2026-12-03T22:18:44Z): machine state from MAAS is missing (no answer yet)',
  },
  clusters: [],
});
const update = (over: Partial<FleetUpdate>): FleetUpdate => ({ revision: 0, snapshot: false, added: [], changed: [], removed: [], sources: null, ...over });

test('a snapshot replaces everything; changes apply in revision order', () => {
  let s = applyUpdate(emptyFleet, update({ revision: 4, snapshot: true, added: [row('b'), row('a')], sources: sources(true) }));
  assert.deepEqual(s.rows.map((r) => r.name), ['a', 'b']);
  const untouched = s.rows[0];
  s = applyUpdate(s, update({ revision: 5, added: [row('c')], changed: [row('b', 'HELD')] }));
  assert.deepEqual(s.rows.map((r) => `${r.name}:${r.phase}`), ['a:REGISTERED', 'b:HELD', 'c:REGISTERED']);
  assert.equal(s.rows[0], untouched, 'an unchanged row keeps its object');
  s = applyUpdate(s, update({ revision: 6, removed: ['a'], sources: sources(false) }));
  assert.deepEqual(s.rows.map((r) => r.name), ['b', 'c']);
  assert.equal(s.sources?.maas.available, false);
  assert.equal(s.revision, 6);
  assert.equal(s.missed, false);
});

test('a change that skips a revision marks the fleet stale until a snapshot', () => {
  let s = applyUpdate(emptyFleet, update({ revision: 1, snapshot: true, added: [row('a')], sources: sources(true) }));
  s = applyUpdate(s, update({ revision: 3, added: [row('z')] }));
  assert.equal(s.missed, true);
  assert.deepEqual(s.rows.map((r) => r.name), ['a'], 'nothing from after the gap is applied');
  s = applyUpdate(s, update({ revision: 4, added: [row('y')] }));
  assert.equal(s.missed, true, 'still stale: no change applies after a gap');
  s = applyUpdate(s, update({ revision: 9, snapshot: true, added: [row('a'), row('z')] }));
  assert.equal(s.missed, false);
  assert.deepEqual(s.rows.map((r) => r.name), ['a', 'z']);
  assert.equal(s.sources?.incus.available, true, 'a snapshot without sources keeps the last');
});

test('a change before any snapshot is not applied', () => {
  const s = applyUpdate(emptyFleet, update({ revision: 1, added: [row('a')] }));
  assert.equal(s.missed, true);
  assert.equal(s.rows.length, 0);
});
