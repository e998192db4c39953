// Start a rolling reboot (startRollingReboot) in one cluster, its members in the order
// chosen.
import { useState } from 'react';
import { useMutation } from 'urql';
import { StartRollingRebootMutation } from '../api/rolling';
import { useFleet } from '../hooks/fleet';
import { ConfirmDialog } from '../components/ConfirmDialog';

export function StartRollingRebootDialog({ cluster, onClose }: { cluster?: string; onClose(): void }) {
  const [, start] = useMutation(StartRollingRebootMutation);
  const { res: fleet } = useFleet();
  // The cluster's members, by their names in the cluster (a row named m1.rack2 is member
  // m1 of rack2).
  const members = (fleet.data?.fleet.machines ?? [])
    .filter((r) => r.member && (!cluster || r.cluster?.name === cluster))
    .map((r) => (cluster && r.name.endsWith('.' + cluster) ? r.name.slice(0, -cluster.length - 1) : r.name));
  const [chosen, setChosen] = useState<string[]>([]);
  const toggle = (m: string) => setChosen((c) => (c.includes(m) ? c.filter((x) => x !== m) : [...c, m]));
  return (
    <ConfirmDialog
      change="startRollingReboot"
      title={cluster ? `Start a rolling reboot in ${cluster}` : 'Start a rolling reboot'}
      machine=""
      confirmLabel="Start the rolling reboot"
      blocked={chosen.length === 0 ? 'Choose the members to reboot first.' : undefined}
      consequence={
        <p>
          Each member is rebooted in the order chosen ({chosen.join(', ') || 'none yet'}): evacuated, powered off and on through MAAS, waited for, checked
          and restored. Other members must be up and not evacuated before each one.
        </p>
      }
      fieldNames={['members']}
      fields={(errors) => (
        <fieldset className="field">
          <legend>Members, in the order they are chosen</legend>
          {errors.get('members') ? <div className="field-error">{errors.get('members')}</div> : null}
          <ul className="checks">
            {members.map((m) => (
              <li key={m}>
                <label>
                  <input type="checkbox" checked={chosen.includes(m)} onChange={() => toggle(m)} /> {m}
                  {chosen.includes(m) ? ` (${chosen.indexOf(m) + 1})` : ''}
                </label>
              </li>
            ))}
          </ul>
        </fieldset>
      )}
      planKey={JSON.stringify({ chosen, cluster })}
      run={(dryRun, planHash) => start({ input: { members: chosen, cluster, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
