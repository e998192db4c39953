// Members: their admission checks (a report, or live), admitting one, removing one.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const AdmissionChecksSubscription = graphql(`
  subscription AdmissionChecks($name: String!) {
    admissionChecks(name: $name) {
      machine runId trigger at
      checks { name title result message }
      verdict
    }
  }
`);

export const AdmissionReportQuery = graphql(`
  query AdmissionReport($name: String!) {
    admissionReport(name: $name) {
      machine runId trigger at verdict
      checks { name title result message }
    }
  }
`);

export const AdmitMemberMutation = graphql(`
  mutation AdmitMember($input: AdmitMemberInput!) {
    admitMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      report { runId verdict checks { name title result message } }
    }
  }
`);

export const RemoveMemberMutation = graphql(`
  mutation RemoveMember($input: RemoveMemberInput!) {
    removeMember(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }
  }
`);
