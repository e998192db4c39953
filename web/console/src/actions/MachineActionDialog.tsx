// MachineActionDialog opens the dialog of a change to a machine (lib/actions.ts says which
// its phase offers), for the machine, fleet and enrolment pages: each action is its own
// component in this folder, named for what it does.
import type { ActionId } from '../lib/actions';
import type { Row } from '../lib/fleet';
import { RegisterDialog } from './RegisterDialog';
import { ApproveEnrolmentDialog } from './ApproveEnrolmentDialog';
import { RevokeJoinTokenDialog } from './RevokeJoinTokenDialog';
import { RemoveMemberDialog } from './RemoveMemberDialog';
import { EvacuateDialog } from './EvacuateDialog';
import { RestoreDialog } from './RestoreDialog';
import { UnregisterDialog } from './UnregisterDialog';
import { AdmitDialog } from './AdmitDialog';
import { CommissionDialog } from './CommissionDialog';
import { InstallDialog } from './InstallDialog';
import { HardwareTestsDialog } from './HardwareTestsDialog';
import { ReleaseDialog } from './ReleaseDialog';

export function MachineActionDialog({ action, row, onClose }: { action: ActionId; row: Row; onClose(): void }) {
  switch (action) {
    case 'register':
      return row.maas && !row.record && !row.member ? (
        <RegisterDialog target={{ kind: 'maas', systemId: row.maas.systemId, hostname: row.maas.hostname, hardwareUuid: row.maas.hardwareUuid }} onClose={onClose} />
      ) : (
        <RegisterDialog target={{ kind: 'manual', name: row.name }} onClose={onClose} />
      );
    case 'approve':
      return <ApproveEnrolmentDialog name={row.name} cluster={row.cluster?.name} onClose={onClose} />;
    case 'revoke':
      return <RevokeJoinTokenDialog name={row.name} onClose={onClose} />;
    case 'remove':
      return <RemoveMemberDialog name={row.name} onClose={onClose} />;
    case 'evacuate':
      return <EvacuateDialog name={row.name} onClose={onClose} />;
    case 'restore':
      return <RestoreDialog name={row.name} onClose={onClose} />;
    case 'unregister':
      return <UnregisterDialog name={row.name} onClose={onClose} />;
    case 'admit':
      return <AdmitDialog row={row} onClose={onClose} />;
    case 'commission':
      return <CommissionDialog row={row} onClose={onClose} />;
    case 'install':
      return <InstallDialog row={row} onClose={onClose} />;
    case 'test':
      return <HardwareTestsDialog row={row} onClose={onClose} />;
    case 'release':
      return <ReleaseDialog row={row} onClose={onClose} />;
  }
}
