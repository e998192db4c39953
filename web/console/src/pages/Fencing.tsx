// Fencing: the cluster as fencing sees it, each member's mapping to the MAAS machine that
// powers it (offered from MAAS), the drills' last results, and fence progress live.
import { useState } from 'react';
import { useFencing } from '../hooks/fencing';
import { useFleet } from '../hooks/fleet';
import { manageReason } from '../lib/actions';
import { codeTitle } from '../lib/phases';
import { problemsOf } from '../lib/errors';
import { useViewer } from '../viewer';
import { Link, machinePath } from '../router';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import type { FenceEventRowFragment } from '../gql/graphql';
import { inConsoleWords } from '../lib/words';
import { SetFenceMappingDialog } from '../actions/SetFenceMappingDialog';
import { RemoveFenceMappingDialog } from '../actions/RemoveFenceMappingDialog';
import { PlacementGuardDialog } from '../actions/PlacementGuardDialog';
import { useClusterChoices } from '../hooks/clusters';

export function FencingPage() {
  const viewer = useViewer();
  const perm = manageReason(viewer);
  const { res, refresh, events } = useFencing();
  const { res: fleet } = useFleet();
  const [dialog, setDialog] = useState<
    { kind: 'set'; member: string; cluster: string | null } | { kind: 'remove'; member: string; cluster: string | null } | { kind: 'guard'; on: boolean } | null
  >(null);
  const [notice, setNotice] = useState<string | null>(null);
  // The guard shown here is the cluster of APELORA_INCUS_*'s (the Clusters page has each
  // cluster's): its switch names that cluster, so it is not refused once several are registered.
  const choices = useClusterChoices();
  const envCluster = choices.data?.clusters.find((x) => x.fromEnvironment)?.name;

  const c = res.data?.cluster;
  const mappings = res.data?.fenceMappings ?? [];
  const rows = fleet.data?.fleet.machines ?? [];
  // A member is (cluster, name): a member name is unique within its cluster only.
  const key = (cluster: string | null | undefined, name: string) => `${cluster ?? ''}/${name}`;
  const listed = new Map<string, { cluster: string | null; name: string; row: string }>();
  for (const r of rows) {
    if (r.member) listed.set(key(r.cluster?.name, r.member.name), { cluster: r.cluster?.name ?? null, name: r.member.name, row: r.name });
  }
  for (const m of mappings) {
    if (!listed.has(key(m.cluster, m.member))) listed.set(key(m.cluster, m.member), { cluster: m.cluster ?? null, name: m.member, row: m.member });
  }
  const clustered = new Set([...listed.values()].map((m) => m.cluster)).size > 1;
  const members = [...listed.values()].sort((a, b) => a.name.localeCompare(b.name) || (a.cluster ?? '').localeCompare(b.cluster ?? ''));
  return (
    <section aria-labelledby="fencing-title">
      <h1 id="fencing-title">Fencing</h1>
      <Problems problems={problemsOf(res.error)} />
      {notice ? <Banner tone="positive" title="Mapping set">{notice}</Banner> : null}
      {!c ? (
        res.error ? null : <Loading what="the cluster" />
      ) : (
        <>
          {c.warnings.map((w) => (
            <Banner key={w.code} tone={w.code === 'UNMAPPED_MEMBERS' ? 'caution' : 'negative'} title={codeTitle(w.code)}>
              {inConsoleWords(w.message)}
            </Banner>
          ))}
          <div className="facts-grid">
            <section className="card facts" aria-label="Cluster">
              <h2>Cluster</h2>
              <dl>
                <dt>Members</dt>
                <dd>{c.members === null ? 'unknown (Incus could not be asked)' : `${c.members} (${c.offlineMembers ?? '?'} offline)`}</dd>
                <dt>Healing threshold</dt>
                <dd>{c.healingThreshold === null ? 'unknown' : c.healingThreshold === 0 ? '0 (off, as it should be)' : `${c.healingThreshold} s`}</dd>
                <dt>Offline threshold</dt>
                <dd>{c.offlineThreshold === null ? 'unknown' : `${c.offlineThreshold} s`}</dd>
                <dt>Unmapped members</dt>
                <dd>{c.unmappedMembers === null ? 'unknown' : c.unmappedMembers.join(', ') || 'none'}</dd>
                <dt>Placement guard</dt>
                <dd data-guard={c.placementGuard?.state ?? 'UNKNOWN'}>
                  {c.placementGuard ? (
                    <>
                      <ReasonButton
                        reason={manageReason(viewer, envCluster) ?? (c.placementGuard.state === 'FOREIGN' ? 'Incus has a placement scriptlet Apelora did not write: Apelora leaves it alone.' : undefined)}
                        role="switch"
                        aria-checked={c.placementGuard.state === 'ON'}
                        aria-label="Placement guard"
                        onClick={() => setDialog({ kind: 'guard', on: c.placementGuard?.state !== 'ON' })}
                        data-action="placement-guard"
                      >
                        {c.placementGuard.state === 'ON' ? 'On' : c.placementGuard.state === 'OFF' ? 'Off' : 'Foreign scriptlet'}
                      </ReasonButton>{' '}
                      <span className="sub">{inConsoleWords(c.placementGuard.message)}</span>
                    </>
                  ) : (
                    'unknown (Incus could not be asked)'
                  )}
                </dd>
              </dl>
            </section>
            <section className="card facts" aria-label="Fence worker">
              <h2>Fence worker</h2>
              {c.fenceWorker ? (
                <dl>
                  <dt>Worker</dt>
                  <dd>{c.fenceWorker.worker}</dd>
                  <dt>Leading since</dt>
                  <dd><Time at={c.fenceWorker.leaderSince} /></dd>
                  <dt>Last round</dt>
                  <dd><Time at={c.fenceWorker.lastRoundAt} /></dd>
                  <dt>Limits</dt>
                  <dd>offline after {c.fenceWorker.offlineAfterSeconds} s · cooldown {c.fenceWorker.cooldownSeconds} s · confirm within {c.fenceWorker.confirmTimeoutSeconds} s</dd>
                </dl>
              ) : (
                <p className="muted">No apelora-worker has ever led: dead members are not fenced.</p>
              )}
            </section>
          </div>
          <h2>Members and their mappings</h2>
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Member</th>
                {clustered ? <th scope="col">Cluster</th> : null}
                <th scope="col">MAAS system id</th>
                <th scope="col">Hardware UUID</th>
                <th scope="col">Last drill</th>
                <th scope="col">Outage / last event</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {members.map(({ cluster, name, row }) => {
                const mp = mappings.find((m) => m.member === name && (m.cluster ?? null) === cluster);
                return (
                  <tr key={key(cluster, name)} data-member={name} data-cluster={cluster ?? ''}>
                    <th scope="row"><Link to={machinePath(row)}>{name}</Link></th>
                    {clustered ? <td>{cluster ?? <span className="muted">unknown</span>}</td> : null}
                    <td>{mp?.maasSystemId ?? <span className="muted">not mapped</span>}</td>
                    <td>{mp?.hardwareUuid ?? '—'}</td>
                    <td>
                      {mp?.lastDrill ? (
                        <span>
                          {mp.lastDrill.ok ? '✓ ready' : `✕ ${inConsoleWords(mp.lastDrill.problem ?? '')}`} <span className="sub">power {mp.lastDrill.powerState ?? 'unknown'}, <Time at={mp.lastDrill.at} /></span>
                        </span>
                      ) : mp ? (
                        'not drilled yet'
                      ) : (
                        '—'
                      )}
                    </td>
                    <td>
                      {mp?.offlineSince ? <>offline since <Time at={mp.offlineSince} /><br /></> : null}
                      {mp?.lastEvent ? `${mp.lastEvent.kind}: ${inConsoleWords(mp.lastEvent.message)}` : '—'}
                    </td>
                    <td className="row-actions">
                      <ReasonButton reason={perm} onClick={() => setDialog({ kind: 'set', member: name, cluster })} data-action="set-mapping">
                        {mp ? 'Change mapping' : 'Set mapping'}
                      </ReasonButton>
                      {mp ? (
                        <ReasonButton reason={perm} variant="danger" onClick={() => setDialog({ kind: 'remove', member: name, cluster })} data-action="remove-mapping">
                          Remove
                        </ReasonButton>
                      ) : null}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </>
      )}
      <h2>Fence progress</h2>
      <p className="hint">Every decision apelora-worker takes, newest first, arriving live.</p>
      <FenceEventTable events={events} />
      {dialog?.kind === 'set' ? <SetFenceMappingDialog member={dialog.member} cluster={dialog.cluster} rows={rows} onClose={() => setDialog(null)} onDone={(n) => { setNotice(n); refresh(); }} /> : null}
      {dialog?.kind === 'guard' ? <PlacementGuardDialog on={dialog.on} cluster={envCluster} onClose={() => setDialog(null)} onDone={refresh} /> : null}
      {dialog?.kind === 'remove' ? <RemoveFenceMappingDialog member={dialog.member} cluster={dialog.cluster} onClose={() => setDialog(null)} onDone={refresh} /> : null}
    </section>
  );
}

function FenceEventTable({ events }: { events: FenceEventRowFragment[] }) {
  if (events.length === 0) return <p className="muted">No fence event yet.</p>;
  return (
    <table className="table">
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col">Member</th>
          <th scope="col">Event</th>
          <th scope="col">Message</th>
          <th scope="col">Worker</th>
        </tr>
      </thead>
      <tbody aria-live="polite">
        {events.map((e) => (
          <tr key={e.id}>
            <td><Time at={e.at} /></td>
            <td>{e.member ?? 'cluster'}</td>
            <td>
              {e.kind}
              {e.reason ? ` (${e.reason})` : ''}
            </td>
            <td>{inConsoleWords(e.message)}</td>
            <td>{e.worker}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
