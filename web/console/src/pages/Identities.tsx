// Identities: who may use the API and the console, with what permissions, until when;
// create one (its bearer token shown once) and revoke one (its sessions and websockets end
// at once). A revoke the server would refuse is disabled with the server's reason.
import { useState } from 'react';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { identityState, permissionInfo, permissionLabel, revokeReason, sortPermissions, type IdentityState } from '../lib/identities';
import { useViewer } from '../viewer';
import { useIdentities } from '../hooks/identities';
import type { IdentityRowFragment } from '../gql/graphql';
import { CreateIdentityDialog } from '../actions/CreateIdentityDialog';
import { RevokeIdentityDialog } from '../actions/RevokeIdentityDialog';

const stateInfo: Record<IdentityState, { symbol: string; label: string; tone: string }> = {
  active: { symbol: '✓', label: 'Active', tone: 'positive' },
  revoked: { symbol: '⊘', label: 'Revoked', tone: 'negative' },
  expired: { symbol: '!', label: 'Expired', tone: 'caution' },
};

export function IdentitiesPage() {
  const viewer = useViewer();
  const { res, refresh } = useIdentities();
  const [dialog, setDialog] = useState<{ kind: 'create' } | { kind: 'revoke'; identity: IdentityRowFragment } | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const list = res.data?.identities;
  return (
    <section aria-labelledby="identities-title">
      <div className="page-head">
        <h1 id="identities-title">Identities</h1>
        <ReasonButton variant="primary" reason={manageReason(viewer)} onClick={() => setDialog({ kind: 'create' })} data-action="create-identity">
          Create an identity
        </ReasonButton>
      </div>
      <p className="hint">
        Who may use the API and this console. Apelora keeps only a hash of each bearer token: a lost token means a new identity. Revoked and expired
        identities stay listed.
      </p>
      {notice ? (
        <Banner tone="positive" title="Done">
          {notice}
        </Banner>
      ) : null}
      <Problems problems={problemsOf(res.error)} />
      {!list ? (
        res.error ? null : <Loading what="the identities" />
      ) : (
        <div className="table-wrap">
          <table className="table identities-table">
            <caption className="visually-hidden">Identities, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Permissions</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">Revoked</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((i) => {
                const st = stateInfo[identityState(i)];
                const you = viewer?.name === i.name;
                return (
                  <tr key={i.name} data-identity={i.name} data-state={identityState(i)}>
                    <th scope="row">
                      {i.name}
                      {you ? <span className="tag">you</span> : null}
                      {i.sso ? (
                        <span className="sub" data-sso-subject={i.sso.subject}>
                          single sign-on: {i.sso.subject} at {i.sso.issuer}
                          {i.sso.groups.length ? `, groups ${i.sso.groups.join(', ')}` : ', no groups'}
                        </span>
                      ) : null}
                    </th>
                    <td>
                      <span className={`badge tone-${st.tone}`}>
                        <span aria-hidden="true">{st.symbol}</span> {st.label}
                      </span>
                    </td>
                    <td>
                      <ul className="plain-list">
                        {sortPermissions(i.permissions).map((p) => (
                          <li key={p} title={permissionInfo[p].meaning}>{permissionLabel(p)}</li>
                        ))}
                        {i.grants.map((g) => (
                          <li key={g.permission + '@' + g.cluster} title={`${permissionInfo[g.permission].meaning} In cluster ${g.cluster} only.`} data-grant={g.cluster}>
                            {permissionLabel(g.permission)} in {g.cluster}
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td><Time at={i.createdAt} /></td>
                    <td>{i.lastUsedAt ? <Time at={i.lastUsedAt} /> : <span className="muted">never</span>}</td>
                    <td>{i.expiresAt ? <Time at={i.expiresAt} /> : <span className="muted">never</span>}</td>
                    <td>
                      {i.revokedAt ? (
                        <>
                          <Time at={i.revokedAt} />
                          <span className="sub">by {i.revokedBy}</span>
                        </>
                      ) : (
                        '—'
                      )}
                    </td>
                    <td className="row-actions">
                      {i.revokedAt ? null : (
                        <ReasonButton variant="danger" reason={revokeReason(viewer, i)} onClick={() => setDialog({ kind: 'revoke', identity: i })} data-action="revoke-identity">
                          Revoke
                        </ReasonButton>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {dialog?.kind === 'create' ? (
        <CreateIdentityDialog
          onClose={() => setDialog(null)}
          onCreated={(name) => {
            setNotice(`Identity ${name} created.`);
            refresh();
          }}
        />
      ) : null}
      {dialog?.kind === 'revoke' ? (
        <RevokeIdentityDialog
          identity={dialog.identity}
          you={viewer?.name === dialog.identity.name}
          onClose={() => setDialog(null)}
          onDone={(name) => {
            setNotice(`Identity ${name} revoked: its token is refused, and its sessions and websockets have ended.`);
            refresh();
          }}
        />
      ) : null}
    </section>
  );
}
