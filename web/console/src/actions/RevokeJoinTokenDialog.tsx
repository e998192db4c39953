// Revoke the pending join token (revokeJoinToken).
import { useMutation } from 'urql';
import { RevokeJoinTokenMutation } from '../api/enrolment';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function RevokeJoinTokenDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, revoke] = useMutation(RevokeJoinTokenMutation);
  return (
    <ConfirmDialog
      change="revokeJoinToken"
      title={`Revoke the join token of ${name}`}
      machine={name}
      danger
      confirmLabel="Revoke token"
      consequence={<p>Incus cancels the pending join token for <strong>{name}</strong>; a server that has not joined yet can no longer use it. The machine is Registered again.</p>}
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => revoke({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
