// Clear a machine's hardware profile (clearHardwareProfile).
import { useMutation } from 'urql';
import { ClearHardwareProfileMutation } from '../api/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function ClearHardwareProfileDialog({ machine, current, onClose, onDone }: { machine: string; current: string; onClose(): void; onDone(): void }) {
  const [, clear] = useMutation(ClearHardwareProfileMutation);
  return (
    <ConfirmDialog
      change="clearHardwareProfile"
      title={`Clear the hardware profile of ${machine}`}
      machine={machine}
      confirmLabel="Clear profile"
      consequence={
        <p>
          <strong>{machine}</strong> is no longer compared with <strong>{current}</strong>: its hardware profile checks are skipped from its next
          admission check on. The profile itself stays.
        </p>
      }
      planKey={JSON.stringify({ machine })}
      run={(dryRun, planHash) => clear({ input: { machine, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
