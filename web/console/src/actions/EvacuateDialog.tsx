// Evacuate a member for maintenance (evacuateMember): its instances and where they may
// land, from the plan, and the mode.
import { useState } from 'react';
import { useMutation } from 'urql';
import { EvacuateMemberMutation } from '../api/maintenance';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { InstancesTable, type PlannedInstance } from '../components/InstancesTable';
import { Field } from '../components/ui';
import type { EvacuationMode } from '../gql/graphql';

const modes: { value: '' | EvacuationMode; label: string }[] = [
  { value: '', label: "Each instance's cluster.evacuate" },
  { value: 'AUTO', label: 'auto' },
  { value: 'MIGRATE', label: 'migrate' },
  { value: 'LIVE_MIGRATE', label: 'live-migrate' },
  { value: 'STOP', label: 'stop (instances stay, stopped)' },
];

export function EvacuateDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, evacuate] = useMutation(EvacuateMemberMutation);
  const [mode, setMode] = useState<'' | EvacuationMode>('');
  const [preview, setPreview] = useState<{ instances: PlannedInstance[]; targets: { member: string; instances: number }[] } | null>(null);
  return (
    <ConfirmDialog
      change="evacuateMember"
      title={`Evacuate ${name}`}
      machine={name}
      confirmLabel="Evacuate member"
      wide
      consequence={
        <>
          <p>
            Incus takes <strong>{name}</strong> out for maintenance: it moves or stops every instance on it, each as its cluster.evacuate says (or the
            mode below). The member is then Evacuated: nothing is placed on it and the fencing worker never powers it off. Restore brings it back.
          </p>
          <InstancesTable instances={preview?.instances ?? null} caption={`Instances on ${name}`} />
          {preview ? (
            <p className="hint" data-targets={preview.targets.length}>
              {preview.targets.length
                ? `May land on: ${preview.targets.map((t) => `${t.member} (${t.instances} now)`).join(', ')}.`
                : 'No admitted member can take moved instances.'}
            </p>
          ) : null}
        </>
      }
      fields={() => (
        <Field label="Mode">
          {(a) => (
            <select {...a} className="input" value={mode} onChange={(e) => setMode(e.target.value as '' | EvacuationMode)} name="mode">
              {modes.map((m) => (
                <option key={m.value} value={m.value}>{m.label}</option>
              ))}
            </select>
          )}
        </Field>
      )}
      planKey={JSON.stringify({ name, mode })}
      run={async (dryRun, planHash) => {
        const res = await evacuate({ input: { name, mode: mode || null, dryRun, planHash } });
        const d = res.data?.evacuateMember;
        if (dryRun && d) setPreview({ instances: d.instances, targets: d.targets });
        return res;
      }}
      onClose={onClose}
    />
  );
}
