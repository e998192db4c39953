// Assign a hardware profile to a machine, or change it (assignHardwareProfile).
import { useState } from 'react';
import { useMutation } from 'urql';
import { AssignHardwareProfileMutation } from '../api/hardware';
import { useHardwareProfileChoices } from '../hooks/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field, Loading } from '../components/ui';
import { requirements } from '../lib/hardware';

export function AssignHardwareProfileDialog({ machine, current, onClose, onDone }: { machine: string; current?: string; onClose(): void; onDone(): void }) {
  const [, assign] = useMutation(AssignHardwareProfileMutation);
  const profiles = useHardwareProfileChoices();
  const list = (profiles.data?.hardwareProfiles ?? []).filter((p) => p.name !== current);
  const [chosen, setChosen] = useState('');
  const pick = chosen || list[0]?.name || '';
  const picked = list.find((p) => p.name === pick);
  return (
    <ConfirmDialog
      change="assignHardwareProfile"
      title={current ? `Change the hardware profile of ${machine}` : `Assign a hardware profile to ${machine}`}
      machine={machine}
      confirmLabel={current ? 'Change profile' : 'Assign profile'}
      blocked={
        profiles.data && list.length === 0
          ? 'No other hardware profile is declared: declare one on the Hardware page first.'
          : !pick
            ? 'Reading the hardware profiles…'
            : undefined
      }
      consequence={
        <p>
          From its next admission check on, <strong>{machine}</strong> is compared with {pick ? <strong>{pick}</strong> : 'the profile chosen'}
          {current ? <> instead of {current}</> : null}: against what MAAS inventoried, and against what Incus sees on the member. A shortfall blocks
          admission. A member already admitted is not checked again.
        </p>
      }
      fieldNames={['profile', 'machine']}
      fields={(errors) =>
        profiles.fetching && !profiles.data ? (
          <Loading what="the hardware profiles" />
        ) : (
          <Field label="Profile" error={errors.get('profile') ?? errors.get('machine')} hint={picked ? requirements(picked).join(' · ') : undefined}>
            {(a) => (
              <select {...a} className="input" value={pick} onChange={(e) => setChosen(e.target.value)} name="profile">
                {list.map((p) => (
                  <option key={p.name} value={p.name}>{p.name}</option>
                ))}
              </select>
            )}
          </Field>
        )
      }
      planKey={JSON.stringify({ machine, profile: pick })}
      run={(dryRun, planHash) => assign({ input: { machine, profile: pick, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
