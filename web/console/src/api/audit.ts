// The audit trail: its events (a page, or live), the signed checkpoint, whether it verifies, an inclusion proof.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const AuditEventFragment = graphql(`
  fragment AuditEventRow on AuditEvent {
    id at actor action machine parameters outcome error requestId details
  }
`);

export const AuditEventsQuery = graphql(`
  query AuditEvents($first: Int, $after: String, $machine: String, $actor: String, $outcome: AuditOutcome) {
    auditEvents(first: $first, after: $after, machine: $machine, actor: $actor, outcome: $outcome) {
      edges { cursor node { ...AuditEventRow } }
      pageInfo { hasNextPage endCursor }
    }
  }
`);

export const AuditCheckpointQuery = graphql(`
  query AuditCheckpoint {
    auditCheckpoint { treeSize rootHash at verifierKey }
    auditTrail { verifies }
  }
`);

export const AuditTrailQuery = graphql(`
  query AuditTrail {
    auditTrail { verifies since problem checkedAt }
  }
`);

export const AuditProofQuery = graphql(`
  query AuditProof($id: ID!) {
    auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash at } }
  }
`);

export const AuditEventRecordedSubscription = graphql(`
  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome, $after: ID) {
    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome, after: $after) { ...AuditEventRow }
  }
`);
