// Set (or change) a member's fence mapping (setFenceMapping), the MAAS machine offered from
// what MAAS reports.
import { useState } from 'react';
import { useMutation } from 'urql';
import { SetFenceMappingMutation } from '../api/fencing';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';
import type { Row } from '../lib/fleet';

export function SetFenceMappingDialog({ member, rows, onClose, onDone }: { member: string; rows: Row[]; onClose(): void; onDone(notice: string): void }) {
  const [, setMapping] = useMutation(SetFenceMappingMutation);
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
      blocked={systemId === '' ? 'Choose the MAAS machine first.' : uuid.trim() === '' ? 'Give the hardware UUID first.' : undefined}
      consequence={
        <p>
          apelora-worker will be allowed to power <strong>{member}</strong> off through MAAS when it is dead, after MAAS reports the hardware UUID below for the
          system id. MAAS is asked first; a system id it does not know, or that reports another UUID, is refused.
        </p>
      }
      fieldNames={['maasSystemId', 'hardwareUuid', 'member']}
      fields={(errors) => (
        <>
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
      planKey={JSON.stringify({ member, maasSystemId: systemId, hardwareUuid: uuid })}
      run={(dryRun, planHash) => setMapping({ input: { member, maasSystemId: systemId, hardwareUuid: uuid, dryRun, planHash } })}
      onDone={(d) => {
        onClose();
        onDone(`${member}: ${d.setFenceMapping.notice}`);
      }}
      onClose={onClose}
    />
  );
}
