// Machine: its phase, warnings and the actions its phase allows, then tabs (as in MAAS's
// machine page): the record and the member, the admission checks live and the drift, the
// MAAS facts, the fence mapping, and its audit history.
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { useMachine } from '../hooks/machines';
import { useAdmission, type Admission } from '../hooks/members';
import { useDrift } from '../hooks/drift';
import { useMaintenanceTasks } from '../hooks/maintenance';
import { useAuditTrail } from '../hooks/audit';
import { admitReason, machineActions, type ActionId } from '../lib/actions';
import { problemsOf } from '../lib/errors';
import { codeTitle, phaseInfo, warningLabels } from '../lib/phases';
import { useViewer } from '../viewer';
import { Link, useSearch } from '../router';
import { Tabs } from '../components/Tabs';
import { machineTabs, maasHardware, parseMachineTab, statusText, type MachineTab } from '../lib/display';
import { ActionButton, Banner, Loading, MemberStatusBadge, PhaseBadge, Problems, ReasonButton, ResultBadge, Time } from '../components/ui';
import { MachineActionDialog } from '../actions/MachineActionDialog';
import { ProfileCard } from './MachineProfile';
import { MaasHardwareTables } from './MachineMaasHardware';
import { AuditTable } from './Audit';
import { inConsoleWords } from '../lib/words';

