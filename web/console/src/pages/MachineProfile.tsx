// The machine page's hardware profile: the one assigned, what it asks, and assigning,
// changing or clearing it (each confirmed, naming the machine).
import { useState } from 'react';
import { ReasonButton } from '../components/ui';
import { manageReason } from '../lib/actions';
import { requirements } from '../lib/hardware';
import { Link } from '../router';
import { useViewer } from '../viewer';
import type { HardwareProfileRowFragment } from '../gql/graphql';
import { AssignHardwareProfileDialog } from '../actions/AssignHardwareProfileDialog';
import { ClearHardwareProfileDialog } from '../actions/ClearHardwareProfileDialog';

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
      {dialog === 'assign' ? <AssignHardwareProfileDialog machine={machine} current={profile?.name} onClose={() => setDialog(null)} onDone={onChanged} /> : null}
      {dialog === 'clear' && profile ? <ClearHardwareProfileDialog machine={machine} current={profile.name} onClose={() => setDialog(null)} onDone={onChanged} /> : null}
    </section>
  );
}
