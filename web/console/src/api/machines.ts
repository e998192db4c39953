// Machines: one machine's page, and its record (register, unregister).
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const MachineQuery = graphql(`
  query Machine($name: String!) {
    machine(name: $name) {
      ...FleetRow
      record { description }
      hardwareProfile { ...HardwareProfileRow }
      member { url description }
      fence {
        setBy setAt
        lastDrill { worker }
        lastEvent { id at kind reason message }
      }
    }
  }
`);

export const RegisterMachineMutation = graphql(`
  mutation RegisterMachine($input: RegisterMachineInput!) {
    registerMachine(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }
  }
`);

export const UnregisterMachineMutation = graphql(`
  mutation UnregisterMachine($input: UnregisterMachineInput!) {
    unregisterMachine(input: $input) { plan { ...PlanFields } name }
  }
`);
