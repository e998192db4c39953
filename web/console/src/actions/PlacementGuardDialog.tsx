// Turn the placement guard on or off (setPlacementGuard).
import { useMutation } from 'urql';
import { SetPlacementGuardMutation } from '../api/placement';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function PlacementGuardDialog({ on, onClose, onDone }: { on: boolean; onClose(): void; onDone(): void }) {
  const [, set] = useMutation(SetPlacementGuardMutation);
  return (
    <ConfirmDialog
      change="setPlacementGuard"
      title={on ? 'Turn the placement guard on' : 'Turn the placement guard off'}
      machine="the cluster"
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
      planKey={JSON.stringify({ on })}
      run={(dryRun, planHash) => set({ input: { enabled: on, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
