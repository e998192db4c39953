// Resume a paused rolling reboot (resumeRollingReboot) where it stopped.
import { useMutation } from 'urql';
import { ResumeRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function ResumeRollingRebootDialog({ reboot, onClose }: { reboot: RollingRebootRowFragment; onClose(): void }) {
  const [, resume] = useMutation(ResumeRollingRebootMutation);
  return (
    <ConfirmDialog
      change="resumeRollingReboot"
      title={`Resume: rolling reboot ${reboot.id}`}
      machine=""
      confirmLabel="Resume"
      consequence={<p>{`It goes on from ${reboot.current ?? 'its end'}, stage ${reboot.stage}.`}</p>}
      planKey={`resume/${reboot.id}`}
      run={(dryRun, planHash) => resume({ input: { id: reboot.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
