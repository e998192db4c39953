// Pause a rolling reboot (pauseRollingReboot): the stage in progress finishes, no further
// one starts.
import { useMutation } from 'urql';
import { PauseRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function PauseRollingRebootDialog({ reboot, onClose }: { reboot: RollingRebootRowFragment; onClose(): void }) {
  const [, pause] = useMutation(PauseRollingRebootMutation);
  return (
    <ConfirmDialog
      change="pauseRollingReboot"
      title={`Pause: rolling reboot ${reboot.id}`}
      machine=""
      confirmLabel="Pause"
      consequence={<p>The stage in progress finishes; no further stage starts until it is resumed.</p>}
      planKey={`pause/${reboot.id}`}
      run={(dryRun, planHash) => pause({ input: { id: reboot.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
