// Release a machine to MAAS's pool (releaseMachine); erasing its disks needs
// hardware.delete, and the plan says what happens to them.
import { useState } from 'react';
import { useMutation } from 'urql';
import { ReleaseMachineMutation } from '../api/maas';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field } from '../components/ui';
import { eraseReason } from '../lib/actions';
import type { Row } from '../lib/fleet';
import { useViewer } from '../viewer';

export function ReleaseDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, release] = useMutation(ReleaseMachineMutation);
  const viewer = useViewer();
  const [erase, setErase] = useState(false);
  const [comment, setComment] = useState('');
  const m = row.maas!;
  const noErase = eraseReason(viewer, row.cluster?.name);
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
