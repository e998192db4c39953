// Enrolment: the machines on their way into the cluster, by phase, with the step each one
// is waiting for. Rows move on by themselves (AWAITING_JOIN → HELD when the server joins).
import { useState } from 'react';
import { useFleet } from '../hooks/fleet';
import { SourceBanners, StreamState } from './Fleet';
import { machineActions, type ActionId } from '../lib/actions';
import type { Row } from '../lib/fleet';
import type { Phase } from '../gql/graphql';
import { useViewer } from '../viewer';
import { Link, machinePath } from '../router';
import { ActionButton, Loading, MemberStatusBadge, PhaseBadge, Problems, Time } from '../components/ui';
import { problemsOf } from '../lib/errors';
import { MachineActionDialog } from '../actions/MachineActionDialog';

// sections group the phases the page shows, each with the steps its machines wait for.
const sections: { phases: Phase[]; title: string; help: string; actions: ActionId[] }[] = [
  { phases: ['REGISTERED'], title: 'Registered: approve enrolment', help: 'Approving issues a single-use join token, shown once with the command to run on the server.', actions: ['approve'] },
  { phases: ['AWAITING_JOIN'], title: 'Awaiting join', help: 'A join token is out. The row moves on by itself when the server joins; revoke the token if it was lost.', actions: ['revoke'] },
  {
    phases: ['HELD', 'UNHELD', 'UNREGISTERED'],
    title: 'Joined, not admitted: check and admit',
    help: 'Members Apelora has not admitted: held out of placement, joined without the hold, or with no machine record (the cluster\'s founding member, a member joined by hand). Admit runs every admission check again; a member with no record is registered first, in the same dialog. Open a machine to watch its checks.',
    actions: ['admit', 'restore', 'remove'],
  },
  { phases: ['ADMITTED', 'EVACUATED'], title: 'Members', help: 'Admitted members, and those in maintenance (Restore brings one back). Removing a member needs its name typed; the machine is Registered again afterwards.', actions: ['restore', 'remove'] },
];

export function EnrolmentPage() {
  const { res, live } = useFleet();
  const viewer = useViewer();
  const [dialog, setDialog] = useState<{ action: ActionId; row: Row } | null>(null);
  const rows = res.data?.fleet.machines;
  return (
    <section aria-labelledby="enrol-title">
      <h1 id="enrol-title">Enrolment</h1>
      <StreamState live={live} shown={!!res.data} />
      <SourceBanners sources={res.data?.fleet.sources} />
      <Problems problems={problemsOf(res.error)} />
      {!rows ? (
        res.error ? null : <Loading what="the machines" />
      ) : (
        sections.map((s) => {
          const list = rows.filter((r) => s.phases.includes(r.phase));
          return (
            <section key={s.title} className="phase-section" aria-label={s.title} data-section={s.phases[0]}>
              <h2>
                {s.title} <span className="count-badge">{list.length}</span>
              </h2>
              <p className="hint">{s.help}</p>
              {list.length === 0 ? (
                <p className="muted">None.</p>
              ) : (
                <table className="table">
                  <thead>
                    <tr>
                      <th scope="col">Machine</th>
                      <th scope="col">Phase</th>
                      <th scope="col">Member</th>
                      <th scope="col">Join token</th>
                      <th scope="col">Actions</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.map((r) => (
                      <tr key={r.name} data-machine={r.name} data-phase={r.phase}>
                        <th scope="row"><Link to={machinePath(r.name)}>{r.name}</Link></th>
                        <td><PhaseBadge phase={r.phase} /></td>
                        <td>{r.member ? <><MemberStatusBadge status={r.member.status} /> {r.member.held ? 'held' : ''}</> : '—'}</td>
                        <td>{r.pendingJoinToken ? <>expires <Time at={r.pendingJoinToken.expiresAt} /></> : '—'}</td>
                        <td className="row-actions">
                          {machineActions(r, viewer)
                            .filter((a) => s.actions.includes(a.id))
                            .map((a) => (
                              <ActionButton key={a.id} action={a} variant={a.id === 'approve' || a.id === 'admit' ? 'primary' : 'plain'} onRun={() => setDialog({ action: a.id, row: r })} />
                            ))}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </section>
          );
        })
      )}
      {dialog ? <MachineActionDialog action={dialog.action} row={dialog.row} onClose={() => setDialog(null)} /> : null}
    </section>
  );
}
