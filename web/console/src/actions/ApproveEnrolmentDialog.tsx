// Approve enrolment (approveEnrolment): confirm, approve, then show the join token once.
import { useEffect, useRef, useState } from 'react';
import { useMutation } from 'urql';
import { ApproveEnrolmentMutation } from '../api/enrolment';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Dialog } from '../components/Dialog';
import { Banner, Field, Time } from '../components/ui';
import { MemberConfigRows, useMemberConfig } from '../components/MemberConfigRows';
import { CopyButton } from '../components/CopyButton';
import { ClusterChooser, useClusterChooser } from '../components/ClusterChooser';
import type { ApproveEnrolmentMutation as ApproveData } from '../gql/graphql';

type Approval = ApproveData['approveEnrolment'];

// ApproveEnrolmentDialog confirms, approves, then shows the join token once. The token
// lives only in this component's state and is dropped when the dialog closes. cluster is
// the machine's current cluster (Machine.cluster), where the chooser starts.
export function ApproveEnrolmentDialog({ name, cluster, onClose }: { name: string; cluster?: string | null; onClose(): void }) {
  const [, approve] = useMutation(ApproveEnrolmentMutation);
  const [approval, setApproval] = useState<Approval | null>(null);
  const config = useMemberConfig();
  const [picked, setPicked] = useState('');
  const chooser = useClusterChooser(cluster, picked);
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
          The Incus cluster chosen below issues a single-use join token for the name <strong>{name}</strong>. The console shows it once, with the command to run on the new
          server; Apelora never stores it. The machine then waits for the server to join (Awaiting join).
        </p>
      }
      wide
      showFacts
      blocked={chooser.res.fetching && !chooser.res.data ? 'Reading the registered clusters.' : undefined}
      fieldNames={['cluster', ...config.fieldNames]}
      fields={(errors) => (
        <>
          <ClusterChooser chooser={chooser} error={errors.get('cluster')} onChange={setPicked} />
          <MemberConfigRows state={config} errors={errors} />
        </>
      )}
      planKey={JSON.stringify({ name, cluster: chooser.cluster, memberConfig: config.input() })}
      run={(dryRun, planHash) => approve({ input: { name, cluster: chooser.cluster, memberConfig: config.input(), dryRun, planHash } })}
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
