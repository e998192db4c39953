// Resume a paused rolling reboot (resumeRollingReboot) where it stopped.
import { useMutation } from 'urql';
import { ResumeRollingRebootMutation } from '../api/rolling';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';

export function ResumeRollingRebootDialog({ op, onClose }: { op: RollingRebootRowFragment; onClose(): void }) {
  const [, resume] = useMutation(ResumeRollingRebootMutation);
  return (
    <ConfirmDialog
      change="resumeRollingReboot"
      title={`Resume: rolling reboot ${op.id}`}
      machine=""
      confirmLabel="Resume"
      consequence={<p>{`It goes on from ${op.current ?? 'its end'}, step ${op.step}.`}</p>}
      planKey={`resume/${op.id}`}
      run={(dryRun, planHash) => resume({ input: { id: op.id, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
