// Rolling reboots: each cluster's latest rolling reboot (members in order, the one in
// progress, its stage and for how long), read again on a short interval (progress is read
// by polling), with start, pause, resume and cancel through the confirm dialog's plan. Each
// cluster runs one at a time, clusters independently; with one cluster registered the page
// shows no cluster names.
import { useState } from 'react';
import { useRollingReboot } from '../hooks/rolling';
import { useClusterChoices } from '../hooks/clusters';
import { manageReason } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { useViewer } from '../viewer';
import { Banner, Loading, Problems, ReasonButton, Time } from '../components/ui';
import type { RollingRebootRowFragment } from '../gql/graphql';
import { inConsoleWords } from '../lib/words';
import { StartRollingRebootDialog } from '../actions/StartRollingRebootDialog';
import { PauseRollingRebootDialog } from '../actions/PauseRollingRebootDialog';
import { ResumeRollingRebootDialog } from '../actions/ResumeRollingRebootDialog';
import { CancelRollingRebootDialog } from '../actions/CancelRollingRebootDialog';

type Verb = 'pause' | 'resume' | 'cancel';

const stageWords: Record<string, string> = {
  EVACUATE: 'evacuating',
  POWER_OFF: 'powering off through MAAS',
  CONFIRM_OFF: 'waiting until it is off',
  POWER_ON: 'powering on through MAAS',
  WAIT_ONLINE: 'waiting until it answers again',
  RESTORE: 'checking and restoring',
  DONE: 'done',
};

export function RollingPage() {
  const choices = useClusterChoices();
  const clusters = choices.data?.clusters ?? [];
  const several = clusters.length > 1;
  return (
    <section aria-labelledby="rolling-title">
      <h1 id="rolling-title">Rolling reboots</h1>
      <p>
        Members are rebooted one at a time through MAAS: evacuated, powered off and on, waited for, checked and restored. apelora-worker drives it; it
        stops at the first failure and leaves that member evacuated.{several ? ' Each cluster runs one at a time, independently of the others.' : ''}
      </p>
      {!several ? (
        <ClusterRolling cluster={clusters[0]?.name} />
      ) : (
        clusters.map((c) => (
          <section key={c.name} aria-labelledby={`rolling-${c.name}`} data-cluster={c.name}>
            <h2 id={`rolling-${c.name}`}>Cluster {c.name}</h2>
            <ClusterRolling cluster={c.name} named />
          </section>
        ))
      )}
    </section>
  );
}

// ClusterRolling is one cluster's latest rolling reboot and its start (the latest of any
// when no cluster is known yet).
function ClusterRolling({ cluster, named }: { cluster?: string; named?: boolean }) {
  const viewer = useViewer();
  const perm = manageReason(viewer, cluster);
  const { res, refresh } = useRollingReboot(cluster);
  const [dialog, setDialog] = useState<{ kind: 'start' } | { kind: Verb; reboot: RollingRebootRowFragment } | null>(null);
  const reboot = res.data?.rollingReboot ?? null;
  const active = reboot && (reboot.state === 'RUNNING' || reboot.state === 'PAUSED');
  const close = () => {
    setDialog(null);
    refresh();
  };
  return (
    <>
      <Problems problems={problemsOf(res.error)} />
      {res.fetching && !res.data ? <Loading what="the rolling reboot" /> : null}
      {reboot ? <RollingCard reboot={reboot} perm={perm} onAct={(kind) => setDialog({ kind, reboot })} /> : res.data ? <p>No rolling reboot yet.</p> : null}
      <ReasonButton
        variant="primary"
        reason={perm ?? (active ? `A rolling reboot is already running or paused${named ? ` in ${cluster}` : ''}: one at a time per cluster.` : undefined)}
        onClick={() => setDialog({ kind: 'start' })}
      >
        Start a rolling reboot
      </ReasonButton>
      {dialog?.kind === 'start' ? <StartRollingRebootDialog cluster={cluster} onClose={close} /> : null}
      {dialog?.kind === 'pause' ? <PauseRollingRebootDialog reboot={dialog.reboot} onClose={close} /> : null}
      {dialog?.kind === 'resume' ? <ResumeRollingRebootDialog reboot={dialog.reboot} onClose={close} /> : null}
      {dialog?.kind === 'cancel' ? <CancelRollingRebootDialog reboot={dialog.reboot} onClose={close} /> : null}
    </>
  );
}

function RollingCard({ reboot, perm, onAct }: { reboot: RollingRebootRowFragment; perm?: string; onAct(v: Verb): void }) {
  const running = reboot.state === 'RUNNING';
  const paused = reboot.state === 'PAUSED';
  return (
    <section className="card" aria-label={`Rolling reboot ${reboot.id}`} data-rolling={reboot.id} data-state={reboot.state}>
      <h2>
        Rolling reboot {reboot.id}: {reboot.state.toLowerCase()}
      </h2>
      {reboot.state === 'FAILED' || reboot.state === 'CANCELLED' ? (
        <Banner tone={reboot.state === 'FAILED' ? 'negative' : 'caution'} title={reboot.state === 'FAILED' ? 'Stopped' : 'Cancelled'}>
          {inConsoleWords(reboot.reason ?? '')}
        </Banner>
      ) : null}
      <p>
        {reboot.done} of {reboot.members.length} members done. Started <Time at={reboot.startedAt} /> by {reboot.startedBy}
        {reboot.finishedAt ? (
          <>
            , finished <Time at={reboot.finishedAt} />
          </>
        ) : null}
        .
      </p>
      <ol className="rolling-members">
        {reboot.members.map((m, i) => (
          <li key={m} data-member={m} aria-current={m === reboot.current ? 'step' : undefined}>
            <strong>{m}</strong>:{' '}
            {i < reboot.done
              ? 'rebooted'
              : m === reboot.current
                ? `${stageWords[reboot.stage] ?? reboot.stage} (${Math.round(reboot.stageSeconds)} s)${paused ? ', paused' : ''}`
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
