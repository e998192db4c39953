// Remove a member's fence mapping (removeFenceMapping), its name typed to confirm.
import { useMutation } from 'urql';
import { RemoveFenceMappingMutation } from '../api/fencing';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function RemoveFenceMappingDialog({ member, cluster, onClose, onDone }: { member: string; cluster?: string | null; onClose(): void; onDone(): void }) {
  const [, remove] = useMutation(RemoveFenceMappingMutation);
  return (
    <ConfirmDialog
      change="removeFenceMapping"
      title={`Remove the fence mapping of ${member}${cluster ? ` (cluster ${cluster})` : ''}`}
      machine={member}
      danger
      confirmLabel="Remove mapping"
      typeToConfirm={member}
      consequence={<p>apelora-worker will never power <strong>{member}</strong> off until it has a new mapping, even if it dies.</p>}
      planKey={JSON.stringify({ member, cluster })}
      run={(dryRun, planHash) => remove({ input: { member, cluster, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
