// Incus clusters: listed with their members, state and guard; registered and removed.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const ClusterRowFragment = graphql(`
  fragment ClusterRow on Cluster {
    name certificateFingerprint registeredAt registeredBy fromEnvironment addresses through
    source { available message }
    members { name status roles }
    quorum { voters votersOnline majority standbys databaseLeader }
    placementGuard { state message }
    machineRecords removeRefusal
    fencing { acting pausedCode pausedReason }
  }
`);

export const ClustersQuery = graphql(`
  query Clusters {
    clusters { ...ClusterRow }
    incusClientCertificate
  }
`);

// The chooser's list: the names only (no member is read).
export const ClusterChoicesQuery = graphql(`
  query ClusterChoices {
    clusters { name fromEnvironment }
  }
`);

export const RegisterClusterMutation = graphql(`
  mutation RegisterCluster($input: RegisterClusterInput!) {
    registerCluster(input: $input) { plan { ...PlanFields } cluster { name certificateFingerprint } }
  }
`);

export const RemoveClusterMutation = graphql(`
  mutation RemoveCluster($input: RemoveClusterInput!) {
    removeCluster(input: $input) { plan { ...PlanFields } removed { name } }
  }
`);
