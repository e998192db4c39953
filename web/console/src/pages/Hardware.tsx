// Hardware profiles: what a class of machine must have. Admission compares each machine
// with the profile assigned to it (the hardware-profile-maas and hardware-profile-incus
// checks). Declare or replace a profile, remove one no machine uses.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RemoveHardwareProfileMutation, SetHardwareProfileMutation } from '../api/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Banner, Field, Loading, Problems, ReasonButton, Time } from '../components/ui';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { architectures, numberFields, requirements, toNumber } from '../lib/hardware';
import { Link, machinePath } from '../router';
import { useViewer } from '../viewer';
import { useHardwareProfiles } from '../hooks/hardware';
import type { HardwareProfileRowFragment } from '../gql/graphql';

export function HardwarePage() {
  const viewer = useViewer();
  const perm = manageReason(viewer);
  const { res, refresh } = useHardwareProfiles();
  const [dialog, setDialog] = useState<{ kind: 'set'; profile?: HardwareProfileRowFragment } | { kind: 'remove'; profile: HardwareProfileRowFragment } | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const list = res.data?.hardwareProfiles;
  return (
    <section aria-labelledby="hardware-title">
      <div className="page-head">
        <h1 id="hardware-title">Hardware profiles</h1>
        <ReasonButton variant="primary" reason={perm} onClick={() => setDialog({ kind: 'set' })} data-action="declare-profile">
          Declare a profile
        </ReasonButton>
      </div>
      <p className="hint">
        What a class of machine must have. Admission compares each machine with its profile twice: against what MAAS inventoried at commissioning,
        and against what Incus sees on the member. A shortfall fails the check with both values. Assign profiles on each machine's page.
      </p>
      {notice ? (
        <Banner tone="positive" title="Done">
          {notice}
        </Banner>
      ) : null}
      <Problems problems={problemsOf(res.error)} />
      {!list ? (
        res.error ? null : <Loading what="the hardware profiles" />
      ) : list.length === 0 ? (
        <div className="empty">
          <p>No hardware profile yet. Declare one, then assign it to the machines of that class.</p>
        </div>
      ) : (
        <div className="table-wrap">
          <table className="table profiles-table">
            <caption className="visually-hidden">Hardware profiles, by name</caption>
            <thead>
              <tr>
                <th scope="col">Profile</th>
                <th scope="col">Requires</th>
                <th scope="col">Description</th>
                <th scope="col">Assigned to</th>
                <th scope="col">Declared</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((p) => (
                <tr key={p.name} data-profile={p.name}>
                  <th scope="row">{p.name}</th>
                  <td>
                    <ul className="plain-list">
                      {requirements(p).map((r) => (
                        <li key={r}>{r}</li>
                      ))}
                    </ul>
                  </td>
                  <td className="description">{p.description || <span className="muted">—</span>}</td>
                  <td>
                    {p.machines.length ? (
                      <ul className="plain-list">
                        {p.machines.map((m) => (
                          <li key={m}><Link to={machinePath(m)}>{m}</Link></li>
                        ))}
                      </ul>
                    ) : (
                      <span className="muted">no machine</span>
                    )}
                  </td>
                  <td>
                    <Time at={p.setAt} />
                    <span className="sub">by {p.setBy}</span>
                  </td>
                  <td className="row-actions">
                    <ReasonButton reason={perm} onClick={() => setDialog({ kind: 'set', profile: p })} data-action="replace-profile">
                      Replace
                    </ReasonButton>
                    <ReasonButton reason={perm} variant="danger" onClick={() => setDialog({ kind: 'remove', profile: p })} data-action="remove-profile">
                      Remove
                    </ReasonButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {dialog?.kind === 'set' ? (
        <ProfileDialog
          profile={dialog.profile}
          onClose={() => setDialog(null)}
          onDone={(n) => {
            setNotice(n);
            refresh();
          }}
        />
      ) : null}
      {dialog?.kind === 'remove' ? (
        <RemoveProfileDialog
          profile={dialog.profile}
          onClose={() => setDialog(null)}
          onDone={(n) => {
            setNotice(n);
            refresh();
          }}
        />
      ) : null}
    </section>
  );
}

// ProfileDialog declares a profile, or replaces one (profile given: its name is kept).
function ProfileDialog({ profile, onClose, onDone }: { profile?: HardwareProfileRowFragment; onClose(): void; onDone(notice: string): void }) {
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

function RemoveProfileDialog({ profile, onClose, onDone }: { profile: HardwareProfileRowFragment; onClose(): void; onDone(notice: string): void }) {
  const [, remove] = useMutation(RemoveHardwareProfileMutation);
  return (
    <ConfirmDialog
      change="removeHardwareProfile"
      title={`Remove hardware profile ${profile.name}`}
      machine={profile.name}
      danger
      confirmLabel="Remove profile"
      consequence={
        <p>
          Apelora forgets the profile <strong>{profile.name}</strong>. The server refuses while a machine is assigned it
          {profile.machines.length ? ` (now ${profile.machines.join(', ')})` : ''}: clear or change theirs first.
        </p>
      }
      planKey={JSON.stringify({ profile: profile.name })}
      run={(dryRun, planHash) => remove({ input: { profile: profile.name, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone(`Hardware profile ${profile.name} removed.`);
      }}
      onClose={onClose}
    />
  );
}
