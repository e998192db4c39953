// The fleet: a row per machine (MAAS × Apelora record × Incus member), read once or followed live.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const FleetRowFragment = graphql(`
  fragment FleetRow on Machine {
    name
    phase
    cluster { name }
    warnings { code message }
    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }
    member { name status message held scheduler roles groups failureDomain architecture }
    pendingJoinToken { expiresAt }
    maas { ...MaasFacts }
    maasSteps { step allowed reason }
    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }
  }
`);

export const FleetQuery = graphql(`
  query Fleet {
    fleet {
      sources {
        incus { configured available message since }
        maas { configured available message since }
        clusters { cluster { name } status { configured available message since } }
      }
      machines { ...FleetRow }
    }
  }
`);

// The fleet stream: a snapshot, then each change with the next revision (see lib/fleetStream).
export const FleetUpdatesSubscription = graphql(`
  subscription FleetUpdates($after: Int) {
    fleetUpdates(after: $after) {
      revision
      snapshot
      added { ...FleetRow }
      changed { ...FleetRow }
      removed
      sources {
        incus { configured available message since }
        maas { configured available message since }
        clusters { cluster { name } status { configured available message since } }
      }
    }
  }
`);
