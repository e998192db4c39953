// Cancel a rolling reboot (cancelRollingReboot): no further step; the member in progress
// is left as it is.
import { useMutation } from 'urql';
import { CancelRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function CancelRollingRebootDialog({ op, onClose }: { op: RollingRebootRowFragment; onClose(): void }) {
  const [, cancel] = useMutation(CancelRollingRebootMutation);
  return (
    <ConfirmDialog
      change="cancelRollingReboot"
      danger
      title={`Cancel the rolling reboot: rolling reboot ${op.id}`}
      machine=""
      confirmLabel="Cancel the rolling reboot"
      consequence={<p>{`No further step is taken. ${op.current ?? 'The member in progress'} is left as it is: restore it when it is up.`}</p>}
      planKey={`cancel/${op.id}`}
      run={(dryRun, planHash) => cancel({ input: { id: op.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
