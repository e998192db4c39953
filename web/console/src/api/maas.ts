// MAAS: a machine's MAAS facts and hardware, the images MAAS holds, and the MAAS steps.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const MaasFactsFragment = graphql(`
  fragment MaasFacts on MaasMachine {
    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid
    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags
    ipAddresses locked testingStatus testingStatusCode
  }
`);

// The MAAS hardware tab's tables: asked only while the tab shows (each list is a MAAS read).
export const MachineMaasHardwareQuery = graphql(`
  query MachineMaasHardware($name: String!) {
    machine(name: $name) {
      name
      maas {
        systemId status
        storageDevices { name type path model serial sizeBytes }
        networkInterfaces { name type macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }
        scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds }
      }
    }
  }
`);

export const MaasImagesQuery = graphql(`
  query MaasImages {
    maasImages { name os release kind architectures }
  }
`);

export const CommissionMachineMutation = graphql(`
  mutation CommissionMachine($input: CommissionMachineInput!) {
    commissionMachine(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }
  }
`);

export const InstallOperatingSystemMutation = graphql(`
  mutation InstallOperatingSystem($input: InstallOperatingSystemInput!) {
    installOperatingSystem(input: $input) { plan { ...PlanFields } machine { ...FleetRow } maas { ...MaasFacts } }
  }
`);

export const RunHardwareTestsMutation = graphql(`
  mutation RunHardwareTests($input: RunHardwareTestsInput!) {
    runHardwareTests(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }
  }
`);

export const ReleaseMachineMutation = graphql(`
  mutation ReleaseMachine($input: ReleaseMachineInput!) {
    releaseMachine(input: $input) { plan { ...PlanFields }
      maas { ...MaasFacts }
      erase { requested maasErasesOnRelease effective message }
    }
  }
`);
