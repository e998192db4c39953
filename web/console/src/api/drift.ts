// Drift: the admission checks an admitted member fails now, live.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const MachineDriftQuery = graphql(`
  query MachineDrift($name: String!) {
    drift(machine: $name) { machine check title since raisedAt evidence lastChecked }
    machine(name: $name) { name driftCheckedAt driftQuiet }
  }
`);

export const DriftChangesSubscription = graphql(`
  subscription DriftChanges($machine: String, $after: ID) {
    driftChanges(machine: $machine, after: $after) { id machine check change at }
  }
`);
