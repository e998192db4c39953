// Register: record a machine Apelora will manage, by hand or from what MAAS discovered.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RegisterMachineMutation } from '../api/machines';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';
import { machinePath, useRouter } from '../router';

export type RegisterTarget =
  | { kind: 'manual'; name?: string }
  | { kind: 'maas'; systemId: string; hostname: string; hardwareUuid: string | null };

export function RegisterDialog({ target, onClose }: { target: RegisterTarget; onClose(): void }) {
  const [, register] = useMutation(RegisterMachineMutation);
  const { navigate } = useRouter();
  const [name, setName] = useState(target.kind === 'maas' ? target.hostname : (target.name ?? ''));
  const [description, setDescription] = useState('');
  const fixedName = target.kind === 'manual' && !!target.name;
  const shown = name || 'the machine';
  return (
    <ConfirmDialog
      change="registerMachine"
      title={target.kind === 'maas' ? `Register ${target.hostname} from MAAS` : fixedName ? `Register member ${name}` : 'Register a machine'}
      machine={shown}
      confirmLabel="Register"
      blocked={name.trim() === '' ? 'Type a name first.' : undefined}
      consequence={
        target.kind === 'maas' ? (
          <p>
            Apelora records MAAS machine <strong>{target.hostname}</strong> (system id <code>{target.systemId}</code>) as <strong>{shown}</strong>
            {target.hardwareUuid ? (
              <> and copies its hardware UUID <code>{target.hardwareUuid}</code> from MAAS</>
            ) : (
              <>; MAAS reports no hardware UUID for it yet, so Apelora copies it when MAAS first does (once commissioned), as an audit event of its own</>
            )}
            . Nothing changes in MAAS or Incus. Its MAAS steps (commission, install, tests, release) are then offered on its page.
          </p>
        ) : (
          <p>
            Apelora records <strong>{shown}</strong> as a machine installed by hand. Its name is also its Incus member name. Nothing changes in Incus until
            you approve its enrolment.
          </p>
        )
      }
      fieldNames={['name', 'description', 'maasSystemId']}
      fields={(errors) => (
        <>
          <Field label="Name" error={errors.get('name') ?? errors.get('maasSystemId')} hint="1–63 lower-case letters, digits and hyphens, starting with a letter.">
            {(a) => <input {...a} className="input" value={name} readOnly={fixedName} onChange={(e) => setName(e.target.value)} autoComplete="off" spellCheck={false} name="name" />}
          </Field>
          <Field label="Description (optional)" error={errors.get('description')}>
            {(a) => <input {...a} className="input" value={description} onChange={(e) => setDescription(e.target.value)} maxLength={1024} name="description" />}
          </Field>
        </>
      )}
      planKey={JSON.stringify([name, description])}
      run={(dryRun, planHash) =>
        register({
          input:
            target.kind === 'maas'
              ? { name, provisioner: 'MAAS', maasSystemId: target.systemId, description, dryRun, planHash }
              : { name, provisioner: 'MANUAL', description, dryRun, planHash },
        })
      }
      onDone={(d) => {
        onClose();
        navigate(machinePath(d.registerMachine.machine?.name ?? name));
      }}
      onClose={onClose}
    />
  );
}
