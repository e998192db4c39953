// Set (or change) a member's fence mapping (setFenceMapping), the MAAS machine offered from
// what MAAS reports, in the member's cluster (a member name is unique within its cluster
// only): the chooser starts on the member's own.
import { useState } from 'react';
import { useMutation } from 'urql';
import { SetFenceMappingMutation } from '../api/fencing';
import { ClusterChooser, useClusterChooser } from '../components/ClusterChooser';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';
import type { Row } from '../lib/fleet';

export function SetFenceMappingDialog({
  member,
  cluster,
  rows,
  onClose,
  onDone,
}: {
  member: string;
  cluster?: string | null;
  rows: Row[];
  onClose(): void;
  onDone(notice: string): void;
}) {
  const [, setMapping] = useMutation(SetFenceMappingMutation);
  const [picked, setPicked] = useState('');
  const chooser = useClusterChooser(cluster, picked);
  const own = rows.find((r) => r.name === member)?.maas;
  const offered = rows.filter((r) => r.maas).map((r) => r.maas!);
  const [systemId, setSystemId] = useState(own?.systemId ?? '');
  const [uuid, setUuid] = useState(own?.hardwareUuid ?? '');
  const pick = (id: string) => {
    setSystemId(id);
    const m = offered.find((o) => o.systemId === id);
    if (m) setUuid(m.hardwareUuid ?? '');
  };
  return (
    <ConfirmDialog
      change="setFenceMapping"
      title={`Fence mapping of ${member}`}
      machine={member}
      confirmLabel="Set mapping"
      blocked={
        chooser.res.fetching && !chooser.res.data
          ? 'Reading the registered clusters.'
          : systemId === ''
            ? 'Choose the MAAS machine first.'
            : uuid.trim() === ''
              ? 'Give the hardware UUID first.'
              : undefined
      }
      consequence={
        <p>
          apelora-worker will be allowed to power <strong>{member}</strong> off through MAAS when it is dead, after MAAS reports the hardware UUID below for the
          system id. MAAS is asked first; a system id it does not know, or that reports another UUID, is refused.
        </p>
      }
      fieldNames={['cluster', 'maasSystemId', 'hardwareUuid', 'member']}
      fields={(errors) => (
        <>
          <ClusterChooser chooser={chooser} error={errors.get('cluster')} onChange={setPicked} hint="The member's Incus cluster: a member name is unique within its cluster only." />
          <Field label="MAAS machine" error={errors.get('maasSystemId') ?? errors.get('member')} hint="Offered from what MAAS reports.">
            {(a) => (
              <select {...a} className="input" value={systemId} onChange={(e) => pick(e.target.value)} name="maasSystemId">
                <option value="">Choose a MAAS machine…</option>
                {offered.map((o) => (
                  <option key={o.systemId} value={o.systemId}>
                    {o.hostname} ({o.systemId})
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Hardware UUID" error={errors.get('hardwareUuid')} hint="As MAAS reports it for that machine.">
            {(a) => <input {...a} className="input" value={uuid} onChange={(e) => setUuid(e.target.value)} spellCheck={false} name="hardwareUuid" />}
          </Field>
        </>
      )}
      planKey={JSON.stringify({ member, cluster: chooser.cluster, maasSystemId: systemId, hardwareUuid: uuid })}
      run={(dryRun, planHash) => setMapping({ input: { member, cluster: chooser.cluster, maasSystemId: systemId, hardwareUuid: uuid, dryRun, planHash } })}
      onDone={(d) => {
        onClose();
        onDone(`${member}: ${d.setFenceMapping.notice}`);
      }}
      onClose={onClose}
    />
  );
}
