// Hardware profiles: declared, replaced, removed, assigned to a machine or cleared.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const HardwareProfileRowFragment = graphql(`
  fragment HardwareProfileRow on HardwareProfile {
    name description architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps
    setBy setAt machines
  }
`);

export const HardwareProfilesQuery = graphql(`
  query HardwareProfiles {
    hardwareProfiles { ...HardwareProfileRow }
  }
`);

export const SetHardwareProfileMutation = graphql(`
  mutation SetHardwareProfile($input: SetHardwareProfileInput!) {
    setHardwareProfile(input: $input) { plan { ...PlanFields } profile { ...HardwareProfileRow } previous { name } }
  }
`);

export const RemoveHardwareProfileMutation = graphql(`
  mutation RemoveHardwareProfile($input: RemoveHardwareProfileInput!) {
    removeHardwareProfile(input: $input) { plan { ...PlanFields } removed { name } }
  }
`);

export const AssignHardwareProfileMutation = graphql(`
  mutation AssignHardwareProfile($input: AssignHardwareProfileInput!) {
    assignHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }
  }
`);

export const ClearHardwareProfileMutation = graphql(`
  mutation ClearHardwareProfile($input: ClearHardwareProfileInput!) {
    clearHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }
  }
`);
