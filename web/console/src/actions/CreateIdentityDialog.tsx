// Create an identity (createIdentity), then show its bearer token once. The token lives
// only in this component's state and is dropped when the dialog closes.
import { useEffect, useRef, useState } from 'react';
import { useMutation } from 'urql';
import { CreateIdentityMutation } from '../api/identities';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Dialog } from '../components/Dialog';
import { Banner, Field } from '../components/ui';
import { CopyButton } from '../components/CopyButton';
import { allPermissions, expiryInput, grantReason, permissionInfo, permissionLabel, permissionsProblem, type ExpiryMode } from '../lib/identities';
import { useViewer } from '../viewer';
import type { Permission } from '../gql/graphql';

// CreateIdentityDialog asks for the identity, creates it, then shows its bearer token once. The
// token lives only in this component's state and is dropped when the dialog closes.
export function CreateIdentityDialog({ onClose, onCreated }: { onClose(): void; onCreated(name: string): void }) {
  const viewer = useViewer();
  const [, create] = useMutation(CreateIdentityMutation);
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const [name, setName] = useState('');
  const [perms, setPerms] = useState<Permission[]>(['VIEW_INFRASTRUCTURE']);
  const [mode, setMode] = useState<ExpiryMode>('in');
  const [duration, setDuration] = useState('90d');
  const [at, setAt] = useState('');
  if (created) {
    return (
      <BearerTokenDialog
        name={created.name}
        token={created.token}
        onClose={() => {
          setCreated(null);
          onClose();
        }}
      />
    );
  }
  const problem = permissionsProblem(perms);
  const ex = expiryInput(mode, duration, at);
  const local = ex.error;
  const toggle = (p: Permission, on: boolean) => setPerms(on ? [...perms, p] : perms.filter((x) => x !== p));
  return (
    <ConfirmDialog
      change="createIdentity"
      title="Create an identity"
      machine={name || 'the identity'}
      confirmLabel="Create and show the token"
      blocked={name.trim() === '' ? 'Type a name first.' : problem ? 'Fix the permissions above first.' : local ? 'Give the expiry above first.' : undefined}
      consequence={
        <p>
          Apelora creates the identity and shows its bearer token once; it keeps only the token's hash. Whoever holds the token acts as this identity
          until it expires or is revoked.
        </p>
      }
      fieldNames={['name', 'permissions', 'expiresIn', 'expiresAt']}
      fields={(errors) => (
        <>
          <Field label="Name" error={errors.get('name')} hint="1–63 characters: lower-case letters, digits, '.', '_' or '-', starting with a letter. A revoked identity keeps its name.">
            {(a) => <input {...a} className="input" value={name} onChange={(e) => setName(e.target.value)} spellCheck={false} autoComplete="off" name="name" />}
          </Field>
          <fieldset className={errors.get('permissions') || problem ? 'field field-invalid' : 'field'} aria-describedby="perm-problem">
            <legend>Permissions</legend>
            {allPermissions.map((p) => {
              const why = grantReason(viewer, p);
              return (
                <div key={p} className="check-option">
                  <label className="check">
                    <input
                      type="checkbox"
                      checked={perms.includes(p)}
                      disabled={!!why}
                      aria-describedby={`perm-${p}-hint`}
                      onChange={(e) => toggle(p, e.target.checked)}
                      data-permission={p}
                    />{' '}
                    {permissionLabel(p)}
                  </label>
                  <div className="hint" id={`perm-${p}-hint`}>
                    {permissionInfo[p].meaning}
                    {why ? <span className="reason"> {why}</span> : null}
                  </div>
                </div>
              );
            })}
            {errors.get('permissions') || problem ? (
              <div className="field-error" id="perm-problem" data-permissions-error>
                <span aria-hidden="true">✕ </span>
                {errors.get('permissions') ?? problem}
              </div>
            ) : null}
          </fieldset>
          <fieldset className="field">
            <legend>Expiry</legend>
            <div className="radio-row">
              <label className="check">
                <input type="radio" name="expiry" checked={mode === 'in'} onChange={() => setMode('in')} /> After a time
              </label>
              <label className="check">
                <input type="radio" name="expiry" checked={mode === 'at'} onChange={() => setMode('at')} /> On a date
              </label>
              <label className="check">
                <input type="radio" name="expiry" checked={mode === 'never'} onChange={() => setMode('never')} /> Never (until revoked)
              </label>
            </div>
            {mode === 'in' ? (
              <Field label="Works for" error={errors.get('expiresIn') ?? (local?.field === 'expiresIn' ? local.message : undefined)} hint="Whole days (90d) or hours and minutes (12h, 90m), from now.">
                {(a) => <input {...a} className="input input-short" value={duration} onChange={(e) => setDuration(e.target.value)} spellCheck={false} autoComplete="off" name="expiresIn" />}
              </Field>
            ) : null}
            {mode === 'at' ? (
              <Field label="Stops working at" error={errors.get('expiresAt') ?? (local?.field === 'expiresAt' ? local.message : undefined)} hint="In this browser's time zone.">
                {(a) => <input {...a} type="datetime-local" className="input input-short" value={at} onChange={(e) => setAt(e.target.value)} name="expiresAt" />}
              </Field>
            ) : null}
            {mode === 'never' ? <p className="hint">The token works until the identity is revoked.</p> : null}
          </fieldset>
        </>
      )}
      planKey={JSON.stringify({ name: name.trim(), permissions: perms, expiresIn: ex.expiresIn ?? null, expiresAt: ex.expiresAt ?? null })}
      run={(dryRun, planHash) => create({ input: { name: name.trim(), permissions: perms, expiresIn: ex.expiresIn ?? null, expiresAt: ex.expiresAt ?? null, dryRun, planHash } })}
      onDone={(d) => {
        const created = d.createIdentity.identity?.name ?? name.trim();
        onCreated(created);
        setCreated({ name: created, token: d.createIdentity.token ?? '' });
      }}
      onClose={onClose}
    />
  );
}

// BearerTokenDialog shows a new identity's token once, as the join token is shown.
function BearerTokenDialog({ name, token, onClose }: { name: string; token: string; onClose(): void }) {
  const [shown, setShown] = useState(true);
  const ref = useRef<HTMLTextAreaElement>(null);
  useEffect(() => () => {
    // Leave no copy of the token in the DOM once the dialog goes.
    if (ref.current) ref.current.value = '';
  }, []);
  return (
    <Dialog title={`Bearer token of ${name}`} onClose={onClose} wide initialFocus="[data-autofocus]">
      <Banner tone="caution" title="Shown only this once">
        Copy the token now and hand it over safely. Apelora keeps only its hash: it will not be shown again, and closing this dialog drops it. If it
        is lost, revoke the identity and create another.
      </Banner>
      <Field label={`Bearer token of ${name}`} hint={<>Paste it into the console's sign-in page, or send it as <code>Authorization: Bearer …</code>.</>}>
        {(a) => <textarea {...a} ref={ref} className="input token" readOnly rows={2} spellCheck={false} autoComplete="off" value={shown ? token : ''} data-bearer-token />}
      </Field>
      <CopyButton text={token} label="Copy token" />
      <div className="dialog-actions">
        <button
          type="button"
          className="btn btn-primary"
          data-autofocus
          onClick={() => {
            setShown(false);
            onClose();
          }}
        >
          I have copied it — close
        </button>
      </div>
    </Dialog>
  );
}
