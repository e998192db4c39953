// Commission a MAAS machine (commissionMachine), with the tests asked for or none.
import { useState } from 'react';
import { useMutation } from 'urql';
import { CommissionMachineMutation } from '../api/maas';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { TestsField } from '../components/TestsField';
import { parseTests } from '../lib/maas';
import type { Row } from '../lib/fleet';

export function CommissionDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, commission] = useMutation(CommissionMachineMutation);
  const [tests, setTests] = useState('');
  const [none, setNone] = useState(false);
  const m = row.maas!;
  return (
    <ConfirmDialog
      change="commissionMachine"
      title={`Commission ${m.hostname}`}
      machine={row.name}
      confirmLabel="Commission"
      consequence={
        <p>
          MAAS commissions <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>, now {m.status}): it boots the machine, inventories its hardware
          and runs the tests asked for. The machine is busy until MAAS is done.
        </p>
      }
      fieldNames={['tests']}
      fields={(errors) => (
        <>
          <label className="check">
            <input type="checkbox" checked={none} onChange={(e) => setNone(e.target.checked)} /> Run no tests after commissioning
          </label>
          {!none ? <TestsField label="Tests (optional)" value={tests} onChange={setTests} error={errors.get('tests')} /> : null}
        </>
      )}
      planKey={JSON.stringify([tests, none])}
      run={(dryRun, planHash) => {
        const p = parseTests(tests);
        return commission({ input: { systemId: m.systemId, tests: none ? [] : p.tests.length ? p.tests : null, dryRun, planHash } });
      }}
      onClose={onClose}
    />
  );
}
