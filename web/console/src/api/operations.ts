// Every GraphQL operation the console sends, in one place. GraphQL Code Generator
// (codegen.yml) types each one from schema/*.graphqls into src/gql/.
import { graphql } from '../gql';

export const ViewerQuery = graphql(`
  query Viewer {
    viewer { name permissions }
  }
`);

export const MaasFactsFragment = graphql(`
  fragment MaasFacts on MaasMachine {
    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid
    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags
    ipAddresses locked testingStatus testingStatusCode
  }
`);

export const FleetRowFragment = graphql(`
  fragment FleetRow on Machine {
    name
    phase
    warnings { code message }
    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }
    member { name status message held scheduler roles groups failureDomain architecture }
    pendingJoinToken { expiresAt }
    maas { ...MaasFacts }
    maasSteps { step allowed reason }
    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }
  }
`);

export const FleetQuery = graphql(`
  query Fleet {
    fleet {
      sources {
        incus { configured available message since }
        maas { configured available message since }
      }
      machines { ...FleetRow }
    }
  }
`);

// The fleet stream: a snapshot, then each change with the next revision (see lib/fleetStream).
export const FleetUpdatesSubscription = graphql(`
  subscription FleetUpdates($after: Int) {
    fleetUpdates(after: $after) {
      revision
      snapshot
      added { ...FleetRow }
      changed { ...FleetRow }
      removed
      sources {
        incus { configured available message since }
        maas { configured available message since }
      }
    }
  }
`);

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
  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome) {
    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome) { ...AuditEventRow }
  }
`);

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

export const PlanFieldsFragment = graphql(`
  fragment PlanFields on Plan {
    refused
    planHash
    steps { system call target changes { field before after } }
    refusals { code message field }
    warnings { code message }
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

export const EvacuateMemberMutation = graphql(`
  mutation EvacuateMember($input: EvacuateMemberInput!) {
    evacuateMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status clusterEvacuate fate }
      targets { member instances }
      operation { id incusOperation }
    }
  }
`);

export const RestoreMemberMutation = graphql(`
  mutation RestoreMember($input: RestoreMemberInput!) {
    restoreMember(input: $input) { plan { ...PlanFields }
      machine { ...FleetRow }
      instances { project name status fate }
      report { runId verdict checks { name title result message } }
      operation { id incusOperation }
    }
  }
`);

export const MemberOperationsQuery = graphql(`
  query MemberOperations($name: String!) {
    memberOperations(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }
  }
`);

export const MemberOperationSubscription = graphql(`
  subscription MemberOperation($name: String!, $after: ID) {
    memberOperation(name: $name, after: $after) { id operationId action at kind message }
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

export const FencingQuery = graphql(`
  query Fencing {
    cluster {
      healingThreshold offlineThreshold members offlineMembers unmappedMembers
      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }
      warnings { code message }
      placementGuard { state message }
    }
    fenceMappings {
      member maasSystemId hardwareUuid setBy setAt offlineSince
      lastDrill { at ok powerState problem worker }
      lastEvent { id at kind reason message }
    }
  }
`);

export const SetPlacementGuardMutation = graphql(`
  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {
    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }
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
      mapping { member maasSystemId hardwareUuid }
    }
  }
`);

export const RemoveFenceMappingMutation = graphql(`
  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {
    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member } }
  }
`);

export const IdentityRowFragment = graphql(`
  fragment IdentityRow on Identity {
    name permissions createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal
    sso { issuer subject groups }
  }
`);

export const IdentitiesQuery = graphql(`
  query Identities {
    identities { ...IdentityRow }
  }
`);

export const CreateIdentityMutation = graphql(`
  mutation CreateIdentity($input: CreateIdentityInput!) {
    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }
  }
`);

export const RevokeIdentityMutation = graphql(`
  mutation RevokeIdentity($input: RevokeIdentityInput!) {
    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }
  }
`);

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

export const MaasImagesQuery = graphql(`
  query MaasImages {
    maasImages { name os release kind architectures }
  }
`);

export const RollingRebootFragment = graphql(`
  fragment RollingRebootRow on RollingReboot {
    id members current done step stepSince stepSeconds state reason startedBy startedAt finishedAt
  }
`);

export const RollingRebootQuery = graphql(`
  query RollingReboot {
    rollingReboot { ...RollingRebootRow }
  }
`);

export const StartRollingRebootMutation = graphql(`
  mutation StartRollingReboot($input: StartRollingRebootInput!) {
    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const PauseRollingRebootMutation = graphql(`
  mutation PauseRollingReboot($input: RollingRebootInput!) {
    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const ResumeRollingRebootMutation = graphql(`
  mutation ResumeRollingReboot($input: RollingRebootInput!) {
    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);

export const CancelRollingRebootMutation = graphql(`
  mutation CancelRollingReboot($input: RollingRebootInput!) {
    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }
  }
`);
