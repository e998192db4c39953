// The console's layout, as web/console/README.md describes it: every change the schema
// declares has its action component in src/actions/, changes are sent only from there
// (useMutation), reads and live refresh only from src/hooks/ (useQuery, useSubscription,
// useClient), and the GraphQL documents of src/api/<resource>.ts are used by those two
// folders alone. Read from the sources (build.sh runs the tests from web/console).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { changes } from './api/changes.gen';

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'gql' ? [] : sources(p);
    return /\.tsx?$/.test(name) && !name.endsWith('.test.ts') ? [p] : [];
  });
}

const src = 'src';
const files = existsSync(src) ? sources(src).map((path) => ({ path, text: readFileSync(path, 'utf8') })) : [];

test('the sources are read', () => {
  assert.ok(files.length > 40, `found ${files.length} sources under ${process.cwd()}/src: run the tests with build.sh --unit`);
});

test('every declared change has its action component, and changes are sent only from src/actions/', () => {
  const actions = files.filter((f) => f.path.startsWith(join(src, 'actions') + '/'));
  for (const name of Object.keys(changes)) {
    const by = actions.filter((f) => f.text.includes(`change="${name}"`));
    assert.ok(by.length > 0, `the change ${name} (schema/, @change) has no component in src/actions/ that confirms it (ConfirmDialog change="${name}")`);
  }
  for (const f of files) {
    if (f.path.startsWith(join(src, 'actions') + '/')) continue;
    assert.ok(!/\buseMutation\b/.test(f.text), `${f.path} sends a change itself: changes go through a component in src/actions/`);
    assert.ok(!/\bchange="/.test(f.text), `${f.path} confirms a change itself: changes go through a component in src/actions/`);
  }
});

test('reads and live refresh go through src/hooks/, and the documents of src/api/ are used there and in src/actions/ only', () => {
  const documents = readdirSync(join(src, 'api'))
    .filter((n) => n.endsWith('.ts') && !['client.ts', 'session.ts', 'changes.gen.ts'].includes(n))
    .map((n) => n.replace(/\.ts$/, ''));
  assert.ok(documents.includes('machines') && documents.includes('fleet'), `api modules: ${documents}`);
  for (const f of files) {
    const inHooks = f.path.startsWith(join(src, 'hooks') + '/');
    const inActions = f.path.startsWith(join(src, 'actions') + '/');
    if (!inHooks) {
      for (const hook of ['useQuery', 'useSubscription', 'useClient']) {
        assert.ok(!new RegExp(`\\b${hook}\\b`).test(f.text), `${f.path} uses urql's ${hook}: reads go through a hook in src/hooks/`);
      }
    }
    if (!inHooks && !inActions && !f.path.startsWith(join(src, 'api') + '/')) {
      for (const d of documents) {
        assert.ok(!f.text.includes(`/api/${d}'`), `${f.path} imports the documents of src/api/${d}.ts: use its hook (src/hooks/${d}.ts) or its action`);
      }
    }
  }
});
