// Cancel a rolling reboot (cancelRollingReboot): no further stage; the member in progress
// is left as it is.
import { useMutation } from 'urql';
import { CancelRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function CancelRollingRebootDialog({ reboot, onClose }: { reboot: RollingRebootRowFragment; onClose(): void }) {
  const [, cancel] = useMutation(CancelRollingRebootMutation);
  return (
    <ConfirmDialog
      change="cancelRollingReboot"
      danger
      title={`Cancel the rolling reboot: rolling reboot ${reboot.id}`}
      machine=""
      confirmLabel="Cancel the rolling reboot"
      consequence={<p>{`No further stage is taken. ${reboot.current ?? 'The member in progress'} is left as it is: restore it when it is up.`}</p>}
      planKey={`cancel/${reboot.id}`}
      run={(dryRun, planHash) => cancel({ input: { id: reboot.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
