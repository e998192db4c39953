// The dialogs of every change to a machine, one per action, shared by the machine,
// fleet and enrolment pages: each names the machine and says what will happen first.
import { useEffect, useRef, useState } from 'react';
import { useMutation } from 'urql';
import { useMaasImages } from '../hooks/maas';
import { ApproveEnrolmentMutation, RevokeJoinTokenMutation } from '../api/enrolment';
import { CommissionMachineMutation, InstallOperatingSystemMutation, ReleaseMachineMutation, RunHardwareTestsMutation } from '../api/maas';
import { RegisterMachineMutation, UnregisterMachineMutation } from '../api/machines';
import { EvacuateMemberMutation, RestoreMemberMutation } from '../api/maintenance';
import { AdmitMemberMutation, RemoveMemberMutation } from '../api/members';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Dialog } from '../components/Dialog';
import { Banner, Field, Loading, Time } from '../components/ui';
import { MemberConfigRows, useMemberConfig } from '../components/MemberConfigRows';
import { CopyButton } from '../components/CopyButton';
import { defaultImage, offeredImages } from '../lib/maas';
import { problemsOf } from '../lib/errors';
import { eraseReason, type ActionId } from '../lib/actions';
import { parseTests, maxTests } from '../lib/maas';
import type { Row } from '../lib/fleet';
import { useViewer } from '../viewer';
import { RegisterDialog } from './RegisterDialog';
import type { ApproveEnrolmentMutation as ApproveData, EvacuationMode, InstanceFate } from '../gql/graphql';

export function ChangeDialog({ action, row, onClose }: { action: ActionId; row: Row; onClose(): void }) {
  switch (action) {
    case 'register':
      return row.maas && !row.record && !row.member ? (
        <RegisterDialog target={{ kind: 'maas', systemId: row.maas.systemId, hostname: row.maas.hostname, hardwareUuid: row.maas.hardwareUuid }} onClose={onClose} />
      ) : (
        <RegisterDialog target={{ kind: 'manual', name: row.name }} onClose={onClose} />
      );
    case 'approve':
      return <ApproveFlow name={row.name} onClose={onClose} />;
    case 'revoke':
      return <RevokeDialog name={row.name} onClose={onClose} />;
    case 'remove':
      return <RemoveDialog name={row.name} onClose={onClose} />;
    case 'evacuate':
      return <EvacuateDialog name={row.name} onClose={onClose} />;
    case 'restore':
      return <RestoreDialog name={row.name} onClose={onClose} />;
    case 'unregister':
      return <UnregisterDialog name={row.name} onClose={onClose} />;
    case 'admit':
      return <AdmitFlow row={row} onClose={onClose} />;
    case 'commission':
      return <CommissionDialog row={row} onClose={onClose} />;
    case 'install':
      return <InstallDialog row={row} onClose={onClose} />;
    case 'test':
      return <TestDialog row={row} onClose={onClose} />;
    case 'release':
      return <ReleaseDialog row={row} onClose={onClose} />;
  }
}

type Approval = ApproveData['approveEnrolment'];

// ApproveFlow confirms, approves, then shows the join token once. The token lives only in
// this component's state and is dropped when the dialog closes.
export function ApproveFlow({ name, onClose }: { name: string; onClose(): void }) {
  const [, approve] = useMutation(ApproveEnrolmentMutation);
  const [approval, setApproval] = useState<Approval | null>(null);
  const config = useMemberConfig();
  if (approval) {
    return (
      <TokenDialog
        approval={approval}
        onClose={() => {
          setApproval(null);
          onClose();
        }}
      />
    );
  }
  return (
    <ConfirmDialog
      change="approveEnrolment"
      title={`Approve enrolment of ${name}`}
      machine={name}
      confirmLabel="Approve and show the join token"
      consequence={
        <p>
          Incus issues a single-use join token for the name <strong>{name}</strong>. The console shows it once, with the command to run on the new
          server; Apelora never stores it. The machine then waits for the server to join (Awaiting join).
        </p>
      }
      wide
      fieldNames={config.fieldNames}
      fields={(errors) => <MemberConfigRows state={config} errors={errors} />}
      planKey={JSON.stringify({ name, memberConfig: config.input() })}
      run={(dryRun, planHash) => approve({ input: { name, memberConfig: config.input(), dryRun, planHash } })}
      onDone={(d) => setApproval(d.approveEnrolment)}
      onClose={onClose}
    />
  );
}

