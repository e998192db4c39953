// Rolling reboots: each cluster's latest one, and starting, pausing, resuming and
// cancelling one.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const RollingRebootFragment = graphql(`
  fragment RollingRebootRow on RollingReboot {
    id members current done stage stageSince stageSeconds state reason startedBy startedAt finishedAt
  }
`);

// A cluster's latest rolling reboot (each cluster runs one at a time); without a cluster,
// the latest of any.
export const RollingRebootQuery = graphql(`
  query RollingReboot($cluster: String) {
    rollingReboot(cluster: $cluster) { ...RollingRebootRow }
  }
`);

export const StartRollingRebootMutation = graphql(`
  mutation StartRollingReboot($input: StartRollingRebootInput!) {
    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const PauseRollingRebootMutation = graphql(`
  mutation PauseRollingReboot($input: RollingRebootInput!) {
    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const ResumeRollingRebootMutation = graphql(`
  mutation ResumeRollingReboot($input: RollingRebootInput!) {
    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const CancelRollingRebootMutation = graphql(`
  mutation CancelRollingReboot($input: RollingRebootInput!) {
    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);
