import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultCluster, onlyChoice } from './clusters';

const env = { name: 'default', fromEnvironment: true };
const rack2 = { name: 'rack2', fromEnvironment: false };
const rack3 = { name: 'rack3', fromEnvironment: false };

test("the chooser starts on the machine's own cluster", () => {
  assert.equal(defaultCluster([env, rack2, rack3], 'rack2'), 'rack2');
  assert.equal(defaultCluster([rack3, env], 'rack3'), 'rack3');
});

test('a machine in no cluster starts on the cluster of APELORA_INCUS_*, wherever it is listed', () => {
  assert.equal(defaultCluster([rack2, env, rack3], null), 'default');
  assert.equal(defaultCluster([rack2, env, rack3], undefined), 'default');
  assert.equal(defaultCluster([rack2, env, rack3], ''), 'default');
});

test('a cluster no longer registered is not chosen: the environment’s is', () => {
  assert.equal(defaultCluster([env, rack2], 'gone'), 'default');
});

test('without the environment’s cluster, the first listed; nothing listed, nothing chosen', () => {
  assert.equal(defaultCluster([rack3, rack2], null), 'rack3');
  assert.equal(defaultCluster([], 'rack2'), '');
  assert.equal(defaultCluster([], null), '');
});

test('one cluster registered is shown, not offered', () => {
  assert.equal(onlyChoice([env]), 'default');
  assert.equal(onlyChoice([env, rack2]), null);
  assert.equal(onlyChoice([]), null);
});
