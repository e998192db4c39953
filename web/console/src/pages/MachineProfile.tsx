// The machine page's hardware profile: the one assigned, what it asks, and assigning,
// changing or clearing it (each confirmed, naming the machine).
import { useState } from 'react';
import { useMutation } from 'urql';
import { useHardwareProfileChoices } from '../hooks/hardware';
import { AssignHardwareProfileMutation, ClearHardwareProfileMutation } from '../api/hardware';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field, Loading, ReasonButton } from '../components/ui';
import { manageReason } from '../lib/actions';
import { requirements } from '../lib/hardware';
import { Link } from '../router';
import { useViewer } from '../viewer';
import type { HardwareProfileRowFragment } from '../gql/graphql';

export function ProfileCard({ machine, registered, profile, onChanged }: { machine: string; registered: boolean; profile: HardwareProfileRowFragment | null | undefined; onChanged(): void }) {
  const viewer = useViewer();
  const [dialog, setDialog] = useState<'assign' | 'clear' | null>(null);
  const reason = manageReason(viewer) ?? (registered ? undefined : 'Register the machine first: a profile is assigned to a machine record.');
  return (
    <section className="card facts" aria-label="Hardware profile" data-profile-card>
      <h2>Hardware profile</h2>
      {profile ? (
        <dl>
          <dt>Profile</dt>
          <dd data-assigned-profile={profile.name}>
            <Link to="/hardware">{profile.name}</Link>
          </dd>
          <dt>Requires</dt>
          <dd>{requirements(profile).join(' · ')}</dd>
          {profile.description ? (
            <>
              <dt>Description</dt>
              <dd>{profile.description}</dd>
            </>
          ) : null}
        </dl>
      ) : (
        <p className="muted">None: admission skips the hardware profile checks.</p>
      )}
      <div className="actions">
        <ReasonButton reason={reason} onClick={() => setDialog('assign')} data-action="assign-profile">
          {profile ? 'Change profile' : 'Assign a profile'}
        </ReasonButton>
        {profile ? (
          <ReasonButton reason={reason} onClick={() => setDialog('clear')} data-action="clear-profile">
            Clear profile
          </ReasonButton>
        ) : null}
      </div>
      {dialog === 'assign' ? <AssignDialog machine={machine} current={profile?.name} onClose={() => setDialog(null)} onDone={onChanged} /> : null}
      {dialog === 'clear' && profile ? <ClearDialog machine={machine} current={profile.name} onClose={() => setDialog(null)} onDone={onChanged} /> : null}
    </section>
  );
}

function AssignDialog({ machine, current, onClose, onDone }: { machine: string; current?: string; onClose(): void; onDone(): void }) {
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

function ClearDialog({ machine, current, onClose, onDone }: { machine: string; current: string; onClose(): void; onDone(): void }) {
  const [, clear] = useMutation(ClearHardwareProfileMutation);
  return (
    <ConfirmDialog
      change="clearHardwareProfile"
      title={`Clear the hardware profile of ${machine}`}
      machine={machine}
      confirmLabel="Clear profile"
      consequence={
        <p>
          <strong>{machine}</strong> is no longer compared with <strong>{current}</strong>: its hardware profile checks are skipped from its next
          admission check on. The profile itself stays.
        </p>
      }
      planKey={JSON.stringify({ machine })}
      run={(dryRun, planHash) => clear({ input: { machine, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone();
      }}
      onClose={onClose}
    />
  );
}
