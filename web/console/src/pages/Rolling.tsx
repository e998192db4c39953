// Rolling reboots: the cluster's latest rolling reboot (members in order, the one in
// progress, its step and for how long), read again on a short interval (progress is read
// by polling), with start, pause, resume and cancel through the confirm dialog's plan.
import { useState } from 'react';
import { useMutation } from 'urql';
import { CancelRollingRebootMutation, PauseRollingRebootMutation, ResumeRollingRebootMutation, StartRollingRebootMutation } from '../api/rolling';
import { useRollingReboot } from '../hooks/rolling';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { useViewer } from '../viewer';
import { useFleet } from '../hooks/fleet';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import { ConfirmDialog } from '../components/ConfirmDialog';
import type { RollingRebootRowFragment } from '../gql/graphql';
import { inConsoleWords } from '../lib/words';

type Verb = 'pause' | 'resume' | 'cancel';

const stepWords: Record<string, string> = {
  EVACUATE: 'evacuating',
  POWER_OFF: 'powering off through MAAS',
  CONFIRM_OFF: 'waiting until it is off',
  POWER_ON: 'powering on through MAAS',
  WAIT_ONLINE: 'waiting until it answers again',
  RESTORE: 'checking and restoring',
  DONE: 'done',
};

export function RollingPage() {
  const viewer = useViewer();
  const perm = manageReason(viewer);
  const { res, refresh } = useRollingReboot();
  const [dialog, setDialog] = useState<{ kind: 'start' } | { kind: Verb; op: RollingRebootRowFragment } | null>(null);
  const op = res.data?.rollingReboot ?? null;
  const active = op && (op.state === 'RUNNING' || op.state === 'PAUSED');
  const close = () => {
    setDialog(null);
    refresh();
  };
  return (
    <section aria-labelledby="rolling-title">
      <h1 id="rolling-title">Rolling reboots</h1>
      <p>
        Members are rebooted one at a time through MAAS: evacuated, powered off and on, waited for, checked and restored. apelora-worker drives it; it
        stops at the first failure and leaves that member evacuated.
      </p>
      <Problems problems={problemsOf(res.error)} />
      {res.fetching && !res.data ? <Loading what="the rolling reboot" /> : null}
      {op ? <RollingCard op={op} perm={perm} onAct={(kind) => setDialog({ kind, op })} /> : res.data ? <p>No rolling reboot yet.</p> : null}
      <ReasonButton variant="primary" reason={perm ?? (active ? 'A rolling reboot is already running or paused: one at a time.' : undefined)} onClick={() => setDialog({ kind: 'start' })}>
        Start a rolling reboot
      </ReasonButton>
      {dialog?.kind === 'start' ? <StartDialog onClose={close} /> : null}
      {dialog && dialog.kind !== 'start' ? <MoveDialog verb={dialog.kind} op={dialog.op} onClose={close} /> : null}
    </section>
  );
}

function RollingCard({ op, perm, onAct }: { op: RollingRebootRowFragment; perm?: string; onAct(v: Verb): void }) {
  const running = op.state === 'RUNNING';
  const paused = op.state === 'PAUSED';
  return (
    <section className="card" aria-label={`Rolling reboot ${op.id}`} data-rolling={op.id} data-state={op.state}>
      <h2>
        Rolling reboot {op.id}: {op.state.toLowerCase()}
      </h2>
      {op.state === 'FAILED' || op.state === 'CANCELLED' ? (
        <Banner tone={op.state === 'FAILED' ? 'negative' : 'caution'} title={op.state === 'FAILED' ? 'Stopped' : 'Cancelled'}>
          {inConsoleWords(op.reason ?? '')}
        </Banner>
      ) : null}
      <p>
        {op.done} of {op.members.length} members done. Started <Time at={op.startedAt} /> by {op.startedBy}
        {op.finishedAt ? (
          <>
            , finished <Time at={op.finishedAt} />
          </>
        ) : null}
        .
      </p>
      <ol className="rolling-members">
        {op.members.map((m, i) => (
          <li key={m} data-member={m} aria-current={m === op.current ? 'step' : undefined}>
            <strong>{m}</strong>:{' '}
            {i < op.done
              ? 'rebooted'
              : m === op.current
                ? `${stepWords[op.step] ?? op.step} (${Math.round(op.stepSeconds)} s)${paused ? ', paused' : ''}`
                : 'waiting'}
          </li>
        ))}
      </ol>
      <div className="actions">
        {running ? (
          <ReasonButton reason={perm} onClick={() => onAct('pause')}>
            Pause
          </ReasonButton>
        ) : null}
        {paused ? (
          <ReasonButton reason={perm} onClick={() => onAct('resume')}>
            Resume
          </ReasonButton>
        ) : null}
        {running || paused ? (
          <ReasonButton variant="danger" reason={perm} onClick={() => onAct('cancel')}>
            Cancel
          </ReasonButton>
        ) : null}
      </div>
    </section>
  );
}

function StartDialog({ onClose }: { onClose(): void }) {
  const [, start] = useMutation(StartRollingRebootMutation);
  const { res: fleet } = useFleet();
  const members = (fleet.data?.fleet.machines ?? []).filter((r) => r.member).map((r) => r.name);
  const [chosen, setChosen] = useState<string[]>([]);
  const toggle = (m: string) => setChosen((c) => (c.includes(m) ? c.filter((x) => x !== m) : [...c, m]));
  return (
    <ConfirmDialog
      change="startRollingReboot"
      title="Start a rolling reboot"
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
      planKey={JSON.stringify(chosen)}
      run={(dryRun, planHash) => start({ input: { members: chosen, dryRun, planHash } })}
      onClose={onClose}
    />
  );
}

function MoveDialog({ verb, op, onClose }: { verb: Verb; op: RollingRebootRowFragment; onClose(): void }) {
  const [, pause] = useMutation(PauseRollingRebootMutation);
  const [, resume] = useMutation(ResumeRollingRebootMutation);
  const [, cancel] = useMutation(CancelRollingRebootMutation);
  const words = {
    pause: { label: 'Pause', says: 'The step in progress finishes; no further step starts until it is resumed.' },
    resume: { label: 'Resume', says: `It goes on from ${op.current ?? 'its end'}, step ${op.step}.` },
    cancel: { label: 'Cancel the rolling reboot', says: `No further step is taken. ${op.current ?? 'The member in progress'} is left as it is: restore it when it is up.` },
  }[verb];
  const common = {
    title: `${words.label}: rolling reboot ${op.id}`,
    machine: '',
    confirmLabel: words.label,
    consequence: <p>{words.says}</p>,
    planKey: `${verb}/${op.id}`,
    onClose,
  };
  const input = (dryRun: boolean, planHash?: string | null) => ({ input: { id: op.id, dryRun, planHash } });
  if (verb === 'pause') return <ConfirmDialog change="pauseRollingReboot" {...common} run={(d, h) => pause(input(d, h))} />;
  if (verb === 'resume') return <ConfirmDialog change="resumeRollingReboot" {...common} run={(d, h) => resume(input(d, h))} />;
  return <ConfirmDialog change="cancelRollingReboot" danger {...common} run={(d, h) => cancel(input(d, h))} />;
}
