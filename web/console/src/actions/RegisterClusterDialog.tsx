// Register an Incus cluster (registerCluster): its name, a member's URL and the cluster
// certificate. The plan connects once and shows the fingerprint it will pin, the members
// and their roles; a cluster that does not trust Apelora yet is the plan's refusal, with
// the command to run on a member.
import { useState } from 'react';
import { useMutation } from 'urql';
import { RegisterClusterMutation } from '../api/clusters';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';

export function RegisterClusterDialog({ onClose, onDone }: { onClose(): void; onDone(notice: string): void }) {
  const [, register] = useMutation(RegisterClusterMutation);
  const [name, setName] = useState('');
  const [url, setURL] = useState('');
  const [certificate, setCertificate] = useState('');
  const input = { name: name.trim(), url: url.trim(), clusterCertificate: certificate };
  return (
    <ConfirmDialog
      change="registerCluster"
      title="Register an Incus cluster"
      machine={input.name || 'the cluster'}
      confirmLabel="Register"
      wide
      showFacts
      blocked={!input.name || !input.url || !certificate.trim() ? 'Give the name, a member’s URL and the cluster certificate first.' : undefined}
      consequence={
        <p>
          Apelora connects once to the member with its client identity, pinned to the certificate given, and records the cluster. Nothing is written to
          Incus.
        </p>
      }
      fieldNames={['name', 'url', 'clusterCertificate']}
      fields={(errors) => (
        <>
          <Field label="Name" error={errors.get('name')} hint="1–63 characters: lower-case letters, digits and hyphens, starting with a letter.">
            {(a) => <input {...a} className="input" value={name} onChange={(e) => setName(e.target.value)} spellCheck={false} autoComplete="off" name="name" />}
          </Field>
          <Field label="A member’s URL" error={errors.get('url')} hint="https://host:8443 of one member (its core.https_address).">
            {(a) => <input {...a} className="input" value={url} onChange={(e) => setURL(e.target.value)} spellCheck={false} autoComplete="off" name="url" />}
          </Field>
          <Field label="Cluster certificate (PEM)" error={errors.get('clusterCertificate')} hint="$INCUS_DIR/cluster.crt of any member.">
            {(a) => (
              <textarea {...a} className="input" rows={6} value={certificate} onChange={(e) => setCertificate(e.target.value)} spellCheck={false} name="clusterCertificate" />
            )}
          </Field>
        </>
      )}
      planKey={JSON.stringify(input)}
      run={(dryRun, planHash) => register({ input: { ...input, dryRun, planHash } })}
      onDone={() => {
        onClose();
        onDone(`Cluster ${input.name} registered.`);
      }}
      onClose={onClose}
    />
  );
}
