// Maintenance: evacuating and restoring a member, and its maintenance tasks' progress.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const EvacuateMemberMutation = graphql(`
  mutation EvacuateMember($input: EvacuateMemberInput!) {
    evacuateMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status clusterEvacuate fate }
      targets { member instances }
      task { id incusOperation }
    }
  }
`);

export const RestoreMemberMutation = graphql(`
  mutation RestoreMember($input: RestoreMemberInput!) {
    restoreMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status fate }
      report { runId verdict checks { name title result message } }
      task { id incusOperation }
    }
  }
`);

export const MaintenanceTasksQuery = graphql(`
  query MaintenanceTasks($name: String!) {
    maintenanceTasks(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }
  }
`);

export const MaintenanceTaskSubscription = graphql(`
  subscription MaintenanceTask($name: String!, $after: ID) {
    maintenanceTask(name: $name, after: $after) { id taskId action at kind message }
  }
`);
