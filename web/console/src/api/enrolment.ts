// Enrolment: approve it (the join token, shown once) and revoke the pending token.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const ApproveEnrolmentMutation = graphql(`
  mutation ApproveEnrolment($input: ApproveEnrolmentInput!) {
    approveEnrolment(input: $input) { plan { ...PlanFields }
      joinToken expiresAt command scriptUrl
      memberConfig { entity name key value }
      machine { ...FleetRow }
    }
  }
`);

export const RevokeJoinTokenMutation = graphql(`
  mutation RevokeJoinToken($input: RevokeJoinTokenInput!) {
    revokeJoinToken(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }
  }
`);
