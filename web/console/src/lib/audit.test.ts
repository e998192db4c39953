import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clipText, csvField, csvHeader, csvLine, exportName, jsonLine, paramText } from './audit';

test('audit: a long value is clipped to its start and keeps its length', () => {
  const long = 'x'.repeat(5000);
  const c = clipText(long, 100);
  assert.equal(c.clipped, true);
  assert.equal(c.length, 5000);
  assert.equal(Array.from(c.shown).length, 101);
  assert.deepEqual(clipText('node-1'), { shown: 'node-1', clipped: false, length: 6 });
  // Characters, not UTF-16 units: an emoji is not cut in half.
  assert.equal(clipText('😀😀😀', 2).shown, '😀😀…');
});

test('audit: parameters are the input\'s fields', () => {
  assert.equal(paramText({ input: { name: 'node-1', dryRun: false } }), 'name=node-1 · dryRun=false');
  assert.equal(paramText({ name: 'x' }), 'name=x');
  assert.equal(paramText(null), '');
  assert.equal(paramText({ input: { name: { text: 'nnn', bytes: 5000, sha256: 'ab', truncated: true, escaped: false } } }), 'name=nnn… (5000 bytes in all)');
});

test('audit: CSV quotes what it must and defuses formulas', () => {
  assert.equal(csvField('plain'), 'plain');
  assert.equal(csvField('a,b'), '"a,b"');
  assert.equal(csvField('say "hi"'), '"say ""hi"""');
  assert.equal(csvField('=cmd()'), "'=cmd()");
  assert.equal(csvField('-1'), "'-1");
  assert.equal(csvField(null), '');
  assert.equal(csvField({ a: 1 }), '"{""a"":1}"');
  const e = { id: '7', at: '2026-12-03T00:00:00Z', actor: 'admin', action: 'registerMachine', machine: 'n,1', outcome: 'SUCCEEDED', error: null, requestId: 'r1', parameters: {}, details: {} };
  assert.equal(csvLine(e), '7,2026-12-03T00:00:00Z,admin,registerMachine,"n,1",SUCCEEDED,,r1,{},{}\r\n');
  assert.equal(csvHeader.split(',').length, 10);
  const line = jsonLine(e);
  assert.ok(line.endsWith('\n'));
  assert.deepEqual(Object.keys(JSON.parse(line)), ['id', 'at', 'actor', 'action', 'machine', 'outcome', 'error', 'requestId', 'parameters', 'details']);
});

test('audit: an export is named after its filter', () => {
  const at = new Date('2026-12-03T10:11:12.345Z');
  assert.equal(exportName({ machine: 'node 1', actor: '' }, 'csv', at), 'apelora-audit_machine-node_1_20261203T101112Z.csv');
  assert.equal(exportName({}, 'jsonl', at), 'apelora-audit_20261203T101112Z.jsonl');
});
