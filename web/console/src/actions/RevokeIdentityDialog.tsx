// Revoke an identity (revokeIdentity): its token is refused, its sessions and websockets
// end at once.
import { useMutation } from 'urql';
import { RevokeIdentityMutation } from '../api/identities';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { IdentityRowFragment } from '../gql/graphql';

export function RevokeIdentityDialog({ identity, you, onClose, onDone }: { identity: IdentityRowFragment; you: boolean; onClose(): void; onDone(name: string): void }) {
  const [, revoke] = useMutation(RevokeIdentityMutation);
  const name = identity.name;
  return (
    <ConfirmDialog
      change="revokeIdentity"
      title={`Revoke identity ${name}`}
      machine={name}
      danger
      confirmLabel="Revoke identity"
      consequence={
        <>
          <p>
            The bearer token of <strong>{name}</strong> is refused from its next request, and its open console sessions and websockets end now, on
            every Apelora server. It cannot be undone: to give access again, create a new identity.
          </p>
          <p>The identity stays in the list, marked revoked by you.{you ? ' This is you: your console returns to the sign-in page.' : ''}</p>
        </>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => revoke({ input: { name, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone(name);
      }}
      onClose={onClose}
    />
  );
}
