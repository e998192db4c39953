// Unregister a machine (unregisterMachine): Apelora forgets its record, its name typed to
// confirm.
import { useMutation } from 'urql';
import { UnregisterMachineMutation } from '../api/machines';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function UnregisterDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, unregister] = useMutation(UnregisterMachineMutation);
  return (
    <ConfirmDialog
      change="unregisterMachine"
      title={`Unregister ${name}`}
      machine={name}
      danger
      confirmLabel="Unregister"
      typeToConfirm={name}
      consequence={<p>Apelora forgets the machine record <strong>{name}</strong>. Nothing changes in Incus or MAAS; the audit trail keeps its history.</p>}
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => unregister({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
