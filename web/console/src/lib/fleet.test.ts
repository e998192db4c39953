import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyFilter, emptyFilter, noCluster, filterParams, pageOf, parseFilter, parsePaging, provisionerOf, type Row } from './fleet';

function row(name: string, over: Partial<Row> = {}): Row {
  return {
    name, phase: 'REGISTERED', warnings: [], record: null, member: null, pendingJoinToken: null, maas: null, maasSteps: [], fence: null, ...over,
  } as Row;
}

const maas = (systemId: string, hardwareUuid: string, status = 'Ready') => ({ systemId, hardwareUuid, hostname: systemId, status, powerState: 'off', testingStatus: 'Passed' }) as unknown as Row['maas'];
const record = (kind: 'MANUAL' | 'MAAS') => ({ provisioner: { kind } }) as unknown as Row['record'];

const rows = [
  row('node-b', { phase: 'HELD', record: record('MANUAL'), warnings: [{ code: 'SCHEDULED_BY_GROUP', message: '' }] }),
  row('node-a', { phase: 'DISCOVERED', maas: maas('abc123', '4c4c-0001') }),
  row('m1', { phase: 'UNREGISTERED' }),
  row('node-10', { phase: 'ADMITTED', record: record('MAAS'), maas: maas('xyz789', '4c4c-0002', 'Deployed') }),
  row('node-9', { phase: 'ADMITTED', record: record('MANUAL') }),
];

test('provisioner: the record says, else MAAS when MAAS reports it, else none', () => {
  assert.deepEqual(rows.map(provisionerOf), ['MANUAL', 'MAAS', 'NONE', 'MAAS', 'MANUAL']);
});

test('search matches names, system ids and hardware UUIDs, case-insensitively', () => {
  const names = (q: string) => applyFilter(rows, { ...emptyFilter, q }).map((r) => r.name);
  assert.deepEqual(names('NODE-1'), ['node-10']);
  assert.deepEqual(names('abc1'), ['node-a']);
  assert.deepEqual(names('4C4C-0002'), ['node-10']);
  assert.deepEqual(names('  '), ['m1', 'node-9', 'node-10', 'node-a', 'node-b']);
});

test('names sort naturally; other keys sort by key then name; desc reverses', () => {
  assert.deepEqual(applyFilter(rows, emptyFilter).map((r) => r.name), ['m1', 'node-9', 'node-10', 'node-a', 'node-b']);
  assert.deepEqual(applyFilter(rows, { ...emptyFilter, sort: 'phase' }).map((r) => r.phase), ['DISCOVERED', 'HELD', 'ADMITTED', 'ADMITTED', 'UNREGISTERED']);
  assert.deepEqual(applyFilter(rows, { ...emptyFilter, desc: true }).map((r) => r.name)[0], 'node-b');
});

test('phase, warning and provisioner filters combine', () => {
  const f = (p: Partial<typeof emptyFilter>) => applyFilter(rows, { ...emptyFilter, ...p }).map((r) => r.name);
  assert.deepEqual(f({ phases: ['ADMITTED'] }), ['node-9', 'node-10']);
  assert.deepEqual(f({ phases: ['ADMITTED'], provisioner: 'MAAS' }), ['node-10']);
  assert.deepEqual(f({ warning: 'any' }), ['node-b']);
  assert.deepEqual(f({ warning: 'SCHEDULED_BY_GROUP' }), ['node-b']);
  assert.equal(f({ warning: 'none' }).length, 4);
  assert.deepEqual(f({ provisioner: 'NONE' }), ['m1']);
});

test('a filter survives the URL, defaults left out, unknown values ignored', () => {
  const f = { phases: ['HELD', 'ADMITTED'] as Row['phase'][], warning: 'any' as const, provisioner: 'MAAS' as const, cluster: 'rack2', q: 'node', sort: 'maas' as const, desc: true };
  const p = filterParams(f);
  assert.equal(p.toString(), 'phase=HELD%2CADMITTED&warning=any&provisioner=MAAS&cluster=rack2&q=node&sort=maas&dir=desc');
  assert.deepEqual(parseFilter(new URLSearchParams(p.toString())), f);
  assert.equal(filterParams(emptyFilter).toString(), '');
  assert.deepEqual(parseFilter(new URLSearchParams('phase=NOPE,HELD&warning=<script>&provisioner=x&sort=evil&cluster=<b>')), { ...emptyFilter, phases: ['HELD'] });
  assert.equal(parseFilter(new URLSearchParams('cluster=-')).cluster, noCluster);
  assert.equal(parseFilter(new URLSearchParams('q=' + 'a'.repeat(1000))).q.length, 200);
});

test('paging: pages of the chosen size, the last page when past the end', () => {
  const many = Array.from({ length: 250 }, (_, i) => i);
  assert.deepEqual(parsePaging(new URLSearchParams('')), { page: 1, size: 100 });
  assert.deepEqual(parsePaging(new URLSearchParams('page=-3&size=7')), { page: 1, size: 100 });
  const p3 = pageOf(many, { page: 3, size: 100 });
  assert.deepEqual([p3.rows.length, p3.rows[0], p3.page, p3.pages], [50, 200, 3, 3]);
  assert.equal(pageOf(many, { page: 9, size: 100 }).page, 3);
  assert.deepEqual(pageOf([], { page: 1, size: 50 }), { rows: [], page: 1, pages: 1 });
});

test('every warning the console labels, DRIFT included, is a filter kept in the URL', () => {
  const f = parseFilter(new URLSearchParams('warning=DRIFT'));
  assert.equal(f.warning, 'DRIFT');
  assert.equal(filterParams(f).get('warning'), 'DRIFT');
  const drifted = row('node-d', { warnings: [{ code: 'DRIFT', message: 'drift since …' }] });
  assert.deepEqual(applyFilter([...rows, drifted], f).map((r) => r.name), ['node-d']);
  assert.equal(parseFilter(new URLSearchParams('warning=NOPE')).warning, '');
});

test('the cluster filter keeps the rows of one cluster (the m1 of two clusters apart), or those in none; the column sorts', () => {
  const rs = [
    row('m1', { cluster: { name: 'default' } }),
    row('m1.rack2', { cluster: { name: 'rack2' } }),
    row('m2', { cluster: { name: 'rack2' } }),
    row('node-a', { phase: 'DISCOVERED', maas: maas('abc123', '4c4c-0001') }),
  ];
  const f = (cluster: string) => applyFilter(rs, { ...emptyFilter, cluster }).map((r) => r.name);
  assert.deepEqual(f('rack2'), ['m1.rack2', 'm2']);
  assert.deepEqual(f('default'), ['m1']);
  assert.deepEqual(f(noCluster), ['node-a']);
  assert.deepEqual(f(''), ['m1', 'm1.rack2', 'm2', 'node-a']);
  assert.deepEqual(applyFilter(rs, { ...emptyFilter, sort: 'cluster', desc: true }).map((r) => r.name), ['m2', 'm1.rack2', 'm1', 'node-a']);
});
