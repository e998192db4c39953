// Run MAAS hardware tests (runHardwareTests), the hostname typed again.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RunHardwareTestsMutation } from '../api/maas';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { TestsField } from '../components/TestsField';
import { Field } from '../components/ui';
import { parseTests } from '../lib/maas';
import type { Row } from '../lib/fleet';

export function HardwareTestsDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, runTests] = useMutation(RunHardwareTestsMutation);
  const [hostname, setHostname] = useState('');
  const [tests, setTests] = useState('');
  const m = row.maas!;
  return (
    <ConfirmDialog
      change="runHardwareTests"
      title={`Run hardware tests on ${m.hostname}`}
      machine={row.name}
      confirmLabel="Run tests"
      blocked={hostname.trim() === '' ? `Type the hostname, ${m.hostname}, first.` : undefined}
      consequence={
        <p>
          MAAS boots <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>, now {m.status}) into its test environment and runs the tests. Type the
          hostname again, exactly as MAAS shows it, so a slip cannot test the wrong machine.
        </p>
      }
      fieldNames={['hostname', 'tests']}
      fields={(errors) => (
        <>
          <Field label={`Hostname (type ${m.hostname})`} error={errors.get('hostname')}>
            {(a) => <input {...a} className="input" value={hostname} onChange={(e) => setHostname(e.target.value)} spellCheck={false} autoComplete="off" name="hostname" />}
          </Field>
          <TestsField label="Tests (optional)" value={tests} onChange={setTests} error={errors.get('tests')} />
        </>
      )}
      planKey={JSON.stringify([hostname, tests])}
      run={(dryRun, planHash) => {
        const p = parseTests(tests);
        return runTests({ input: { systemId: m.systemId, hostname, tests: p.tests.length ? p.tests : null, dryRun, planHash } });
      }}
      onClose={onClose}
    />
  );
}
