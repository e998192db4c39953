// Turn the placement guard on or off (setPlacementGuard) in one cluster: the one named, or,
// left out, the only one.
import { useMutation } from 'urql';
import { SetPlacementGuardMutation } from '../api/placement';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function PlacementGuardDialog({ on, cluster, onClose, onDone }: { on: boolean; cluster?: string; onClose(): void; onDone(): void }) {
  const [, set] = useMutation(SetPlacementGuardMutation);
  return (
    <ConfirmDialog
      change="setPlacementGuard"
      title={(on ? 'Turn the placement guard on' : 'Turn the placement guard off') + (cluster ? ` in ${cluster}` : '')}
      machine={cluster ? `cluster ${cluster}` : 'the cluster'}
      danger={!on}
      confirmLabel={on ? 'Turn on' : 'Turn off'}
      consequence={
        on ? (
          <p>
            Incus places untargeted instances (new ones, evacuations, relocations) only on members Apelora has admitted, from the instant a member
            joins; an instance that names its member still lands there.
          </p>
        ) : (
          <p>
            Incus may place instances on a member between its join and the enrol script&apos;s hold, before any admission check has passed. Apelora
            removes its scriptlet and leaves no scriptlet, as before the guard.
          </p>
        )
      }
      planKey={JSON.stringify({ on, cluster })}
      run={(dryRun, planHash) => set({ input: { enabled: on, cluster, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