function TokenDialog({ approval, onClose }: { approval: Approval; onClose(): void }) {
  const [shown, setShown] = useState(true);
  const tokenRef = useRef<HTMLTextAreaElement>(null);
  useEffect(() => () => {
    // Leave no copy of the token in the DOM once the dialog goes.
    if (tokenRef.current) tokenRef.current.value = '';
  }, []);
  const name = approval.machine?.name ?? '';
  return (
    <Dialog title={`Join token for ${name}`} onClose={onClose} wide initialFocus="[data-autofocus]">
      <Banner tone="caution" title="Shown only this once">
        Copy the token now. It is not stored anywhere and will not be shown again; closing this dialog drops it. If it is lost, revoke it and approve again.
      </Banner>
      <p>
        On the new server, run this command (replace <code>ADDRESS</code> by the address the other members reach it at). It fetches enrol-member.sh from
        Apelora and asks for the token on standard input.
      </p>
      <pre className="command" data-command>{approval.command}</pre>
      <CopyButton text={approval.command ?? ''} label="Copy command" />
      <Field label="Join token (single use)" hint={<>Expires <Time at={approval.expiresAt} />.</>}>
        {(a) => (
          <textarea
            {...a}
            ref={tokenRef}
            className="input token"
            readOnly
            rows={3}
            spellCheck={false}
            value={shown ? (approval.joinToken ?? '') : ''}
            data-join-token
          />
        )}
      </Field>
      <CopyButton text={approval.joinToken ?? ''} label="Copy token" />
      {approval.memberConfig?.length ? (
        <p className="hint">
          Member configuration it joins with:{' '}
          {approval.memberConfig.map((c) => `${c.entity}/${c.name}/${c.key}=${c.value || '(driver default)'}`).join(', ')}
        </p>
      ) : null}
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

function RevokeDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, revoke] = useMutation(RevokeJoinTokenMutation);
  return (
    <ConfirmDialog
      change="revokeJoinToken"
      title={`Revoke the join token of ${name}`}
      machine={name}
      danger
      confirmLabel="Revoke token"
      consequence={<p>Incus cancels the pending join token for <strong>{name}</strong>; a server that has not joined yet can no longer use it. The machine is Registered again.</p>}
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => revoke({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

function RemoveDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, remove] = useMutation(RemoveMemberMutation);
  const [force, setForce] = useState(false);
  return (
    <ConfirmDialog
      change="removeMember"
      title={`Remove member ${name}`}
      machine={name}
      danger
      confirmLabel="Remove member"
      typeToConfirm={name}
      typeLabel={`Type the member's name, ${name}, to confirm`}
      consequence={
        <p>
          Incus removes <strong>{name}</strong> from the cluster. Incus refuses while it still holds instances or is the last database member. The machine
          record stays: it becomes Registered again, and the audit keeps its history.
        </p>
      }
      fields={() => (
        <label className="check">
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> Force: drop the member without telling it (wipe its daemon
          afterwards)
        </label>
      )}
      planKey={JSON.stringify({ name, force })}
      run={(dryRun, planHash) => remove({ input: { name, force, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

const fateText: Record<InstanceFate, string> = {
  MOVE: 'moved (Incus picks migrate or live-migrate)',
  MIGRATE: 'stopped, moved, started again',
  LIVE_MIGRATE: 'moved while running',
  STOP: 'only stopped: stays here until restored',
  RETURN: 'moved back here',
  START: 'started again here',
};

interface PlannedInstance {
  project: string;
  name: string;
  status: string;
  fate: InstanceFate;
}

// InstancesTable lists what the plan of an evacuation or restore says happens to each
// instance (the payload of the dry run the dialog asked for).
function InstancesTable({ instances, caption }: { instances: PlannedInstance[] | null; caption: string }) {
  if (!instances) return <p className="muted">Waiting for the plan…</p>;
  if (instances.length === 0) return <p className="muted" data-instances="0">No instance is affected.</p>;
  return (
    <table className="table" data-instances={instances.length}>
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Instance</th>
          <th scope="col">Status</th>
          <th scope="col">What Incus does</th>
        </tr>
      </thead>
      <tbody>
        {instances.map((i) => (
          <tr key={`${i.project}/${i.name}`} data-instance={i.name} data-fate={i.fate}>
            <th scope="row">{i.project && i.project !== 'default' ? `${i.project}/${i.name}` : i.name}</th>
            <td>{i.status}</td>
            <td>{fateText[i.fate]}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const modes: { value: '' | EvacuationMode; label: string }[] = [
  { value: '', label: "Each instance's cluster.evacuate" },
  { value: 'AUTO', label: 'auto' },
  { value: 'MIGRATE', label: 'migrate' },
  { value: 'LIVE_MIGRATE', label: 'live-migrate' },
  { value: 'STOP', label: 'stop (instances stay, stopped)' },
];

function EvacuateDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, evacuate] = useMutation(EvacuateMemberMutation);
  const [mode, setMode] = useState<'' | EvacuationMode>('');
  const [preview, setPreview] = useState<{ instances: PlannedInstance[]; targets: { member: string; instances: number }[] } | null>(null);
  return (
    <ConfirmDialog
      change="evacuateMember"
      title={`Evacuate ${name}`}
      machine={name}
      confirmLabel="Evacuate member"
      wide
      consequence={
        <>
          <p>
            Incus takes <strong>{name}</strong> out for maintenance: it moves or stops every instance on it, each as its cluster.evacuate says (or the
            mode below). The member is then Evacuated: nothing is placed on it and the fencing worker never powers it off. Restore brings it back.
          </p>
          <InstancesTable instances={preview?.instances ?? null} caption={`Instances on ${name}`} />
          {preview ? (
            <p className="hint" data-targets={preview.targets.length}>
              {preview.targets.length
                ? `May land on: ${preview.targets.map((t) => `${t.member} (${t.instances} now)`).join(', ')}.`
                : 'No admitted member can take moved instances.'}
            </p>
          ) : null}
        </>
      }
      fields={() => (
        <Field label="Mode">
          {(a) => (
            <select {...a} className="input" value={mode} onChange={(e) => setMode(e.target.value as '' | EvacuationMode)} name="mode">
              {modes.map((m) => (
                <option key={m.value} value={m.value}>{m.label}</option>
              ))}
            </select>
          )}
        </Field>
      )}
      planKey={JSON.stringify({ name, mode })}
      run={async (dryRun, planHash) => {
        const res = await evacuate({ input: { name, mode: mode || null, dryRun, planHash } });
        const d = res.data?.evacuateMember;
        if (dryRun && d) setPreview({ instances: d.instances, targets: d.targets });
        return res;
      }}
      onClose={onClose}
    />
  );
}

function RestoreDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, restore] = useMutation(RestoreMemberMutation);
  const [instances, setInstances] = useState<PlannedInstance[] | null>(null);
  return (
    <ConfirmDialog
      change="restoreMember"
      title={`Restore ${name}`}
      machine={name}
      confirmLabel="Restore member"
      wide
      consequence={
        <>
          <p>
            Apelora runs every admission check on <strong>{name}</strong> again and refuses on any failure; then Incus restores it: instances it moved
            come back, those it stopped start.
          </p>
          <InstancesTable instances={instances} caption={`Instances ${name}'s restore brings back`} />
        </>
      }
      planKey={JSON.stringify({ name })}
      run={async (dryRun, planHash) => {
        const res = await restore({ input: { name, dryRun, planHash } });
        const d = res.data?.restoreMember;
        if (dryRun && d) setInstances(d.instances);
        return res;
      }}
      onClose={onClose}
    />
  );
}

function UnregisterDialog({ name, onClose }: { name: string; onClose(): void }) {
  const [, unregister] = useMutation(UnregisterMachineMutation);
  return (
    <ConfirmDialog
      change="unregisterMachine"
      title={`Unregister ${name}`}
      machine={name}
      danger
      confirmLabel="Unregister"
      typeToConfirm={name}
      consequence={<p>Apelora forgets the machine record <strong>{name}</strong>. Nothing changes in Incus or MAAS; the audit trail keeps its history.</p>}
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => unregister({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

// AdmitFlow admits a member. One with no machine record (the cluster's founding member, a
// member joined by hand) is registered first: Apelora admits only machines it has recorded.
// The dialog says so and takes the two steps in turn, each its own plan, confirmation and
// audit event: register, then admit.
function AdmitFlow({ row, onClose }: { row: Row; onClose(): void }) {
  const [registered, setRegistered] = useState(!!row.record);
  const name = row.name;
  // Fixed when the dialog opens: the page reads the machine again once it is registered.
  const [twoSteps] = useState(!row.record);
  if (!registered) return <RegisterFirstDialog name={name} onRegistered={() => setRegistered(true)} onClose={onClose} />;
  return <AdmitDialog name={name} title={twoSteps ? `Register and admit ${name}: step 2 of 2, admit` : `Admit ${name}`} registeredNow={twoSteps} onClose={onClose} />;
}

function RegisterFirstDialog({ name, onRegistered, onClose }: { name: string; onRegistered(): void; onClose(): void }) {
  const [, register] = useMutation(RegisterMachineMutation);
  return (
    <ConfirmDialog
      change="registerMachine"
      title={`Register and admit ${name}: step 1 of 2, register`}
      machine={name}
      confirmLabel="Register, then plan the admission"
      consequence={
        <>
          <p data-two-steps>
            <strong>{name}</strong> is a cluster member with no machine record, and Apelora admits only machines it has recorded. So admitting it takes
            two steps, each planned, confirmed and audited on its own:
          </p>
          <ol>
            <li>
              <strong>Register</strong> (this step): Apelora records {name} as a machine installed by hand. Nothing changes in Incus.
            </li>
            <li>
              <strong>Admit</strong> (next): every admission check runs again and, if none fails, automatic placement may reach {name}.
            </li>
          </ol>
          <p className="hint">Cancelling after the first step leaves {name} registered and not admitted: Admit stays offered on its page.</p>
        </>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => register({ input: { name, provisioner: 'MANUAL', dryRun, planHash } })}
      onDone={() => onRegistered()}
      onClose={onClose}
    />
  );
}

function AdmitDialog({ name, title, registeredNow, onClose }: { name: string; title: string; registeredNow: boolean; onClose(): void }) {
  const [, admit] = useMutation(AdmitMemberMutation);
  return (
    <ConfirmDialog
      change="admitMember"
      title={title}
      machine={name}
      confirmLabel="Admit member"
      consequence={
        <>
          {registeredNow ? <p data-registered-now>✓ {name} is registered. Now its admission:</p> : null}
          <p>
            Apelora runs every admission check again and, if none fails, lets automatic placement reach <strong>{name}</strong>: it removes the
            scheduler.instance hold (if any), marks the member admitted and keeps its roles, groups, failure domain and description. Instances may be placed
            on it from then on.
          </p>
        </>
      }
      planKey={JSON.stringify({ name })}
      run={(dryRun, planHash) => admit({ input: { name, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

function TestsField({ value, onChange, error, label }: { value: string; onChange(v: string): void; error?: string; label: string }) {
  const parsed = parseTests(value);
  return (
    <Field label={label} error={error ?? parsed.error} hint={`Script names or tags, separated by commas or spaces; at most ${maxTests}. Empty: MAAS's defaults.`}>
      {(a) => <input {...a} className="input" value={value} onChange={(e) => onChange(e.target.value)} spellCheck={false} autoComplete="off" name="tests" />}
    </Field>
  );
}

function CommissionDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, commission] = useMutation(CommissionMachineMutation);
  const [tests, setTests] = useState('');
  const [none, setNone] = useState(false);
  const m = row.maas!;
  return (
    <ConfirmDialog
      change="commissionMachine"
      title={`Commission ${m.hostname}`}
      machine={row.name}
      confirmLabel="Commission"
      consequence={
        <p>
          MAAS commissions <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>, now {m.status}): it boots the machine, inventories its hardware
          and runs the tests asked for. The machine is busy until MAAS is done.
        </p>
      }
      fieldNames={['tests']}
      fields={(errors) => (
        <>
          <label className="check">
            <input type="checkbox" checked={none} onChange={(e) => setNone(e.target.checked)} /> Run no tests after commissioning
          </label>
          {!none ? <TestsField label="Tests (optional)" value={tests} onChange={setTests} error={errors.get('tests')} /> : null}
        </>
      )}
      planKey={JSON.stringify([tests, none])}
      run={(dryRun, planHash) => {
        const p = parseTests(tests);
        return commission({ input: { systemId: m.systemId, tests: none ? [] : p.tests.length ? p.tests : null, dryRun, planHash } });
      }}
      onClose={onClose}
    />
  );
}

function InstallDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, install] = useMutation(InstallOperatingSystemMutation);
  const [series, setSeries] = useState('');
  const config = useMemberConfig();
  const m = row.maas!;
  // The images MAAS holds, when it lets Apelora's key list them; else the series is typed.
  const images = useMaasImages();
  const offered = offeredImages(images.data?.maasImages ?? [], m.architecture);
  const listed = offered.length > 0;
  const chosen = series || (listed ? defaultImage(offered) : 'noble');
  return (
    <ConfirmDialog
      change="installOperatingSystem"
      title={`Install an operating system on ${row.name}`}
      machine={row.name}
      confirmLabel="Install and enrol"
      consequence={
        <p>
          MAAS deploys the image below on <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>; a Ready machine is allocated first). Incus
          issues a join token that goes only into the deploy's cloud-init user data, which runs enrol-member.sh: the server joins the cluster held, as{' '}
          <strong>{row.name}</strong>. The user data is never shown or kept.
        </p>
      }
      wide
      fieldNames={['series', ...config.fieldNames]}
      fields={(errors) => (
        <>
          {images.fetching && !images.data ? (
            <Loading what="the images MAAS holds" />
          ) : listed ? (
            <Field label="Image" error={errors.get('series')} hint={<>The OS images MAAS holds (its boot resources) for this machine's architecture, {m.architecture ?? 'unknown'}. An image still downloading fails the deploy with MAAS's error.</>}>
              {(a) => (
                <select {...a} className="input" value={chosen} onChange={(e) => setSeries(e.target.value)} name="series">
                  {offered.map((im) => (
                    <option key={im.name} value={im.name}>
                      {im.name} ({im.architectures.join(', ')})
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ) : (
            <Field
              label="Series"
              error={errors.get('series')}
              hint={
                images.error
                  ? `MAAS's image list could not be read (${problemsOf(images.error)[0]?.message ?? 'no answer'}): type the series, for example noble or ubuntu/noble. Its image must already be synced in MAAS.`
                  : 'MAAS lists no OS image for this architecture: type the series, for example noble or ubuntu/noble. Its image must already be synced in MAAS.'
              }
            >
              {(a) => <input {...a} className="input" value={chosen} onChange={(e) => setSeries(e.target.value)} spellCheck={false} autoComplete="off" name="series" />}
            </Field>
          )}
          <MemberConfigRows state={config} errors={errors} />
        </>
      )}
      planKey={JSON.stringify({ name: row.name, series: chosen.trim(), memberConfig: config.input() })}
      run={(dryRun, planHash) => install({ input: { name: row.name, series: chosen.trim(), memberConfig: config.input(), dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

function TestDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, runTests] = useMutation(RunHardwareTestsMutation);
  const [hostname, setHostname] = useState('');
  const [tests, setTests] = useState('');
  const m = row.maas!;
  return (
    <ConfirmDialog
      change="runHardwareTests"
      title={`Run hardware tests on ${m.hostname}`}
      machine={row.name}
      confirmLabel="Run tests"
      blocked={hostname.trim() === '' ? `Type the hostname, ${m.hostname}, first.` : undefined}
      consequence={
        <p>
          MAAS boots <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>, now {m.status}) into its test environment and runs the tests. Type the
          hostname again, exactly as MAAS shows it, so a slip cannot test the wrong machine.
        </p>
      }
      fieldNames={['hostname', 'tests']}
      fields={(errors) => (
        <>
          <Field label={`Hostname (type ${m.hostname})`} error={errors.get('hostname')}>
            {(a) => <input {...a} className="input" value={hostname} onChange={(e) => setHostname(e.target.value)} spellCheck={false} autoComplete="off" name="hostname" />}
          </Field>
          <TestsField label="Tests (optional)" value={tests} onChange={setTests} error={errors.get('tests')} />
        </>
      )}
      planKey={JSON.stringify([hostname, tests])}
      run={(dryRun, planHash) => {
        const p = parseTests(tests);
        return runTests({ input: { systemId: m.systemId, hostname, tests: p.tests.length ? p.tests : null, dryRun, planHash } });
      }}
      onClose={onClose}
    />
  );
}

function ReleaseDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, release] = useMutation(ReleaseMachineMutation);
  const viewer = useViewer();
  const [erase, setErase] = useState(false);
  const [comment, setComment] = useState('');
  const m = row.maas!;
  const noErase = eraseReason(viewer);
  return (
    <ConfirmDialog
      change="releaseMachine"
      title={`Release ${m.hostname}`}
      machine={row.name}
      danger
      confirmLabel="Release"
      consequence={
        <>
          <p>
            MAAS releases <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>, now {m.status}): it powers the machine off and returns it to the
            Ready pool. Apelora never asks for secure or quick erase. The plan below says what happens to the disks, for this machine and for you.
          </p>
        </>
      }
      fieldNames={['comment', 'erase']}
      fields={(errors) => (
        <>
          <label className="check">
            <input type="checkbox" checked={erase} disabled={!!noErase} aria-describedby={noErase ? 'erase-reason' : undefined} onChange={(e) => setErase(e.target.checked)} />{' '}
            Erase the disks
          </label>
          {noErase ? (
            <p className="reason" id="erase-reason">
              {noErase}
            </p>
          ) : null}
          <Field label="Comment (optional)" error={errors.get('comment')}>
            {(a) => <input {...a} className="input" value={comment} maxLength={500} onChange={(e) => setComment(e.target.value)} name="comment" />}
          </Field>
        </>
      )}
      planKey={JSON.stringify({ systemId: m.systemId, erase, comment: comment || null })}
      run={(dryRun, planHash) => release({ input: { systemId: m.systemId, erase, comment: comment || null, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
