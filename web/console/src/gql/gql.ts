/* eslint-disable */
import * as types from './graphql';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  fragment AuditEventRow on AuditEvent {\n    id at actor action machine parameters outcome error requestId details\n  }\n": typeof types.AuditEventRowFragmentDoc,
    "\n  query AuditEvents($first: Int, $after: String, $machine: String, $actor: String, $outcome: AuditOutcome) {\n    auditEvents(first: $first, after: $after, machine: $machine, actor: $actor, outcome: $outcome) {\n      edges { cursor node { ...AuditEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": typeof types.AuditEventsDocument,
    "\n  query AuditCheckpoint {\n    auditCheckpoint { treeSize rootHash at verifierKey }\n    auditTrail { verifies }\n  }\n": typeof types.AuditCheckpointDocument,
    "\n  query AuditTrail {\n    auditTrail { verifies since problem checkedAt }\n  }\n": typeof types.AuditTrailDocument,
    "\n  query AuditProof($id: ID!) {\n    auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash at } }\n  }\n": typeof types.AuditProofDocument,
    "\n  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome, $after: ID) {\n    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome, after: $after) { ...AuditEventRow }\n  }\n": typeof types.AuditEventRecordedDocument,
    "\n  fragment ClusterRow on Cluster {\n    name certificateFingerprint registeredAt registeredBy fromEnvironment addresses through\n    source { available message }\n    members { name status roles }\n    quorum { voters votersOnline majority standbys databaseLeader }\n    placementGuard { state message }\n    machineRecords removeRefusal\n    fencing { acting pausedCode pausedReason }\n  }\n": typeof types.ClusterRowFragmentDoc,
    "\n  query Clusters {\n    clusters { ...ClusterRow }\n    incusClientCertificate\n  }\n": typeof types.ClustersDocument,
    "\n  query ClusterChoices {\n    clusters { name fromEnvironment }\n  }\n": typeof types.ClusterChoicesDocument,
    "\n  mutation RegisterCluster($input: RegisterClusterInput!) {\n    registerCluster(input: $input) { plan { ...PlanFields } cluster { name certificateFingerprint } }\n  }\n": typeof types.RegisterClusterDocument,
    "\n  mutation RemoveCluster($input: RemoveClusterInput!) {\n    removeCluster(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n": typeof types.RemoveClusterDocument,
    "\n  query MachineDrift($name: String!) {\n    drift(machine: $name) { machine check title since raisedAt evidence lastChecked }\n    machine(name: $name) { name driftCheckedAt driftQuiet }\n  }\n": typeof types.MachineDriftDocument,
    "\n  subscription DriftChanges($machine: String, $after: ID) {\n    driftChanges(machine: $machine, after: $after) { id machine check change at }\n  }\n": typeof types.DriftChangesDocument,
    "\n  mutation ApproveEnrolment($input: ApproveEnrolmentInput!) {\n    approveEnrolment(input: $input) { plan { ...PlanFields }\n      joinToken expiresAt command scriptUrl\n      memberConfig { entity name key value }\n      machine { ...FleetRow }\n    }\n  }\n": typeof types.ApproveEnrolmentDocument,
    "\n  mutation RevokeJoinToken($input: RevokeJoinTokenInput!) {\n    revokeJoinToken(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": typeof types.RevokeJoinTokenDocument,
    "\n  query Fencing {\n    cluster {\n      healingThreshold offlineThreshold members offlineMembers unmappedMembers\n      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }\n      warnings { code message }\n      placementGuard { state message }\n    }\n    fenceMappings {\n      member cluster maasSystemId hardwareUuid setBy setAt offlineSince\n      lastDrill { at ok powerState problem worker }\n      lastEvent { id at kind reason message }\n    }\n  }\n": typeof types.FencingDocument,
    "\n  fragment FenceEventRow on FenceEvent {\n    id at member kind reason message worker\n  }\n": typeof types.FenceEventRowFragmentDoc,
    "\n  query FenceEvents($member: String, $first: Int, $after: String) {\n    fenceEvents(member: $member, first: $first, after: $after) {\n      edges { cursor node { ...FenceEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": typeof types.FenceEventsDocument,
    "\n  subscription FenceProgress($member: String, $after: ID) {\n    fenceProgress(member: $member, after: $after) { ...FenceEventRow }\n  }\n": typeof types.FenceProgressDocument,
    "\n  mutation SetFenceMapping($input: SetFenceMappingInput!) {\n    setFenceMapping(input: $input) { plan { ...PlanFields }\n      verifiedWithMaas notice\n      mapping { member cluster maasSystemId hardwareUuid }\n    }\n  }\n": typeof types.SetFenceMappingDocument,
    "\n  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {\n    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member cluster } }\n  }\n": typeof types.RemoveFenceMappingDocument,
    "\n  fragment FleetRow on Machine {\n    name\n    phase\n    cluster { name }\n    warnings { code message }\n    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }\n    member { name status message held scheduler roles groups failureDomain architecture }\n    pendingJoinToken { expiresAt }\n    maas { ...MaasFacts }\n    maasSteps { step allowed reason }\n    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }\n  }\n": typeof types.FleetRowFragmentDoc,
    "\n  query Fleet {\n    fleet {\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n      machines { ...FleetRow }\n    }\n  }\n": typeof types.FleetDocument,
    "\n  subscription FleetUpdates($after: Int) {\n    fleetUpdates(after: $after) {\n      revision\n      snapshot\n      added { ...FleetRow }\n      changed { ...FleetRow }\n      removed\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n    }\n  }\n": typeof types.FleetUpdatesDocument,
    "\n  fragment HardwareProfileRow on HardwareProfile {\n    name description architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps\n    setBy setAt machines\n  }\n": typeof types.HardwareProfileRowFragmentDoc,
    "\n  query HardwareProfiles {\n    hardwareProfiles { ...HardwareProfileRow }\n  }\n": typeof types.HardwareProfilesDocument,
    "\n  mutation SetHardwareProfile($input: SetHardwareProfileInput!) {\n    setHardwareProfile(input: $input) { plan { ...PlanFields } profile { ...HardwareProfileRow } previous { name } }\n  }\n": typeof types.SetHardwareProfileDocument,
    "\n  mutation RemoveHardwareProfile($input: RemoveHardwareProfileInput!) {\n    removeHardwareProfile(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n": typeof types.RemoveHardwareProfileDocument,
    "\n  mutation AssignHardwareProfile($input: AssignHardwareProfileInput!) {\n    assignHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n": typeof types.AssignHardwareProfileDocument,
    "\n  mutation ClearHardwareProfile($input: ClearHardwareProfileInput!) {\n    clearHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n": typeof types.ClearHardwareProfileDocument,
    "\n  query Viewer {\n    viewer { name permissions grants { permission cluster } }\n  }\n": typeof types.ViewerDocument,
    "\n  fragment IdentityRow on Identity {\n    name permissions grants { permission cluster } createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal\n    sso { issuer subject groups }\n  }\n": typeof types.IdentityRowFragmentDoc,
    "\n  query Identities {\n    identities { ...IdentityRow }\n  }\n": typeof types.IdentitiesDocument,
    "\n  mutation CreateIdentity($input: CreateIdentityInput!) {\n    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }\n  }\n": typeof types.CreateIdentityDocument,
    "\n  mutation RevokeIdentity($input: RevokeIdentityInput!) {\n    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }\n  }\n": typeof types.RevokeIdentityDocument,
    "\n  fragment MaasFacts on MaasMachine {\n    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid\n    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags\n    ipAddresses locked testingStatus testingStatusCode\n  }\n": typeof types.MaasFactsFragmentDoc,
    "\n  query MachineMaasHardware($name: String!) {\n    machine(name: $name) {\n      name\n      maas {\n        systemId status\n        storageDevices { name type path model serial sizeBytes }\n        networkInterfaces { name type macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }\n        scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds }\n      }\n    }\n  }\n": typeof types.MachineMaasHardwareDocument,
    "\n  query MaasImages {\n    maasImages { name os release kind architectures }\n  }\n": typeof types.MaasImagesDocument,
    "\n  mutation CommissionMachine($input: CommissionMachineInput!) {\n    commissionMachine(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n": typeof types.CommissionMachineDocument,
    "\n  mutation InstallOperatingSystem($input: InstallOperatingSystemInput!) {\n    installOperatingSystem(input: $input) { plan { ...PlanFields } machine { ...FleetRow } maas { ...MaasFacts } }\n  }\n": typeof types.InstallOperatingSystemDocument,
    "\n  mutation RunHardwareTests($input: RunHardwareTestsInput!) {\n    runHardwareTests(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n": typeof types.RunHardwareTestsDocument,
    "\n  mutation ReleaseMachine($input: ReleaseMachineInput!) {\n    releaseMachine(input: $input) { plan { ...PlanFields }\n      maas { ...MaasFacts }\n      erase { requested maasErasesOnRelease effective message }\n    }\n  }\n": typeof types.ReleaseMachineDocument,
    "\n  query Machine($name: String!) {\n    machine(name: $name) {\n      ...FleetRow\n      record { description }\n      hardwareProfile { ...HardwareProfileRow }\n      member { url description }\n      fence {\n        setBy setAt\n        lastDrill { worker }\n        lastEvent { id at kind reason message }\n      }\n    }\n  }\n": typeof types.MachineDocument,
    "\n  mutation RegisterMachine($input: RegisterMachineInput!) {\n    registerMachine(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": typeof types.RegisterMachineDocument,
    "\n  mutation UnregisterMachine($input: UnregisterMachineInput!) {\n    unregisterMachine(input: $input) { plan { ...PlanFields } name }\n  }\n": typeof types.UnregisterMachineDocument,
    "\n  mutation EvacuateMember($input: EvacuateMemberInput!) {\n    evacuateMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status clusterEvacuate fate }\n      targets { member instances }\n      task { id incusOperation }\n    }\n  }\n": typeof types.EvacuateMemberDocument,
    "\n  mutation RestoreMember($input: RestoreMemberInput!) {\n    restoreMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status fate }\n      report { runId verdict checks { name title result message } }\n      task { id incusOperation }\n    }\n  }\n": typeof types.RestoreMemberDocument,
    "\n  query MaintenanceTasks($name: String!) {\n    maintenanceTasks(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }\n  }\n": typeof types.MaintenanceTasksDocument,
    "\n  subscription MaintenanceTask($name: String!, $after: ID) {\n    maintenanceTask(name: $name, after: $after) { id taskId action at kind message }\n  }\n": typeof types.MaintenanceTaskDocument,
    "\n  subscription AdmissionChecks($name: String!) {\n    admissionChecks(name: $name) {\n      machine runId trigger at\n      checks { name title result message }\n      verdict\n    }\n  }\n": typeof types.AdmissionChecksDocument,
    "\n  query AdmissionReport($name: String!) {\n    admissionReport(name: $name) {\n      machine runId trigger at verdict\n      checks { name title result message }\n    }\n  }\n": typeof types.AdmissionReportDocument,
    "\n  mutation AdmitMember($input: AdmitMemberInput!) {\n    admitMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      report { runId verdict checks { name title result message } }\n    }\n  }\n": typeof types.AdmitMemberDocument,
    "\n  mutation RemoveMember($input: RemoveMemberInput!) {\n    removeMember(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": typeof types.RemoveMemberDocument,
    "\n  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {\n    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }\n  }\n": typeof types.SetPlacementGuardDocument,
    "\n  fragment PlanFields on Plan {\n    refused\n    planHash\n    facts { name value }\n    calls { system request target changes { field before after } }\n    refusals { code message field }\n    warnings { code message }\n  }\n": typeof types.PlanFieldsFragmentDoc,
    "\n  fragment RollingRebootRow on RollingReboot {\n    id members current done stage stageSince stageSeconds state reason startedBy startedAt finishedAt\n  }\n": typeof types.RollingRebootRowFragmentDoc,
    "\n  query RollingReboot($cluster: String) {\n    rollingReboot(cluster: $cluster) { ...RollingRebootRow }\n  }\n": typeof types.RollingRebootDocument,
    "\n  mutation StartRollingReboot($input: StartRollingRebootInput!) {\n    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": typeof types.StartRollingRebootDocument,
    "\n  mutation PauseRollingReboot($input: RollingRebootInput!) {\n    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": typeof types.PauseRollingRebootDocument,
    "\n  mutation ResumeRollingReboot($input: RollingRebootInput!) {\n    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": typeof types.ResumeRollingRebootDocument,
    "\n  mutation CancelRollingReboot($input: RollingRebootInput!) {\n    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": typeof types.CancelRollingRebootDocument,
};
const documents: Documents = {
    "\n  fragment AuditEventRow on AuditEvent {\n    id at actor action machine parameters outcome error requestId details\n  }\n": types.AuditEventRowFragmentDoc,
    "\n  query AuditEvents($first: Int, $after: String, $machine: String, $actor: String, $outcome: AuditOutcome) {\n    auditEvents(first: $first, after: $after, machine: $machine, actor: $actor, outcome: $outcome) {\n      edges { cursor node { ...AuditEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": types.AuditEventsDocument,
    "\n  query AuditCheckpoint {\n    auditCheckpoint { treeSize rootHash at verifierKey }\n    auditTrail { verifies }\n  }\n": types.AuditCheckpointDocument,
    "\n  query AuditTrail {\n    auditTrail { verifies since problem checkedAt }\n  }\n": types.AuditTrailDocument,
    "\n  query AuditProof($id: ID!) {\n    auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash at } }\n  }\n": types.AuditProofDocument,
    "\n  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome, $after: ID) {\n    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome, after: $after) { ...AuditEventRow }\n  }\n": types.AuditEventRecordedDocument,
    "\n  fragment ClusterRow on Cluster {\n    name certificateFingerprint registeredAt registeredBy fromEnvironment addresses through\n    source { available message }\n    members { name status roles }\n    quorum { voters votersOnline majority standbys databaseLeader }\n    placementGuard { state message }\n    machineRecords removeRefusal\n    fencing { acting pausedCode pausedReason }\n  }\n": types.ClusterRowFragmentDoc,
    "\n  query Clusters {\n    clusters { ...ClusterRow }\n    incusClientCertificate\n  }\n": types.ClustersDocument,
    "\n  query ClusterChoices {\n    clusters { name fromEnvironment }\n  }\n": types.ClusterChoicesDocument,
    "\n  mutation RegisterCluster($input: RegisterClusterInput!) {\n    registerCluster(input: $input) { plan { ...PlanFields } cluster { name certificateFingerprint } }\n  }\n": types.RegisterClusterDocument,
    "\n  mutation RemoveCluster($input: RemoveClusterInput!) {\n    removeCluster(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n": types.RemoveClusterDocument,
    "\n  query MachineDrift($name: String!) {\n    drift(machine: $name) { machine check title since raisedAt evidence lastChecked }\n    machine(name: $name) { name driftCheckedAt driftQuiet }\n  }\n": types.MachineDriftDocument,
    "\n  subscription DriftChanges($machine: String, $after: ID) {\n    driftChanges(machine: $machine, after: $after) { id machine check change at }\n  }\n": types.DriftChangesDocument,
    "\n  mutation ApproveEnrolment($input: ApproveEnrolmentInput!) {\n    approveEnrolment(input: $input) { plan { ...PlanFields }\n      joinToken expiresAt command scriptUrl\n      memberConfig { entity name key value }\n      machine { ...FleetRow }\n    }\n  }\n": types.ApproveEnrolmentDocument,
    "\n  mutation RevokeJoinToken($input: RevokeJoinTokenInput!) {\n    revokeJoinToken(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": types.RevokeJoinTokenDocument,
    "\n  query Fencing {\n    cluster {\n      healingThreshold offlineThreshold members offlineMembers unmappedMembers\n      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }\n      warnings { code message }\n      placementGuard { state message }\n    }\n    fenceMappings {\n      member cluster maasSystemId hardwareUuid setBy setAt offlineSince\n      lastDrill { at ok powerState problem worker }\n      lastEvent { id at kind reason message }\n    }\n  }\n": types.FencingDocument,
    "\n  fragment FenceEventRow on FenceEvent {\n    id at member kind reason message worker\n  }\n": types.FenceEventRowFragmentDoc,
    "\n  query FenceEvents($member: String, $first: Int, $after: String) {\n    fenceEvents(member: $member, first: $first, after: $after) {\n      edges { cursor node { ...FenceEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": types.FenceEventsDocument,
    "\n  subscription FenceProgress($member: String, $after: ID) {\n    fenceProgress(member: $member, after: $after) { ...FenceEventRow }\n  }\n": types.FenceProgressDocument,
    "\n  mutation SetFenceMapping($input: SetFenceMappingInput!) {\n    setFenceMapping(input: $input) { plan { ...PlanFields }\n      verifiedWithMaas notice\n      mapping { member cluster maasSystemId hardwareUuid }\n    }\n  }\n": types.SetFenceMappingDocument,
    "\n  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {\n    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member cluster } }\n  }\n": types.RemoveFenceMappingDocument,
    "\n  fragment FleetRow on Machine {\n    name\n    phase\n    cluster { name }\n    warnings { code message }\n    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }\n    member { name status message held scheduler roles groups failureDomain architecture }\n    pendingJoinToken { expiresAt }\n    maas { ...MaasFacts }\n    maasSteps { step allowed reason }\n    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }\n  }\n": types.FleetRowFragmentDoc,
    "\n  query Fleet {\n    fleet {\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n      machines { ...FleetRow }\n    }\n  }\n": types.FleetDocument,
    "\n  subscription FleetUpdates($after: Int) {\n    fleetUpdates(after: $after) {\n      revision\n      snapshot\n      added { ...FleetRow }\n      changed { ...FleetRow }\n      removed\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n    }\n  }\n": types.FleetUpdatesDocument,
    "\n  fragment HardwareProfileRow on HardwareProfile {\n    name description architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps\n    setBy setAt machines\n  }\n": types.HardwareProfileRowFragmentDoc,
    "\n  query HardwareProfiles {\n    hardwareProfiles { ...HardwareProfileRow }\n  }\n": types.HardwareProfilesDocument,
    "\n  mutation SetHardwareProfile($input: SetHardwareProfileInput!) {\n    setHardwareProfile(input: $input) { plan { ...PlanFields } profile { ...HardwareProfileRow } previous { name } }\n  }\n": types.SetHardwareProfileDocument,
    "\n  mutation RemoveHardwareProfile($input: RemoveHardwareProfileInput!) {\n    removeHardwareProfile(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n": types.RemoveHardwareProfileDocument,
    "\n  mutation AssignHardwareProfile($input: AssignHardwareProfileInput!) {\n    assignHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n": types.AssignHardwareProfileDocument,
    "\n  mutation ClearHardwareProfile($input: ClearHardwareProfileInput!) {\n    clearHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n": types.ClearHardwareProfileDocument,
    "\n  query Viewer {\n    viewer { name permissions grants { permission cluster } }\n  }\n": types.ViewerDocument,
    "\n  fragment IdentityRow on Identity {\n    name permissions grants { permission cluster } createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal\n    sso { issuer subject groups }\n  }\n": types.IdentityRowFragmentDoc,
    "\n  query Identities {\n    identities { ...IdentityRow }\n  }\n": types.IdentitiesDocument,
    "\n  mutation CreateIdentity($input: CreateIdentityInput!) {\n    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }\n  }\n": types.CreateIdentityDocument,
    "\n  mutation RevokeIdentity($input: RevokeIdentityInput!) {\n    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }\n  }\n": types.RevokeIdentityDocument,
    "\n  fragment MaasFacts on MaasMachine {\n    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid\n    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags\n    ipAddresses locked testingStatus testingStatusCode\n  }\n": types.MaasFactsFragmentDoc,
    "\n  query MachineMaasHardware($name: String!) {\n    machine(name: $name) {\n      name\n      maas {\n        systemId status\n        storageDevices { name type path model serial sizeBytes }\n        networkInterfaces { name type macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }\n        scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds }\n      }\n    }\n  }\n": types.MachineMaasHardwareDocument,
    "\n  query MaasImages {\n    maasImages { name os release kind architectures }\n  }\n": types.MaasImagesDocument,
    "\n  mutation CommissionMachine($input: CommissionMachineInput!) {\n    commissionMachine(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n": types.CommissionMachineDocument,
    "\n  mutation InstallOperatingSystem($input: InstallOperatingSystemInput!) {\n    installOperatingSystem(input: $input) { plan { ...PlanFields } machine { ...FleetRow } maas { ...MaasFacts } }\n  }\n": types.InstallOperatingSystemDocument,
    "\n  mutation RunHardwareTests($input: RunHardwareTestsInput!) {\n    runHardwareTests(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n": types.RunHardwareTestsDocument,
    "\n  mutation ReleaseMachine($input: ReleaseMachineInput!) {\n    releaseMachine(input: $input) { plan { ...PlanFields }\n      maas { ...MaasFacts }\n      erase { requested maasErasesOnRelease effective message }\n    }\n  }\n": types.ReleaseMachineDocument,
    "\n  query Machine($name: String!) {\n    machine(name: $name) {\n      ...FleetRow\n      record { description }\n      hardwareProfile { ...HardwareProfileRow }\n      member { url description }\n      fence {\n        setBy setAt\n        lastDrill { worker }\n        lastEvent { id at kind reason message }\n      }\n    }\n  }\n": types.MachineDocument,
    "\n  mutation RegisterMachine($input: RegisterMachineInput!) {\n    registerMachine(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": types.RegisterMachineDocument,
    "\n  mutation UnregisterMachine($input: UnregisterMachineInput!) {\n    unregisterMachine(input: $input) { plan { ...PlanFields } name }\n  }\n": types.UnregisterMachineDocument,
    "\n  mutation EvacuateMember($input: EvacuateMemberInput!) {\n    evacuateMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status clusterEvacuate fate }\n      targets { member instances }\n      task { id incusOperation }\n    }\n  }\n": types.EvacuateMemberDocument,
    "\n  mutation RestoreMember($input: RestoreMemberInput!) {\n    restoreMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status fate }\n      report { runId verdict checks { name title result message } }\n      task { id incusOperation }\n    }\n  }\n": types.RestoreMemberDocument,
    "\n  query MaintenanceTasks($name: String!) {\n    maintenanceTasks(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }\n  }\n": types.MaintenanceTasksDocument,
    "\n  subscription MaintenanceTask($name: String!, $after: ID) {\n    maintenanceTask(name: $name, after: $after) { id taskId action at kind message }\n  }\n": types.MaintenanceTaskDocument,
    "\n  subscription AdmissionChecks($name: String!) {\n    admissionChecks(name: $name) {\n      machine runId trigger at\n      checks { name title result message }\n      verdict\n    }\n  }\n": types.AdmissionChecksDocument,
    "\n  query AdmissionReport($name: String!) {\n    admissionReport(name: $name) {\n      machine runId trigger at verdict\n      checks { name title result message }\n    }\n  }\n": types.AdmissionReportDocument,
    "\n  mutation AdmitMember($input: AdmitMemberInput!) {\n    admitMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      report { runId verdict checks { name title result message } }\n    }\n  }\n": types.AdmitMemberDocument,
    "\n  mutation RemoveMember($input: RemoveMemberInput!) {\n    removeMember(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n": types.RemoveMemberDocument,
    "\n  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {\n    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }\n  }\n": types.SetPlacementGuardDocument,
    "\n  fragment PlanFields on Plan {\n    refused\n    planHash\n    facts { name value }\n    calls { system request target changes { field before after } }\n    refusals { code message field }\n    warnings { code message }\n  }\n": types.PlanFieldsFragmentDoc,
    "\n  fragment RollingRebootRow on RollingReboot {\n    id members current done stage stageSince stageSeconds state reason startedBy startedAt finishedAt\n  }\n": types.RollingRebootRowFragmentDoc,
    "\n  query RollingReboot($cluster: String) {\n    rollingReboot(cluster: $cluster) { ...RollingRebootRow }\n  }\n": types.RollingRebootDocument,
    "\n  mutation StartRollingReboot($input: StartRollingRebootInput!) {\n    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": types.StartRollingRebootDocument,
    "\n  mutation PauseRollingReboot($input: RollingRebootInput!) {\n    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": types.PauseRollingRebootDocument,
    "\n  mutation ResumeRollingReboot($input: RollingRebootInput!) {\n    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": types.ResumeRollingRebootDocument,
    "\n  mutation CancelRollingReboot($input: RollingRebootInput!) {\n    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n": types.CancelRollingRebootDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment AuditEventRow on AuditEvent {\n    id at actor action machine parameters outcome error requestId details\n  }\n"): (typeof documents)["\n  fragment AuditEventRow on AuditEvent {\n    id at actor action machine parameters outcome error requestId details\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query AuditEvents($first: Int, $after: String, $machine: String, $actor: String, $outcome: AuditOutcome) {\n    auditEvents(first: $first, after: $after, machine: $machine, actor: $actor, outcome: $outcome) {\n      edges { cursor node { ...AuditEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"): (typeof documents)["\n  query AuditEvents($first: Int, $after: String, $machine: String, $actor: String, $outcome: AuditOutcome) {\n    auditEvents(first: $first, after: $after, machine: $machine, actor: $actor, outcome: $outcome) {\n      edges { cursor node { ...AuditEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query AuditCheckpoint {\n    auditCheckpoint { treeSize rootHash at verifierKey }\n    auditTrail { verifies }\n  }\n"): (typeof documents)["\n  query AuditCheckpoint {\n    auditCheckpoint { treeSize rootHash at verifierKey }\n    auditTrail { verifies }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query AuditTrail {\n    auditTrail { verifies since problem checkedAt }\n  }\n"): (typeof documents)["\n  query AuditTrail {\n    auditTrail { verifies since problem checkedAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query AuditProof($id: ID!) {\n    auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash at } }\n  }\n"): (typeof documents)["\n  query AuditProof($id: ID!) {\n    auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash at } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome, $after: ID) {\n    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome, after: $after) { ...AuditEventRow }\n  }\n"): (typeof documents)["\n  subscription AuditEventRecorded($machine: String, $actor: String, $outcome: AuditOutcome, $after: ID) {\n    auditEventRecorded(machine: $machine, actor: $actor, outcome: $outcome, after: $after) { ...AuditEventRow }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment ClusterRow on Cluster {\n    name certificateFingerprint registeredAt registeredBy fromEnvironment addresses through\n    source { available message }\n    members { name status roles }\n    quorum { voters votersOnline majority standbys databaseLeader }\n    placementGuard { state message }\n    machineRecords removeRefusal\n    fencing { acting pausedCode pausedReason }\n  }\n"): (typeof documents)["\n  fragment ClusterRow on Cluster {\n    name certificateFingerprint registeredAt registeredBy fromEnvironment addresses through\n    source { available message }\n    members { name status roles }\n    quorum { voters votersOnline majority standbys databaseLeader }\n    placementGuard { state message }\n    machineRecords removeRefusal\n    fencing { acting pausedCode pausedReason }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Clusters {\n    clusters { ...ClusterRow }\n    incusClientCertificate\n  }\n"): (typeof documents)["\n  query Clusters {\n    clusters { ...ClusterRow }\n    incusClientCertificate\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query ClusterChoices {\n    clusters { name fromEnvironment }\n  }\n"): (typeof documents)["\n  query ClusterChoices {\n    clusters { name fromEnvironment }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RegisterCluster($input: RegisterClusterInput!) {\n    registerCluster(input: $input) { plan { ...PlanFields } cluster { name certificateFingerprint } }\n  }\n"): (typeof documents)["\n  mutation RegisterCluster($input: RegisterClusterInput!) {\n    registerCluster(input: $input) { plan { ...PlanFields } cluster { name certificateFingerprint } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RemoveCluster($input: RemoveClusterInput!) {\n    removeCluster(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n"): (typeof documents)["\n  mutation RemoveCluster($input: RemoveClusterInput!) {\n    removeCluster(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query MachineDrift($name: String!) {\n    drift(machine: $name) { machine check title since raisedAt evidence lastChecked }\n    machine(name: $name) { name driftCheckedAt driftQuiet }\n  }\n"): (typeof documents)["\n  query MachineDrift($name: String!) {\n    drift(machine: $name) { machine check title since raisedAt evidence lastChecked }\n    machine(name: $name) { name driftCheckedAt driftQuiet }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription DriftChanges($machine: String, $after: ID) {\n    driftChanges(machine: $machine, after: $after) { id machine check change at }\n  }\n"): (typeof documents)["\n  subscription DriftChanges($machine: String, $after: ID) {\n    driftChanges(machine: $machine, after: $after) { id machine check change at }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ApproveEnrolment($input: ApproveEnrolmentInput!) {\n    approveEnrolment(input: $input) { plan { ...PlanFields }\n      joinToken expiresAt command scriptUrl\n      memberConfig { entity name key value }\n      machine { ...FleetRow }\n    }\n  }\n"): (typeof documents)["\n  mutation ApproveEnrolment($input: ApproveEnrolmentInput!) {\n    approveEnrolment(input: $input) { plan { ...PlanFields }\n      joinToken expiresAt command scriptUrl\n      memberConfig { entity name key value }\n      machine { ...FleetRow }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RevokeJoinToken($input: RevokeJoinTokenInput!) {\n    revokeJoinToken(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"): (typeof documents)["\n  mutation RevokeJoinToken($input: RevokeJoinTokenInput!) {\n    revokeJoinToken(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Fencing {\n    cluster {\n      healingThreshold offlineThreshold members offlineMembers unmappedMembers\n      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }\n      warnings { code message }\n      placementGuard { state message }\n    }\n    fenceMappings {\n      member cluster maasSystemId hardwareUuid setBy setAt offlineSince\n      lastDrill { at ok powerState problem worker }\n      lastEvent { id at kind reason message }\n    }\n  }\n"): (typeof documents)["\n  query Fencing {\n    cluster {\n      healingThreshold offlineThreshold members offlineMembers unmappedMembers\n      fenceWorker { worker leaderSince lastRoundAt pollSeconds offlineAfterSeconds cooldownSeconds confirmTimeoutSeconds }\n      warnings { code message }\n      placementGuard { state message }\n    }\n    fenceMappings {\n      member cluster maasSystemId hardwareUuid setBy setAt offlineSince\n      lastDrill { at ok powerState problem worker }\n      lastEvent { id at kind reason message }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment FenceEventRow on FenceEvent {\n    id at member kind reason message worker\n  }\n"): (typeof documents)["\n  fragment FenceEventRow on FenceEvent {\n    id at member kind reason message worker\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query FenceEvents($member: String, $first: Int, $after: String) {\n    fenceEvents(member: $member, first: $first, after: $after) {\n      edges { cursor node { ...FenceEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"): (typeof documents)["\n  query FenceEvents($member: String, $first: Int, $after: String) {\n    fenceEvents(member: $member, first: $first, after: $after) {\n      edges { cursor node { ...FenceEventRow } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription FenceProgress($member: String, $after: ID) {\n    fenceProgress(member: $member, after: $after) { ...FenceEventRow }\n  }\n"): (typeof documents)["\n  subscription FenceProgress($member: String, $after: ID) {\n    fenceProgress(member: $member, after: $after) { ...FenceEventRow }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetFenceMapping($input: SetFenceMappingInput!) {\n    setFenceMapping(input: $input) { plan { ...PlanFields }\n      verifiedWithMaas notice\n      mapping { member cluster maasSystemId hardwareUuid }\n    }\n  }\n"): (typeof documents)["\n  mutation SetFenceMapping($input: SetFenceMappingInput!) {\n    setFenceMapping(input: $input) { plan { ...PlanFields }\n      verifiedWithMaas notice\n      mapping { member cluster maasSystemId hardwareUuid }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {\n    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member cluster } }\n  }\n"): (typeof documents)["\n  mutation RemoveFenceMapping($input: RemoveFenceMappingInput!) {\n    removeFenceMapping(input: $input) { plan { ...PlanFields } removed { member cluster } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment FleetRow on Machine {\n    name\n    phase\n    cluster { name }\n    warnings { code message }\n    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }\n    member { name status message held scheduler roles groups failureDomain architecture }\n    pendingJoinToken { expiresAt }\n    maas { ...MaasFacts }\n    maasSteps { step allowed reason }\n    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }\n  }\n"): (typeof documents)["\n  fragment FleetRow on Machine {\n    name\n    phase\n    cluster { name }\n    warnings { code message }\n    record { name provisioner { kind } maasSystemId hardwareUuid description registeredAt registeredBy }\n    member { name status message held scheduler roles groups failureDomain architecture }\n    pendingJoinToken { expiresAt }\n    maas { ...MaasFacts }\n    maasSteps { step allowed reason }\n    fence { member maasSystemId hardwareUuid lastDrill { at ok powerState problem } offlineSince }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Fleet {\n    fleet {\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n      machines { ...FleetRow }\n    }\n  }\n"): (typeof documents)["\n  query Fleet {\n    fleet {\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n      machines { ...FleetRow }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription FleetUpdates($after: Int) {\n    fleetUpdates(after: $after) {\n      revision\n      snapshot\n      added { ...FleetRow }\n      changed { ...FleetRow }\n      removed\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n    }\n  }\n"): (typeof documents)["\n  subscription FleetUpdates($after: Int) {\n    fleetUpdates(after: $after) {\n      revision\n      snapshot\n      added { ...FleetRow }\n      changed { ...FleetRow }\n      removed\n      sources {\n        incus { configured available message since }\n        maas { configured available message since }\n        clusters { cluster { name } status { configured available message since } }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment HardwareProfileRow on HardwareProfile {\n    name description architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps\n    setBy setAt machines\n  }\n"): (typeof documents)["\n  fragment HardwareProfileRow on HardwareProfile {\n    name description architecture minCpuCores minMemoryMiB minDisks minDiskSizeGB minNics minNicSpeedMbps\n    setBy setAt machines\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query HardwareProfiles {\n    hardwareProfiles { ...HardwareProfileRow }\n  }\n"): (typeof documents)["\n  query HardwareProfiles {\n    hardwareProfiles { ...HardwareProfileRow }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetHardwareProfile($input: SetHardwareProfileInput!) {\n    setHardwareProfile(input: $input) { plan { ...PlanFields } profile { ...HardwareProfileRow } previous { name } }\n  }\n"): (typeof documents)["\n  mutation SetHardwareProfile($input: SetHardwareProfileInput!) {\n    setHardwareProfile(input: $input) { plan { ...PlanFields } profile { ...HardwareProfileRow } previous { name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RemoveHardwareProfile($input: RemoveHardwareProfileInput!) {\n    removeHardwareProfile(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n"): (typeof documents)["\n  mutation RemoveHardwareProfile($input: RemoveHardwareProfileInput!) {\n    removeHardwareProfile(input: $input) { plan { ...PlanFields } removed { name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation AssignHardwareProfile($input: AssignHardwareProfileInput!) {\n    assignHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n"): (typeof documents)["\n  mutation AssignHardwareProfile($input: AssignHardwareProfileInput!) {\n    assignHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ClearHardwareProfile($input: ClearHardwareProfileInput!) {\n    clearHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n"): (typeof documents)["\n  mutation ClearHardwareProfile($input: ClearHardwareProfileInput!) {\n    clearHardwareProfile(input: $input) { plan { ...PlanFields } previousProfile machine { name hardwareProfile { name } } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Viewer {\n    viewer { name permissions grants { permission cluster } }\n  }\n"): (typeof documents)["\n  query Viewer {\n    viewer { name permissions grants { permission cluster } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment IdentityRow on Identity {\n    name permissions grants { permission cluster } createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal\n    sso { issuer subject groups }\n  }\n"): (typeof documents)["\n  fragment IdentityRow on Identity {\n    name permissions grants { permission cluster } createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal\n    sso { issuer subject groups }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Identities {\n    identities { ...IdentityRow }\n  }\n"): (typeof documents)["\n  query Identities {\n    identities { ...IdentityRow }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateIdentity($input: CreateIdentityInput!) {\n    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }\n  }\n"): (typeof documents)["\n  mutation CreateIdentity($input: CreateIdentityInput!) {\n    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RevokeIdentity($input: RevokeIdentityInput!) {\n    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }\n  }\n"): (typeof documents)["\n  mutation RevokeIdentity($input: RevokeIdentityInput!) {\n    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment MaasFacts on MaasMachine {\n    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid\n    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags\n    ipAddresses locked testingStatus testingStatusCode\n  }\n"): (typeof documents)["\n  fragment MaasFacts on MaasMachine {\n    systemId hostname fqdn status statusCode statusMessage powerState powerType hardwareUuid\n    architecture cpuCount memoryMiB storageMB osystem distroSeries owner zone pool tags\n    ipAddresses locked testingStatus testingStatusCode\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query MachineMaasHardware($name: String!) {\n    machine(name: $name) {\n      name\n      maas {\n        systemId status\n        storageDevices { name type path model serial sizeBytes }\n        networkInterfaces { name type macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }\n        scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds }\n      }\n    }\n  }\n"): (typeof documents)["\n  query MachineMaasHardware($name: String!) {\n    machine(name: $name) {\n      name\n      maas {\n        systemId status\n        storageDevices { name type path model serial sizeBytes }\n        networkInterfaces { name type macAddress linkConnected linkSpeedMbps interfaceSpeedMbps fabric vlan }\n        scriptResults { name kind status statusCode failed hardwareType started ended durationSeconds }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query MaasImages {\n    maasImages { name os release kind architectures }\n  }\n"): (typeof documents)["\n  query MaasImages {\n    maasImages { name os release kind architectures }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CommissionMachine($input: CommissionMachineInput!) {\n    commissionMachine(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n"): (typeof documents)["\n  mutation CommissionMachine($input: CommissionMachineInput!) {\n    commissionMachine(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation InstallOperatingSystem($input: InstallOperatingSystemInput!) {\n    installOperatingSystem(input: $input) { plan { ...PlanFields } machine { ...FleetRow } maas { ...MaasFacts } }\n  }\n"): (typeof documents)["\n  mutation InstallOperatingSystem($input: InstallOperatingSystemInput!) {\n    installOperatingSystem(input: $input) { plan { ...PlanFields } machine { ...FleetRow } maas { ...MaasFacts } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RunHardwareTests($input: RunHardwareTestsInput!) {\n    runHardwareTests(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n"): (typeof documents)["\n  mutation RunHardwareTests($input: RunHardwareTestsInput!) {\n    runHardwareTests(input: $input) { plan { ...PlanFields } maas { ...MaasFacts } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ReleaseMachine($input: ReleaseMachineInput!) {\n    releaseMachine(input: $input) { plan { ...PlanFields }\n      maas { ...MaasFacts }\n      erase { requested maasErasesOnRelease effective message }\n    }\n  }\n"): (typeof documents)["\n  mutation ReleaseMachine($input: ReleaseMachineInput!) {\n    releaseMachine(input: $input) { plan { ...PlanFields }\n      maas { ...MaasFacts }\n      erase { requested maasErasesOnRelease effective message }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Machine($name: String!) {\n    machine(name: $name) {\n      ...FleetRow\n      record { description }\n      hardwareProfile { ...HardwareProfileRow }\n      member { url description }\n      fence {\n        setBy setAt\n        lastDrill { worker }\n        lastEvent { id at kind reason message }\n      }\n    }\n  }\n"): (typeof documents)["\n  query Machine($name: String!) {\n    machine(name: $name) {\n      ...FleetRow\n      record { description }\n      hardwareProfile { ...HardwareProfileRow }\n      member { url description }\n      fence {\n        setBy setAt\n        lastDrill { worker }\n        lastEvent { id at kind reason message }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RegisterMachine($input: RegisterMachineInput!) {\n    registerMachine(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"): (typeof documents)["\n  mutation RegisterMachine($input: RegisterMachineInput!) {\n    registerMachine(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation UnregisterMachine($input: UnregisterMachineInput!) {\n    unregisterMachine(input: $input) { plan { ...PlanFields } name }\n  }\n"): (typeof documents)["\n  mutation UnregisterMachine($input: UnregisterMachineInput!) {\n    unregisterMachine(input: $input) { plan { ...PlanFields } name }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation EvacuateMember($input: EvacuateMemberInput!) {\n    evacuateMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status clusterEvacuate fate }\n      targets { member instances }\n      task { id incusOperation }\n    }\n  }\n"): (typeof documents)["\n  mutation EvacuateMember($input: EvacuateMemberInput!) {\n    evacuateMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status clusterEvacuate fate }\n      targets { member instances }\n      task { id incusOperation }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestoreMember($input: RestoreMemberInput!) {\n    restoreMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status fate }\n      report { runId verdict checks { name title result message } }\n      task { id incusOperation }\n    }\n  }\n"): (typeof documents)["\n  mutation RestoreMember($input: RestoreMemberInput!) {\n    restoreMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      instances { project name status fate }\n      report { runId verdict checks { name title result message } }\n      task { id incusOperation }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query MaintenanceTasks($name: String!) {\n    maintenanceTasks(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }\n  }\n"): (typeof documents)["\n  query MaintenanceTasks($name: String!) {\n    maintenanceTasks(name: $name) { id action mode incusOperation startedBy startedAt finishedAt outcome message }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription MaintenanceTask($name: String!, $after: ID) {\n    maintenanceTask(name: $name, after: $after) { id taskId action at kind message }\n  }\n"): (typeof documents)["\n  subscription MaintenanceTask($name: String!, $after: ID) {\n    maintenanceTask(name: $name, after: $after) { id taskId action at kind message }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription AdmissionChecks($name: String!) {\n    admissionChecks(name: $name) {\n      machine runId trigger at\n      checks { name title result message }\n      verdict\n    }\n  }\n"): (typeof documents)["\n  subscription AdmissionChecks($name: String!) {\n    admissionChecks(name: $name) {\n      machine runId trigger at\n      checks { name title result message }\n      verdict\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query AdmissionReport($name: String!) {\n    admissionReport(name: $name) {\n      machine runId trigger at verdict\n      checks { name title result message }\n    }\n  }\n"): (typeof documents)["\n  query AdmissionReport($name: String!) {\n    admissionReport(name: $name) {\n      machine runId trigger at verdict\n      checks { name title result message }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation AdmitMember($input: AdmitMemberInput!) {\n    admitMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      report { runId verdict checks { name title result message } }\n    }\n  }\n"): (typeof documents)["\n  mutation AdmitMember($input: AdmitMemberInput!) {\n    admitMember(input: $input) { plan { ...PlanFields }\n      machine { ...FleetRow }\n      report { runId verdict checks { name title result message } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RemoveMember($input: RemoveMemberInput!) {\n    removeMember(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"): (typeof documents)["\n  mutation RemoveMember($input: RemoveMemberInput!) {\n    removeMember(input: $input) { plan { ...PlanFields } machine { ...FleetRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {\n    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }\n  }\n"): (typeof documents)["\n  mutation SetPlacementGuard($input: SetPlacementGuardInput!) {\n    setPlacementGuard(input: $input) { plan { ...PlanFields } placementGuard { state message } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment PlanFields on Plan {\n    refused\n    planHash\n    facts { name value }\n    calls { system request target changes { field before after } }\n    refusals { code message field }\n    warnings { code message }\n  }\n"): (typeof documents)["\n  fragment PlanFields on Plan {\n    refused\n    planHash\n    facts { name value }\n    calls { system request target changes { field before after } }\n    refusals { code message field }\n    warnings { code message }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment RollingRebootRow on RollingReboot {\n    id members current done stage stageSince stageSeconds state reason startedBy startedAt finishedAt\n  }\n"): (typeof documents)["\n  fragment RollingRebootRow on RollingReboot {\n    id members current done stage stageSince stageSeconds state reason startedBy startedAt finishedAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RollingReboot($cluster: String) {\n    rollingReboot(cluster: $cluster) { ...RollingRebootRow }\n  }\n"): (typeof documents)["\n  query RollingReboot($cluster: String) {\n    rollingReboot(cluster: $cluster) { ...RollingRebootRow }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation StartRollingReboot($input: StartRollingRebootInput!) {\n    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"): (typeof documents)["\n  mutation StartRollingReboot($input: StartRollingRebootInput!) {\n    startRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation PauseRollingReboot($input: RollingRebootInput!) {\n    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"): (typeof documents)["\n  mutation PauseRollingReboot($input: RollingRebootInput!) {\n    pauseRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ResumeRollingReboot($input: RollingRebootInput!) {\n    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"): (typeof documents)["\n  mutation ResumeRollingReboot($input: RollingRebootInput!) {\n    resumeRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CancelRollingReboot($input: RollingRebootInput!) {\n    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"): (typeof documents)["\n  mutation CancelRollingReboot($input: RollingRebootInput!) {\n    cancelRollingReboot(input: $input) { plan { ...PlanFields } rollingReboot { ...RollingRebootRow } }\n  }\n"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;