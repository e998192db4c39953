// Pause a rolling reboot (pauseRollingReboot): the step in progress finishes, no further
// one starts.
import { useMutation } from 'urql';
import { PauseRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function PauseRollingRebootDialog({ op, onClose }: { op: RollingRebootRowFragment; onClose(): void }) {
  const [, pause] = useMutation(PauseRollingRebootMutation);
  return (
    <ConfirmDialog
      change="pauseRollingReboot"
      title={`Pause: rolling reboot ${op.id}`}
      machine=""
      confirmLabel="Pause"
      consequence={<p>The step in progress finishes; no further step starts until it is resumed.</p>}
      planKey={`pause/${op.id}`}
      run={(dryRun, planHash) => pause({ input: { id: op.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
