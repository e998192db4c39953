// Remove a member from the cluster (removeMember), its name typed to confirm.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RemoveMemberMutation } from '../api/members';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function RemoveMemberDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, remove] = useMutation(RemoveMemberMutation);
  const [force, setForce] = useState(false);
  return (
    <ConfirmDialog
      change="removeMember"
      title={`Remove member ${name}`}
      machine={name}
      danger
      confirmLabel="Remove member"
      typeToConfirm={name}
      typeLabel={`Type the member's name, ${name}, to confirm`}
      consequence={
        <p>
          Incus removes <strong>{name}</strong> from the cluster. Incus refuses while it still holds instances or is the last database member. The machine
          record stays: it becomes Registered again, and the audit keeps its history.
        </p>
      }
      fields={() => (
        <label className="check">
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> Force: drop the member without telling it (wipe its daemon
          afterwards)
        </label>
      )}
      planKey={JSON.stringify({ name, force })}
      run={(dryRun, planHash) => remove({ input: { name, force, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
