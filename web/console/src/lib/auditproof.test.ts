import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSHA256, checkInclusion } from './auditproof';

// Proofs made by golang.org/x/mod/sumdb/tlog (what the server uses) for a tree of 7
// leaves, the leaves being RecordHash("event i").
const root = 'tB1hsuDNzm6A+zectuO70A/7f7O6qCUZXvH4oOkWvX8=';
const proofs = [
  { leafIndex: 0, leafHash: 'o0Te2mOZ4HlwDxjKzMF07RHvGx0WQnHjqV2CxzRGaXc=', hashes: ['GJqUTdG9me1mhadWcNV6ZFkekB0ycU1vbFjlXYqe20Y=', 'eCNQFc/6MypAMBRzkc0Ob8x5BvFWcy/zmtMPntm7Wmk=', 'AxUgzKdSr6Z0XKjgZ6s1UlDaQ4i9WheoT3ZYtt4g3hk='] },
  { leafIndex: 4, leafHash: 'pSnTgw2cJsRXwu3mgmwrf0y4sEf8Sgk3YCDv93sXwS8=', hashes: ['0GLeeAZ2n1dRjcBuSvzKyiyPkDm/PEFevBeHJQKpIEw=', '6Fbu9QYI6NXK/lRH9usb0/rwr8bz7lF7JmNRu5TfRuY=', 'f0l1rlueoFoa1OtGPV8gkkCHBI6XjPazQgNu7FyQV+Y='] },
  { leafIndex: 6, leafHash: '6Fbu9QYI6NXK/lRH9usb0/rwr8bz7lF7JmNRu5TfRuY=', hashes: ['n8TSODTUbgn9dyNKBLnW6oY3KiRO9sz9h4w80kQ6BuU=', 'f0l1rlueoFoa1OtGPV8gkkCHBI6XjPazQgNu7FyQV+Y='] },
];

test('proofs of tlog check, and any change to them does not', async () => {
  const digest = browserSHA256();
  assert.ok(digest, 'node has WebCrypto');
  for (const p of proofs) {
    assert.equal(await checkInclusion({ ...p, treeSize: 7, rootHash: root }, digest), true, `leaf ${p.leafIndex}`);
    assert.equal(await checkInclusion({ ...p, treeSize: 3, rootHash: root }, digest), false, `leaf ${p.leafIndex} in a tree of 3`);
    assert.equal(await checkInclusion({ ...p, leafIndex: p.leafIndex ^ 1, treeSize: 7, rootHash: root }, digest), false, `leaf ${p.leafIndex} moved`);
    assert.equal(await checkInclusion({ ...p, hashes: p.hashes.slice(1), treeSize: 7, rootHash: root }, digest), false, `leaf ${p.leafIndex} short proof`);
    assert.equal(await checkInclusion({ ...p, treeSize: 7, rootHash: proofs[0].hashes[0] }, digest), false, `leaf ${p.leafIndex} other root`);
  }
  assert.equal(await checkInclusion({ ...proofs[0], leafIndex: 7, treeSize: 7, rootHash: root }, digest), false, 'a leaf past the tree');
});
