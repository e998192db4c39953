// Admit a member (admitMember); one with no machine record is registered first
// (registerMachine), in the same dialog.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RegisterMachineMutation } from '../api/machines';
import { AdmitMemberMutation } from '../api/members';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { Row } from '../lib/fleet';

// AdmitDialog admits a member. One with no machine record (the cluster's founding member, a
// member joined by hand) is registered first: Apelora admits only machines it has recorded.
// The dialog says so and takes the two steps in turn, each its own plan, confirmation and
// audit event: register, then admit.
export function AdmitDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [registered, setRegistered] = useState(!!row.record);
  const name = row.name;
  // Fixed when the dialog opens: the page reads the machine again once it is registered.
  const [twoSteps] = useState(!row.record);
  if (!registered) return <RegisterFirstDialog name={name} onRegistered={() => setRegistered(true)} onClose={onClose} />;
  return <AdmitStep name={name} title={twoSteps ? `Register and admit ${name}: step 2 of 2, admit` : `Admit ${name}`} registeredNow={twoSteps} onClose={onClose} />;
}

function RegisterFirstDialog({ name, onRegistered, onClose }: { name: string; onRegistered(): void; onClose(): void }) {
  const [, register] = useMutation(RegisterMachineMutation);
  return (
    <ConfirmDialog
      change="registerMachine"
      title={`Register and admit ${name}: step 1 of 2, register`}
      machine={name}
      confirmLabel="Register, then plan the admission"
      consequence={
        <>
          <p data-two-steps>
            <strong>{name}</strong> is a cluster member with no machine record, and Apelora admits only machines it has recorded. So admitting it takes
            two steps, each planned, confirmed and audited on its own:
          </p>
          <ol>
            <li>
              <strong>Register</strong> (this step): Apelora records {name} as a machine installed by hand. Nothing changes in Incus.
            </li>
            <li>
              <strong>Admit</strong> (next): every admission check runs again and, if none fails, automatic placement may reach {name}.
            </li>
          </ol>
          <p className="hint">Cancelling after the first step leaves {name} registered and not admitted: Admit stays offered on its page.</p>
        </>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => register({ input: { name, provisioner: 'MANUAL', dryRun, planHash } })}
      onDone={() => onRegistered()}
      onClose={onClose}
    />
  );
}

function AdmitStep({ name, title, registeredNow, onClose }: { name: string; title: string; registeredNow: boolean; onClose(): void }) {
  const [, admit] = useMutation(AdmitMemberMutation);
  return (
    <ConfirmDialog
      change="admitMember"
      title={title}
      machine={name}
      confirmLabel="Admit member"
      consequence={
        <>
          {registeredNow ? <p data-registered-now>✓ {name} is registered. Now its admission:</p> : null}
          <p>
            Apelora runs every admission check again and, if none fails, lets automatic placement reach <strong>{name}</strong>: it removes the
            scheduler.instance hold (if any), marks the member admitted and keeps its roles, groups, failure domain and description. Instances may be placed
            on it from then on.
          </p>
        </>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => admit({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
