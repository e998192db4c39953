// Remove an Incus cluster (removeCluster); the server refuses while anything names it.
import { useMutation } from 'urql';
import { RemoveClusterMutation } from '../api/clusters';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function RemoveClusterDialog({ name, onClose, onDone }: { name: string; onClose(): void; onDone(notice: string): void }) {
  const [, remove] = useMutation(RemoveClusterMutation);
  return (
    <ConfirmDialog
      change="removeCluster"
      title={`Remove cluster ${name}`}
      machine={name}
      danger
      confirmLabel="Remove cluster"
      typeToConfirm={name}
      consequence={
        <p>
          Apelora forgets the cluster <strong>{name}</strong>. The server refuses while a machine record, fence mapping, admission, rolling reboot or
          maintenance task names it. Nothing changes in Incus.
        </p>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => remove({ input: { name, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone(`Cluster ${name} removed.`);
      }}
      onClose={onClose}
    />
  );
}
