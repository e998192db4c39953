// Hardware profiles: what a class of machine must have. Admission compares each machine
// with the profile assigned to it (the hardware-profile-maas and hardware-profile-incus
// checks). Declare or replace a profile, remove one no machine uses.
import { useState } from 'react';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { requirements } from '../lib/hardware';
import { Link, machinePath } from '../router';
import { useViewer } from '../viewer';
import { useHardwareProfiles } from '../hooks/hardware';
import type { HardwareProfileRowFragment } from '../gql/graphql';
import { SetHardwareProfileDialog } from '../actions/SetHardwareProfileDialog';
import { RemoveHardwareProfileDialog } from '../actions/RemoveHardwareProfileDialog';

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
        <SetHardwareProfileDialog
          profile={dialog.profile}
          onClose={() => setDialog(null)}
          onDone={(n) => {
            setNotice(n);
            refresh();
          }}
        />
      ) : null}
      {dialog?.kind === 'remove' ? (
        <RemoveHardwareProfileDialog
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
