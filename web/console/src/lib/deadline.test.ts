import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeadlineError, fetchWithDeadline, isRead, readDeadlineMs } from './deadline';

test('a read waits past the server\'s request timeout; a change has no deadline', () => {
  assert.equal(readDeadlineMs(10000), 25000);
  assert.ok(isRead(JSON.stringify({ query: 'query Machine($name: String!) { machine(name: $name) { name } }' })));
  assert.ok(isRead(JSON.stringify({ query: '{ viewer { name } }' })));
  assert.ok(!isRead(JSON.stringify({ query: 'mutation AdmitMember($input: AdmitMemberInput!) { admitMember(input: $input) { plan { planHash } } }' })));
  assert.ok(!isRead(JSON.stringify({ query: '# comment\nmutation { x }' })));
  assert.ok(!isRead('not json'));
  assert.ok(!isRead(undefined));
});

test('a read the server does not answer ends with a DeadlineError; a caller\'s abort still aborts', async () => {
  const hang: typeof fetch = (_input, init) =>
    new Promise((_resolve, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason)));
  const read = JSON.stringify({ query: '{ viewer { name } }' });
  // A request timeout of -2.4 s makes a deadline of 200 ms (the rule, not the production figure).
  const f = fetchWithDeadline(-2400, hang);
  await assert.rejects(f('/graphql', { method: 'POST', body: read }), (e: unknown) => e instanceof DeadlineError && /did not answer within/.test(e.message));
  const ctl = new AbortController();
  const p = fetchWithDeadline(60000, hang)('/graphql', { method: 'POST', body: read, signal: ctl.signal });
  ctl.abort(new Error('torn down'));
  await assert.rejects(p, /torn down/);
  // A mutation goes to fetch as it is.
  let seen: RequestInit | undefined;
  const spy: typeof fetch = async (_input, init) => {
    seen = init;
    return new Response('{}');
  };
  const m = { method: 'POST', body: JSON.stringify({ query: 'mutation { x }' }) };
  await fetchWithDeadline(1, spy)('/graphql', m);
  assert.equal(seen, m);
});