export function MachinePage({ name }: { name: string }) {
  const viewer = useViewer();
  const { res, refresh } = useMachine(name);
  const [dialog, setDialog] = useState<ActionId | null>(null);
  // The tab is in the URL (?tab=…), so a link or a reload opens the same one.
  const [params, setParams] = useSearch();
  const tab = parseMachineTab(params.get('tab'));
  const setTab = (t: MachineTab) => {
    const p = new URLSearchParams(params);
    if (t === 'overview') p.delete('tab');
    else p.set('tab', t);
    setParams(p);
  };
  const m = res.data?.machine;
  const report = useAdmission(name, !!m?.member);
  // A member not admitted yet (held, joined without the hold, or with no record) waits for
  // admission: run its checks once when the page shows it so, so they stream in at once and
  // Admit can be pressed; anyone's later runs arrive the same way.
  const awaiting = !!m && (m.phase === 'HELD' || m.phase === 'UNHELD' || (m.phase === 'UNREGISTERED' && m.member?.status !== 'EVACUATED'));
  const autoRun = useRef(false);
  useEffect(() => {
    if (awaiting && !autoRun.current) {
      autoRun.current = true;
      report.run();
    }
  }, [awaiting, report]);

  if (!res.data) return res.error ? <Problems problems={problemsOf(res.error)} /> : <Loading what={name} />;
  if (!m) {
    return (
      <section>
        <h1>{name}</h1>
        <Banner tone="caution" title="No such machine">
          Apelora, Incus and MAAS know no machine named {name}. <Link to="/">Back to the fleet</Link>.
        </Banner>
      </section>
    );
  }
  const actions = machineActions(m, viewer).map((a) => (a.id === 'admit' ? { ...a, reason: admitReason(viewer, report.latest, m.cluster?.name) } : a));
  return (
    <section aria-labelledby="machine-title">
      <p className="crumbs">
        <Link to="/">Fleet</Link> / {m.name}
      </p>
      <div className="title-row">
        <h1 id="machine-title">{m.name}</h1>
        <PhaseBadge phase={m.phase} />
      </div>
      <p className="phase-meaning">{phaseInfo[m.phase].meaning}</p>
      {m.warnings.map((w) =>
        w.code === 'MAAS_UNAVAILABLE' ? (
          <Banner key={w.code} tone="caution" title="MAAS not answering">
            <span data-warning={w.code}>{inConsoleWords(w.message)}</span>
            <br />
            This page shows what Incus and Apelora's records know; MAAS's facts fill in when MAAS answers. MAAS steps are refused until then.
          </Banner>
        ) : (
          <Banner key={w.code} tone="caution" title={warningLabels[w.code] ?? codeTitle(w.code)}>
            <span data-warning={w.code}>{inConsoleWords(w.message)}</span>
          </Banner>
        ),
      )}
      <Problems problems={problemsOf(res.error)} />

      <h2>Actions</h2>
      <div className="actions" role="group" aria-label={`Actions for ${m.name}`}>
        {actions.length === 0 ? <p className="muted">No change applies to a machine in this phase.</p> : null}
        {actions.map((a) => (
          <ActionButton key={a.id} action={a} variant={primaryAction(actions) === a.id ? 'primary' : 'plain'} onRun={() => setDialog(a.id)} />
        ))}
      </div>

      <Tabs label={`About ${m.name}`} current={tab} onSelect={setTab} tabs={machineTabs}>
        {tab === 'overview' ? (
          <div className="facts-grid">
            <Facts title="Apelora record" none={<>No record: Apelora does not manage this machine yet.</>}>
              {m.record ? (
                <>
                  <Fact k="Provisioner">{m.record.provisioner.kind === 'MAAS' ? 'MAAS' : 'Manual'}</Fact>
                  <Fact k="Description">{m.record.description || '—'}</Fact>
                  <Fact k="MAAS system id">{m.record.maasSystemId ?? '—'}</Fact>
                  <Fact k="Hardware UUID">{m.record.hardwareUuid ?? '—'}</Fact>
                  <Fact k="Registered"><Time at={m.record.registeredAt} /> by {m.record.registeredBy}</Fact>
                  {m.pendingJoinToken ? <Fact k="Join token expires"><Time at={m.pendingJoinToken.expiresAt} /></Fact> : null}
                </>
              ) : null}
            </Facts>
            <Facts title="Incus member" none={m.cluster ? <>Not a member of cluster {m.cluster.name}.</> : <>Not a member of an Incus cluster: its enrolment names the cluster.</>}>
              {m.member ? (
                <>
                  <Fact k="Status"><MemberStatusBadge status={m.member.status} /> {m.member.message && m.member.message.trim().toLowerCase() !== m.member.status.toLowerCase() ? m.member.message : null}</Fact>
                  <Fact k="Held">{m.member.held ? 'yes (scheduler.instance=manual)' : `no${m.member.scheduler ? ` (scheduler.instance=${m.member.scheduler})` : ''}`}</Fact>
                  <Fact k="Roles">{m.member.roles.join(', ') || '—'}</Fact>
                  <Fact k="Groups">{m.member.groups.join(', ') || '—'}</Fact>
                  <Fact k="Failure domain">{m.member.failureDomain || '—'}</Fact>
                  <Fact k="Architecture">{m.member.architecture || '—'}</Fact>
                  <Fact k="URL" url><code>{m.member.url}</code></Fact>
                </>
              ) : null}
            </Facts>
            <ProfileCard machine={m.name} registered={!!m.record} profile={m.hardwareProfile} onChanged={refresh} />
            {m.member ? <MaintenancePanel name={m.name} onChange={refresh} /> : null}
          </div>
        ) : null}
        {tab === 'admission' ? (
          <>
            {m.member ? <AdmissionPanel name={m.name} report={report} held={m.member.held} /> : <p className="muted">Admission checks run on a cluster member: {m.name} is not one yet.</p>}
            {m.record ? <DriftPanel name={m.name} onChange={refresh} /> : <p className="muted">Drift is watched on registered, admitted members: {m.name} has no Apelora record.</p>}
          </>
        ) : null}
        {tab === 'hardware' ? (
          <div className="facts-grid">
            <Facts
              title="MAAS"
              none={m.warnings.some((w) => w.code === 'MAAS_UNAVAILABLE') ? <>MAAS not answering: its facts show here once it answers.</> : <>MAAS does not report this machine.</>}
            >
              {m.maas ? (
                <>
                  <Fact k="Hostname">{m.maas.hostname} ({m.maas.fqdn})</Fact>
                  <Fact k="System id">{m.maas.systemId}</Fact>
                  <Fact k="Status">{statusText(m.maas.status, m.maas.statusMessage)}</Fact>
                  <Fact k="Power">{m.maas.powerState} ({m.maas.powerType})</Fact>
                  <Fact k="Hardware tests">{m.maas.testingStatus}</Fact>
                  <Fact k="Hardware UUID">{m.maas.hardwareUuid ?? '—'}</Fact>
                  <Fact k="Hardware">{maasHardware(m.maas)}</Fact>
                  <Fact k="OS">{m.maas.osystem ? `${m.maas.osystem} ${m.maas.distroSeries}` : '—'}</Fact>
                  <Fact k="Owner">{m.maas.owner ?? '—'}</Fact>
                  <Fact k="Zone / pool">{m.maas.zone} / {m.maas.pool}</Fact>
                  <Fact k="Tags">{m.maas.tags.join(', ') || '—'}</Fact>
                  <Fact k="IP addresses">{m.maas.ipAddresses.join(', ') || '—'}</Fact>
                </>
              ) : null}
            </Facts>
          </div>
        ) : null}
        {tab === 'hardware' && m.maas ? <MaasHardwareTables name={m.name} /> : null}
        {tab === 'fencing' ? (
          <div className="facts-grid">
            <Facts title="Fencing" none={<>No fence mapping: nothing powers this member off if it dies. <Link to="/fencing">Fencing</Link></>}>
              {m.fence ? (
                <>
                  <Fact k="MAAS system id">{m.fence.maasSystemId}</Fact>
                  <Fact k="Hardware UUID">{m.fence.hardwareUuid}</Fact>
                  <Fact k="Set"><Time at={m.fence.setAt} /> by {m.fence.setBy}</Fact>
                  <Fact k="Last drill">
                    {m.fence.lastDrill ? (
                      <>
                        {m.fence.lastDrill.ok ? '✓ ready' : `✕ ${inConsoleWords(m.fence.lastDrill.problem ?? '')}`} (power {m.fence.lastDrill.powerState ?? 'unknown'}, <Time at={m.fence.lastDrill.at} />)
                      </>
                    ) : (
                      'not drilled yet'
                    )}
                  </Fact>
                  <Fact k="Offline since">{m.fence.offlineSince ? <Time at={m.fence.offlineSince} /> : '—'}</Fact>
                  <Fact k="Last fence event">{m.fence.lastEvent ? `${m.fence.lastEvent.kind}: ${inConsoleWords(m.fence.lastEvent.message)}` : '—'}</Fact>
                </>
              ) : null}
            </Facts>
          </div>
        ) : null}
        {tab === 'history' ? <MachineAudit name={m.name} /> : null}
      </Tabs>
      {dialog ? <MachineActionDialog action={dialog} row={m} onClose={() => setDialog(null)} /> : null}
    </section>
  );
}

