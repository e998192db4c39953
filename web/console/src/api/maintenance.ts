// Maintenance: evacuating and restoring a member, and its operations' progress.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const EvacuateMemberMutation = graphql(`
  mutation EvacuateMember($input: EvacuateMemberInput!) {
    evacuateMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status clusterEvacuate fate }
      targets { member instances }
      operation { id incusOperation }
    }
  }
`);

export const RestoreMemberMutation = graphql(`
  mutation RestoreMember($input: RestoreMemberInput!) {
    restoreMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status fate }
      report { runId verdict checks { name title result message } }
      operation { id incusOperation }
    }
  }
`);

export const MemberOperationsQuery = graphql(`
  query MemberOperations($name: String!) {
    memberOperations(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }
  }
`);

export const MemberOperationSubscription = graphql(`
  subscription MemberOperation($name: String!, $after: ID) {
    memberOperation(name: $name, after: $after) { id operationId action at kind message }
  }
`);
