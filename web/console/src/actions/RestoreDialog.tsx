// Restore an evacuated member (restoreMember): the admission checks again, then its
// instances back, as the plan lists them.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RestoreMemberMutation } from '../api/maintenance';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { InstancesTable, type PlannedInstance } from '../components/InstancesTable';

export function RestoreDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, restore] = useMutation(RestoreMemberMutation);
  const [instances, setInstances] = useState<PlannedInstance[] | null>(null);
  return (
    <ConfirmDialog
      change="restoreMember"
      title={`Restore ${name}`}
      machine={name}
      confirmLabel="Restore member"
      wide
      consequence={
        <>
          <p>
            Apelora runs every admission check on <strong>{name}</strong> again and refuses on any failure; then Incus restores it: instances it moved
            come back, those it stopped start.
          </p>
          <InstancesTable instances={instances} caption={`Instances ${name}'s restore brings back`} />
        </>
      }
      planKey={JSON.stringify({ name })}
      run={async (dryRun, planHash) => {
        const res = await restore({ input: { name, dryRun, planHash } });
        const d = res.data?.restoreMember;
        if (dryRun && d) setInstances(d.instances);
        return res;
      }}
      onClose={onClose}
    />
  );
}
