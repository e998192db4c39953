// Declare a hardware profile, or replace one (setHardwareProfile; profile given: its name is
// kept).
import { useState } from 'react';
import { useMutation } from 'urql';
import { SetHardwareProfileMutation } from '../api/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';
import { architectures, numberFields, toNumber } from '../lib/hardware';
import type { HardwareProfileRowFragment } from '../gql/graphql';

export function SetHardwareProfileDialog({ profile, onClose, onDone }: { profile?: HardwareProfileRowFragment; onClose(): void; onDone(notice: string): void }) {
  const [, set] = useMutation(SetHardwareProfileMutation);
  const [name, setName] = useState(profile?.name ?? '');
  const [description, setDescription] = useState(profile?.description ?? '');
  const [arch, setArch] = useState(profile?.architecture ?? 'x86_64');
  const [mins, setMins] = useState<Record<string, string>>(() =>
    Object.fromEntries(numberFields.map((f) => [f.key, profile ? String(profile[f.key]) : '0'])),
  );
  const bad = numberFields.find((f) => Number.isNaN(toNumber(mins[f.key])));
  const assigned = profile?.machines ?? [];
  return (
    <ConfirmDialog
      change="setHardwareProfile"
      title={profile ? `Replace hardware profile ${profile.name}` : 'Declare a hardware profile'}
      machine={name || 'the profile'}
      confirmLabel={profile ? 'Replace profile' : 'Declare profile'}
      wide
      blocked={bad ? `${bad.label}: give a whole number (0 asks nothing).` : !profile && name.trim() === '' ? 'Type a name first.' : undefined}
      consequence={
        profile ? (
          <p>
            The profile <strong>{profile.name}</strong> is replaced as a whole by the values below.{' '}
            {assigned.length
              ? `The next admission check of ${assigned.join(', ')} compares with them; members already admitted are not checked again.`
              : 'No machine is assigned it yet.'}
          </p>
        ) : (
          <p>Apelora records what this class of machine must have. Nothing is checked until the profile is assigned to a machine.</p>
        )
      }
      fieldNames={['profile', 'description', 'architecture', ...numberFields.map((f) => f.key)]}
      fields={(errors) => (
        <div className="form-grid">
          {profile ? null : (
            <Field label="Name" error={errors.get('profile')} hint="Lower-case letters, digits and hyphens, starting with a letter.">
              {(a) => <input {...a} className="input" value={name} onChange={(e) => setName(e.target.value)} spellCheck={false} autoComplete="off" name="profile" />}
            </Field>
          )}
          <Field label="Architecture" error={errors.get('architecture')} hint="As Incus reports it; MAAS's amd64 is x86_64.">
            {(a) => (
              <select {...a} className="input" value={arch} onChange={(e) => setArch(e.target.value)} name="architecture">
                {architectures.map((x) => (
                  <option key={x} value={x}>{x}</option>
                ))}
              </select>
            )}
          </Field>
          {numberFields.map((f) => (
            <Field key={f.key} label={f.label} error={errors.get(f.key) ?? (Number.isNaN(toNumber(mins[f.key])) ? 'Give a whole number.' : undefined)} hint={f.hint}>
              {(a) => (
                <input
                  {...a}
                  className="input"
                  inputMode="numeric"
                  value={mins[f.key]}
                  onChange={(e) => setMins({ ...mins, [f.key]: e.target.value })}
                  autoComplete="off"
                  name={f.key}
                />
              )}
            </Field>
          ))}
          <Field label="Description (optional)" error={errors.get('description')}>
            {(a) => <textarea {...a} className="input" rows={2} value={description} maxLength={1024} onChange={(e) => setDescription(e.target.value)} name="description" />}
          </Field>
        </div>
      )}
      planKey={JSON.stringify([name, description, arch, mins])}
      run={(dryRun, planHash) =>
        set({
          input: {
            dryRun,
            planHash,
            profile: profile?.name ?? name.trim(),
            description,
            architecture: arch,
            ...(Object.fromEntries(numberFields.map((f) => [f.key, toNumber(mins[f.key])])) as Record<(typeof numberFields)[number]['key'], number>),
          },
        })
      }
      onDone={(d) => {
        onClose();
        onDone(`Hardware profile ${d.setHardwareProfile.profile?.name ?? name.trim()} ${d.setHardwareProfile.previous ? 'replaced' : 'declared'}.`);
      }}
      onClose={onClose}
    />
  );
}