// primaryAction is the step the machine's phase leads to next: admit, approve or register,
// in that order.
function primaryAction(actions: { id: ActionId }[]): ActionId | undefined {
  return (['admit', 'restore', 'approve', 'register'] as ActionId[]).find((id) => actions.some((a) => a.id === id));
}

// Facts is a card of term/value pairs, or of the sentence none when it has none.
function Facts({ title, children, none }: { title: string; children?: ReactNode; none?: ReactNode }) {
  return (
    <section className="card facts" aria-label={title}>
      <h2>{title}</h2>
      {children ? <dl>{children}</dl> : <p className="muted">{none}</p>}
    </section>
  );
}

// url marks a URL: whole on its line while it fits, wrapped where it must (never clipped).
function Fact({ k, children, url }: { k: string; children: ReactNode; url?: boolean }) {
  return (
    <>
      <dt>{k}</dt>
      <dd className={url ? 'url' : undefined}>{children}</dd>
    </>
  );
}

function AdmissionPanel({ name, report, held }: { name: string; report: Admission; held: boolean }) {
  const r = report.latest;
  return (
    <section className="card admission" aria-labelledby="admission-title">
      <div className="page-head">
        <h2 id="admission-title">Admission checks</h2>
        <ReasonButton onClick={report.run} reason={report.running ? 'The checks are running.' : undefined} data-run-checks>
          Run the checks
        </ReasonButton>
      </div>
      <p className="hint">
        {held ? 'The member is held out of placement until admitted. ' : ''}
        Results appear here as each check is computed, whoever runs them. Running them changes nothing.
      </p>
      <Problems problems={problemsOf(report.error)} machine={name} />
      {r ? (
        <>
          <p role="status" data-verdict={r.verdict ?? 'RUNNING'} data-run={r.runId}>
            {r.verdict === 'ADMISSIBLE' ? '✓ Admissible' : r.verdict === 'BLOCKED' ? '✕ Blocked: a check failed' : '… Running'} — run {r.runId} ({r.trigger.toLowerCase()}),{' '}
            <Time at={r.at} />
          </p>
          <table className="table checks">
            <caption className="visually-hidden">Admission check results</caption>
            <thead>
              <tr>
                <th scope="col">Check</th>
                <th scope="col">Result</th>
                <th scope="col">Message</th>
              </tr>
            </thead>
            <tbody aria-live="polite">
              {r.checks.map((c) => (
                <tr key={c.name} data-check={c.name}>
                  <th scope="row">{c.title}</th>
                  <td><ResultBadge result={c.result} /></td>
                  <td>{inConsoleWords(c.message)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : (
        <p className="muted">No run seen yet: run the checks.</p>
      )}
    </section>
  );
}

// DriftPanel shows the machine's drift: each admission check that passed when it was
// admitted and fails now, since when and the evidence. It reads again whenever the drift
// watcher raises or clears one for this machine (driftChanges, from any replica), and so
// does the page (its DRIFT warnings), through onChange.
function DriftPanel({ name, onChange }: { name: string; onChange(): void }) {
  const res = useDrift(name, onChange);
  const drift = res.data?.drift ?? [];
  const checked = res.data?.machine?.driftCheckedAt;
  const quiet = res.data?.machine?.driftQuiet;
  return (
    <section className="card drift" aria-labelledby="drift-title" data-drift-count={drift.length}>
      <h2 id="drift-title">Drift since admission</h2>
      <p className="hint">
        Checks that passed when the member was admitted and fail now. Apelora changes nothing because of drift; it clears when the check passes again.{' '}
        {checked ? <>Last re-checked <Time at={checked} />.</> : 'Not re-checked yet (the machine is not an admitted member, or no replica watches).'}
      </p>
      <Problems problems={problemsOf(res.error)} machine={name} />
      {quiet ? <p className="warnings" data-drift-quiet="" role="status">{quiet}</p> : null}
      {drift.length === 0 ? (
        <p className="muted" data-drift="none">{checked ? '✓ No drift.' : 'No drift known.'}</p>
      ) : (
        <table className="table checks">
          <caption className="visually-hidden">Drift of {name}</caption>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">Since</th>
              <th scope="col">Evidence</th>
            </tr>
          </thead>
          <tbody aria-live="polite">
            {drift.map((d) => (
              <tr key={d.check} data-drift={d.check}>
                <th scope="row">
                  <span aria-hidden="true">! </span>
                  {d.title}
                </th>
                <td><Time at={d.since} /></td>
                <td>{inConsoleWords(d.evidence)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

// MaintenancePanel shows the member's maintenance tasks (evacuations and restores): the
// last ones, and the progress of one that runs, pushed live (maintenanceTask, from any
// replica) as Incus stops, moves or starts each instance. The page reads the machine again
// at each end (its phase becomes EVACUATED, or leaves it).
function MaintenancePanel({ name, onChange }: { name: string; onChange(): void }) {
  const { tasks, events, last } = useMaintenanceTasks(name, onChange);
  const history = tasks.data?.maintenanceTasks ?? [];
  const live = last ? events.filter((e) => e.taskId === last.taskId) : [];
  return (
    <section className="card facts maintenance" aria-labelledby="maintenance-title" data-tasks={history.length}>
      <h2 id="maintenance-title">Maintenance</h2>
      <Problems problems={problemsOf(tasks.error)} machine={name} />
      {live.length ? (
        <ol className="progress" aria-live="polite" data-progress={live.length}>
          {live.map((e) => (
            <li key={e.id} data-kind={e.kind}>
              <Time at={e.at} /> {inConsoleWords(e.message)}
            </li>
          ))}
        </ol>
      ) : null}
      {history.length === 0 ? (
        <p className="muted">Never evacuated by Apelora.</p>
      ) : (
        <dl>
          {history.slice(0, 5).map((task) => (
            <div key={task.id} data-task={task.id}>
              <dt>
                {task.action === 'EVACUATE' ? 'Evacuated' : 'Restored'} <Time at={task.startedAt} /> by {task.startedBy}
              </dt>
              <dd>{task.outcome ? `${task.outcome.toLowerCase()}: ${inConsoleWords(task.message)}` : 'running…'}</dd>
            </div>
          ))}
        </dl>
      )}
    </section>
  );
}

function MachineAudit({ name }: { name: string }) {
  const trail = useAuditTrail({ machine: name }, 20);
  return (
    <section aria-labelledby="history-title">
      <h2 id="history-title" className="visually-hidden">History</h2>
      <AuditTable trail={trail} showMachine={false} />
    </section>
  );
}
