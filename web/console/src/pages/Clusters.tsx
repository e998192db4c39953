// Incus clusters: the one of APELORA_INCUS_* and those registered through the API, each with
// its members and their roles, whether Apelora reads it, its database quorum and its
// placement guard, and whether apelora-worker fences in it (acting, or paused and why).
// Register one (its plan shows the fingerprint it pins and the members it
// read), remove one nothing names.
import { useState } from 'react';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import { CopyButton } from '../components/CopyButton';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { useViewer } from '../viewer';
import { useClusters } from '../hooks/clusters';
import { RegisterClusterDialog } from '../actions/RegisterClusterDialog';
import { RemoveClusterDialog } from '../actions/RemoveClusterDialog';
import { PlacementGuardDialog } from '../actions/PlacementGuardDialog';
import { inConsoleWords } from '../lib/words';

export function ClustersPage() {
  const viewer = useViewer();
  const perm = manageReason(viewer);
  const { res, refresh } = useClusters();
  const [dialog, setDialog] = useState<{ kind: 'register' } | { kind: 'remove'; name: string } | { kind: 'guard'; name: string; on: boolean } | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const list = res.data?.clusters;
  const clientCertificate = res.data?.incusClientCertificate;
  const done = (n: string) => {
    setNotice(n);
    refresh();
  };
  return (
    <section aria-labelledby="clusters-title">
      <div className="page-head">
        <h1 id="clusters-title">Clusters</h1>
        <ReasonButton variant="primary" reason={perm} onClick={() => setDialog({ kind: 'register' })} data-action="register-cluster">
          Register a cluster
        </ReasonButton>
      </div>
      <p className="hint">
        The Incus clusters Apelora manages: the one of APELORA_INCUS_* (adopted at start) and those registered here. Apelora reaches every cluster with
        one client identity; a cluster must trust its certificate before it is registered.
      </p>
      {clientCertificate ? (
        <p className="hint" data-client-certificate>
          Apelora’s client certificate, for <code>incus config trust add-certificate</code> on a member:{' '}
          <CopyButton text={clientCertificate} label="Copy the client certificate" />
        </p>
      ) : null}
      {notice ? (
        <Banner tone="positive" title="Done">
          {notice}
        </Banner>
      ) : null}
      <Problems problems={problemsOf(res.error)} />
      {!list ? (
        res.error ? null : <Loading what="the clusters" />
      ) : list.length === 0 ? (
        <div className="empty">
          <p>No cluster yet: set APELORA_INCUS_* and restart Apelora, or register one.</p>
        </div>
      ) : (
        <div className="table-wrap">
          <table className="table clusters-table">
            <caption className="visually-hidden">Incus clusters, by name</caption>
            <thead>
              <tr>
                <th scope="col">Cluster</th>
                <th scope="col">Members</th>
                <th scope="col">State</th>
                <th scope="col">Quorum</th>
                <th scope="col">Placement guard</th>
                <th scope="col">Fencing</th>
                <th scope="col">Certificate</th>
                <th scope="col">Registered</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((c) => (
                <tr key={c.name} data-cluster={c.name}>
                  <th scope="row">
                    {c.name}
                    {c.fromEnvironment ? <span className="sub">from APELORA_INCUS_*</span> : null}
                  </th>
                  <td>
                    {c.members ? (
                      <ul className="plain-list">
                        {c.members.map((m) => (
                          <li key={m.name} data-member={m.name}>
                            {m.name} <span className="muted">{m.status.toLowerCase()}</span>
                            <span className="sub">{m.roles.length ? m.roles.join(', ') : 'no role'}</span>
                          </li>
                        ))}
                      </ul>
                    ) : (
                      <span className="muted">unknown</span>
                    )}
                  </td>
                  <td data-state>
                    {c.source.available ? 'answers' : <span className="field-error">{c.source.message}</span>}
                    {c.through ? <span className="sub">through {c.through}</span> : null}
                  </td>
                  <td>
                    {c.quorum ? (
                      <>
                        {c.quorum.votersOnline} of {c.quorum.voters} voters online
                        <span className="sub">
                          needs {c.quorum.majority}
                          {c.quorum.standbys ? `, ${c.quorum.standbys} stand-by` : ''}
                        </span>
                      </>
                    ) : (
                      <span className="muted">unknown</span>
                    )}
                  </td>
                  <td data-guard={c.placementGuard?.state ?? 'UNKNOWN'}>
                    {c.placementGuard ? (
                      <>
                        <ReasonButton
                          reason={manageReason(viewer, c.name) ?? (c.placementGuard.state === 'FOREIGN' ? 'Incus has a placement scriptlet Apelora did not write: Apelora leaves it alone.' : undefined)}
                          role="switch"
                          aria-checked={c.placementGuard.state === 'ON'}
                          aria-label={`Placement guard of ${c.name}`}
                          onClick={() => setDialog({ kind: 'guard', name: c.name, on: c.placementGuard?.state !== 'ON' })}
                          data-action="placement-guard"
                        >
                          {c.placementGuard.state === 'ON' ? 'On' : c.placementGuard.state === 'OFF' ? 'Off' : 'Foreign scriptlet'}
                        </ReasonButton>
                        <span className="sub">{inConsoleWords(c.placementGuard.message)}</span>
                      </>
                    ) : (
                      <span className="muted">unknown</span>
                    )}
                  </td>
                  <td data-fencing={c.fencing.acting ? 'acting' : 'paused'}>
                    {c.fencing.acting ? (
                      'acting'
                    ) : (
                      <>
                        <span className="field-error">paused</span>
                        <span className="sub" title={c.fencing.pausedReason ?? undefined}>
                          {c.fencing.pausedCode}
                          {c.fencing.pausedReason ? `: ${c.fencing.pausedReason}` : ''}
                        </span>
                      </>
                    )}
                  </td>
                  <td>
                    <code className="fingerprint" title={c.certificateFingerprint}>
                      {c.certificateFingerprint ? c.certificateFingerprint.slice(0, 16) + '…' : '—'}
                    </code>
                  </td>
                  <td>
                    <Time at={c.registeredAt} />
                    <span className="sub">
                      by {c.registeredBy}, {c.machineRecords} machine record{c.machineRecords === 1 ? '' : 's'}
                    </span>
                  </td>
                  <td className="row-actions">
                    <ReasonButton
                      reason={perm ?? c.removeRefusal ?? undefined}
                      variant="danger"
                      onClick={() => setDialog({ kind: 'remove', name: c.name })}
                      data-action="remove-cluster"
                    >
                      Remove
                    </ReasonButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {dialog?.kind === 'register' ? <RegisterClusterDialog onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialog?.kind === 'remove' ? <RemoveClusterDialog name={dialog.name} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialog?.kind === 'guard' ? <PlacementGuardDialog on={dialog.on} cluster={dialog.name} onClose={() => setDialog(null)} onDone={refresh} /> : null}
    </section>
  );
}
