import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bytesText, durationText, hiddenColumnsText, maasHardware, speedText, memoryText, parseHiddenColumns, parseMachineTab, statusText, storageText } from './display';
import { parseTheme, resolveTheme } from './theme';

test('zeros from MAAS on a machine it has not commissioned read as unknown', () => {
  assert.equal(maasHardware({ status: 'New', architecture: 'amd64/generic', cpuCount: 0, memoryMiB: 0, storageMB: 0 }), 'amd64/generic · CPUs, memory and storage unknown until MAAS commissions it');
  assert.equal(maasHardware({ status: 'Commissioning', architecture: null, cpuCount: 0, memoryMiB: 0, storageMB: 0 }), 'architecture unknown · CPUs, memory and storage unknown until MAAS commissions it');
  assert.equal(maasHardware({ status: 'Ready', architecture: 'amd64/generic', cpuCount: 0, memoryMiB: 0, storageMB: 0 }), 'amd64/generic · CPUs, memory and storage unknown (MAAS reports none)');
  assert.ok(!maasHardware({ status: 'New', cpuCount: 0, memoryMiB: 0, storageMB: 0 }).includes('0 '));
});

test('what MAAS inventoried is shown, one unknown part at a time', () => {
  assert.equal(maasHardware({ status: 'Deployed', architecture: 'amd64/generic', cpuCount: 8, memoryMiB: 16384, storageMB: 512000 }), 'amd64/generic · 8 CPUs · 16 GiB · 512 GB storage');
  assert.equal(maasHardware({ status: 'Ready', architecture: 'arm64/generic', cpuCount: 1, memoryMiB: 0, storageMB: 0 }), 'arm64/generic · 1 CPU · memory unknown · storage unknown');
  assert.equal(memoryText(512), '512 MiB');
  assert.equal(storageText(800), '800 MB storage');
});

test('a status message that repeats the status is not shown twice', () => {
  assert.equal(statusText('Deployed', 'Deployed'), 'Deployed');
  assert.equal(statusText('Deployed', ' deployed '), 'Deployed');
  assert.equal(statusText('Deployed', ''), 'Deployed');
  assert.equal(statusText('Deployed', null), 'Deployed');
  assert.equal(statusText('Commissioning', 'Running test scripts'), 'Commissioning — Running test scripts');
});

test('the column choice keeps known columns in table order', () => {
  assert.deepEqual([...parseHiddenColumns('power, testing,bogus,,name')].sort(), ['power', 'testing']);
  assert.equal(parseHiddenColumns(null).size, 0);
  assert.equal(parseHiddenColumns('').size, 0);
  assert.equal(hiddenColumnsText(parseHiddenColumns('testing,phase')), 'phase,testing');
  assert.equal(hiddenColumnsText(new Set()), '');
});

test('the machine tab comes from the URL, the overview when unknown', () => {
  assert.equal(parseMachineTab('admission'), 'admission');
  assert.equal(parseMachineTab('history'), 'history');
  assert.equal(parseMachineTab('nonsense'), 'overview');
  assert.equal(parseMachineTab(null), 'overview');
});

test('the theme follows the system until one is chosen', () => {
  assert.equal(resolveTheme(parseTheme(null), true), 'dark');
  assert.equal(resolveTheme(parseTheme(null), false), 'light');
  assert.equal(resolveTheme(parseTheme('light'), true), 'light');
  assert.equal(resolveTheme(parseTheme('dark'), false), 'dark');
  assert.equal(parseTheme('purple'), 'system');
});

test('the MAAS hardware tables say unknown for what MAAS has not measured, never 0', () => {
  assert.equal(bytesText(3_840_755_982_336), '3.84 TB');
  assert.equal(bytesText(480_103_981_056), '480 GB');
  assert.equal(bytesText(999_999_999), '1000 MB');
  assert.equal(bytesText(0), 'unknown');
  assert.equal(speedText(25000), '25 Gbit/s');
  assert.equal(speedText(2500), '2.5 Gbit/s');
  assert.equal(speedText(100), '100 Mbit/s');
  assert.equal(speedText(null), 'unknown');
  assert.equal(durationText(null), '—');
  assert.equal(durationText(0), '0 s');
  assert.equal(durationText(180), '3 min');
  assert.equal(durationText(1234), '20 min 34 s');
  assert.equal(durationText(7260), '2 h 1 min');
});
