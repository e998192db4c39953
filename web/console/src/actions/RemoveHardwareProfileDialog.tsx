// Remove a hardware profile (removeHardwareProfile); the server refuses while a machine is
// assigned it.
import { useMutation } from 'urql';
import { RemoveHardwareProfileMutation } from '../api/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { HardwareProfileRowFragment } from '../gql/graphql';

export function RemoveHardwareProfileDialog({ profile, onClose, onDone }: { profile: HardwareProfileRowFragment; onClose(): void; onDone(notice: string): void }) {
  const [, remove] = useMutation(RemoveHardwareProfileMutation);
  return (
    <ConfirmDialog
      change="removeHardwareProfile"
      title={`Remove hardware profile ${profile.name}`}
      machine={profile.name}
      danger
      confirmLabel="Remove profile"
      consequence={
        <p>
          Apelora forgets the profile <strong>{profile.name}</strong>. The server refuses while a machine is assigned it
          {profile.machines.length ? ` (now ${profile.machines.join(', ')})` : ''}: clear or change theirs first.
        </p>
      }
      planKey={JSON.stringify({ profile: profile.name })}
      run={(dryRun, planHash) => remove({ input: { profile: profile.name, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone(`Hardware profile ${profile.name} removed.`);
      }}
      onClose={onClose}
    />
  );
}
