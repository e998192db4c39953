// The placement guard (its state is read with the cluster: fencing.ts's FencingQuery).
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const SetPlacementGuardMutation = graphql(`
  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {
    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }
  }
`);
