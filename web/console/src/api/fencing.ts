// Fencing: the cluster as fencing sees it, fence mappings and fence events (live).
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const FencingQuery = graphql(`
  query Fencing {
    cluster {
      healingThreshold offlineThreshold members offlineMembers unmappedMembers
      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }
      warnings { code message }
      placementGuard { state message }
    }
    fenceMappings {
      member cluster maasSystemId hardwareUuid setBy setAt offlineSince
      lastDrill { at ok powerState problem worker }
      lastEvent { id at kind reason message }
    }
  }
`);

export const FenceEventRowFragment = graphql(`
  fragment FenceEventRow on FenceEvent {
    id at member kind reason message worker
  }
`);

export const FenceEventsQuery = graphql(`
  query FenceEvents($member: String, $first: Int, $after: String) {
    fenceEvents(member: $member, first: $first, after: $after) {
      edges { cursor node { ...FenceEventRow } }
      pageInfo { hasNextPage endCursor }
    }
  }
`);

export const FenceProgressSubscription = graphql(`
  subscription FenceProgress($member: String, $after: ID) {
    fenceProgress(member: $member, after: $after) { ...FenceEventRow }
  }
`);

export const SetFenceMappingMutation = graphql(`
  mutation SetFenceMapping($input: SetFenceMappingInput!) {
    setFenceMapping(input: $input) { plan { ...PlanFields }
      verifiedWithMaas notice
      mapping { member cluster maasSystemId hardwareUuid }
    }
  }
`);

export const RemoveFenceMappingMutation = graphql(`
  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {
    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member cluster } }
  }
`);
