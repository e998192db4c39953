package resolvers

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/apperr"
)

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var permissionNames = map[identity.Permission]model.Permission{
	identity.ViewInfrastructure:   model.PermissionViewInfrastructure,
	identity.ManageInfrastructure: model.PermissionManageInfrastructure,
	identity.HardwareDelete:       model.PermissionHardwareDelete,
}

func mapIdentity(id *identity.Identity) *model.Identity {
	out := &model.Identity{
		Name: id.Name, CreatedAt: id.CreatedAt, Permissions: []model.Permission{},
		LastUsedAt: id.LastUsedAt, ExpiresAt: id.ExpiresAt, RevokedAt: id.RevokedAt, RevokedBy: optional(id.RevokedBy),
		Active: id.Active(time.Now()),
	}
	// What it holds now: an SSO identity whose groups the provider has not confirmed within
	// the re-check interval holds view-infrastructure alone (identity.Identity.Granted).
	for _, p := range id.Granted(time.Now()) {
		if mp, ok := permissionNames[p]; ok {
			out.Permissions = append(out.Permissions, mp)
		}
	}
	out.Grants = []*model.ClusterGrant{}
	for _, g := range id.Scoped(time.Now()) {
		if mp, ok := permissionNames[g.Permission]; ok {
			out.Grants = append(out.Grants, &model.ClusterGrant{Permission: mp, Cluster: g.ClusterName})
		}
	}
	if id.SSO != nil {
		out.Sso = &model.SSOAccount{Issuer: id.SSO.Issuer, Subject: id.SSO.Subject, Groups: append([]string{}, id.SSO.Groups...)}
	}
	return out
}

// identityModel maps an identity with the refusal revoking it would meet.
func (r *Resolver) identityModel(ctx context.Context, id *identity.Identity) (*model.Identity, error) {
	out := mapIdentity(id)
	refusal, err := r.Identity.RevokeRefusal(ctx, id)
	if err != nil {
		return nil, err
	}
	out.RevokeRefusal = optional(refusal)
	return out, nil
}

// permissionsOf maps the API's permissions to the domain's.
func permissionsOf(ps []model.Permission) []identity.Permission {
	out := make([]identity.Permission, 0, len(ps))
	for _, mp := range ps {
		for p, name := range permissionNames {
			if name == mp {
				out = append(out, p)
			}
		}
	}
	return out
}

func mapRecord(r *machines.Record) *model.MachineRecord {
	if r == nil {
		return nil
	}
	caps := r.Provisioner.Capabilities()
	return &model.MachineRecord{
		Name: r.Name,
		Provisioner: &model.Provisioner{
			Kind:         model.ProvisionerKind(r.Provisioner),
			Capabilities: &model.ProvisionerCapabilities{Discovers: caps.Discovers, Installs: caps.Installs, Powers: caps.Powers},
		},
		Description:     r.Description,
		MaasSystemID:    optional(r.MAASSystemID),
		HardwareUUID:    optional(r.HardwareUUID),
		RegisteredAt:    r.RegisteredAt,
		RegisteredBy:    r.RegisteredBy,
		HardwareProfile: optional(r.HardwareProfile),
	}
}

func mapMachine(m *fleet.Machine) *model.Machine { return mapMachineIn(m, nil) }

// clusterModels maps each cluster of an answer once: its rows share the model.
type clusterModels map[*fleet.ClusterRef]*model.Cluster

func (cm clusterModels) of(c *fleet.ClusterRef) *model.Cluster {
	if c == nil {
		return nil
	}
	if out, ok := cm[c]; ok {
		return out
	}
	rec := c.Record
	if rec == nil {
		rec = &clusters.Cluster{ID: c.ID, Name: c.Name}
	}
	out := mapCluster(rec)
	if cm != nil {
		cm[c] = out
	}
	return out
}

// mapMachineIn maps a row, its cluster through cm (nil: a model of its own).
func mapMachineIn(m *fleet.Machine, cm clusterModels) *model.Machine {
	out := &model.Machine{Name: m.Name, Cluster: cm.of(m.Cluster), Phase: model.Phase(m.Phase), Record: mapRecord(m.Record), Warnings: []*model.Warning{}, Member: mapMember(m.Member), Maas: mapMAAS(m.MAAS), Fence: mapFenceStatus(m.Fence), HardwareProfile: mapProfile(m.Profile)}
	if out.Member != nil && m.Cluster != nil {
		out.Member.ClusterID = m.Cluster.ID // its version is asked of its own cluster
	}
	for _, w := range m.Warnings {
		mw := &model.Warning{Code: model.WarningCode(w.Code), Message: w.Message}
		if w.Code == lifecycle.Drift {
			for i := range m.Drift {
				if m.Drift[i].Check == w.Check {
					mw.Drift = mapDrift(&m.Drift[i])
				}
			}
		}
		out.Warnings = append(out.Warnings, mw)
	}
	if !m.DriftChecked.IsZero() {
		t := m.DriftChecked
		out.DriftCheckedAt = &t
	}
	if m.DriftQuiet != "" {
		q := m.DriftQuiet
		out.DriftQuiet = &q
	}
	if m.Pending != nil {
		out.PendingJoinToken = &model.PendingJoinToken{ExpiresAt: m.Pending.ExpiresAt}
	}
	out.MaasSteps = []*model.MaasStepAvailability{}
	if m.MAAS != nil {
		member := ""
		if m.Member != nil {
			member = m.Member.Name
		}
		// One array for the row's steps and the reasons pointing into Steps' own answer:
		// two allocations a row instead of seven to eleven (bench/README.md, "The fleet query").
		steps := provisioning.Steps(*m.MAAS, m.Record, member)
		avail := make([]model.MaasStepAvailability, len(steps))
		out.MaasSteps = make([]*model.MaasStepAvailability, len(steps))
		for i := range steps {
			a := &steps[i]
			avail[i] = model.MaasStepAvailability{Step: model.MaasStep(a.Step), Allowed: a.Reason == ""}
			if a.Reason != "" {
				avail[i].Reason = &a.Reason
			}
			out.MaasSteps[i] = &avail[i]
		}
	}
	return out
}

var memberStatuses = map[membership.Status]model.MemberStatus{
	membership.StatusOnline: model.MemberStatusOnline, membership.StatusOffline: model.MemberStatusOffline,
	membership.StatusEvacuated: model.MemberStatusEvacuated, membership.StatusBlocked: model.MemberStatusBlocked,
}

func mapMember(m *membership.Member) *model.Member {
	if m == nil {
		return nil
	}
	status, ok := memberStatuses[m.Status]
	if !ok {
		status = model.MemberStatusUnknown
	}
	return &model.Member{
		Name: m.Name, Status: status, Message: m.Message, URL: m.URL,
		Roles: nonNil(m.Roles), Groups: nonNil(m.Groups), FailureDomain: m.FailureDomain,
		Description: m.Description, Architecture: m.Architecture, Held: m.Held(),
		Scheduler: optional(m.Scheduler()),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func mapCheck(c admission.Check) *model.AdmissionCheck {
	return &model.AdmissionCheck{Name: c.Name, Title: c.Title, Result: model.CheckResult(c.Result), Message: c.Message}
}

func mapReport(r *admission.Report) *model.AdmissionReport {
	out := &model.AdmissionReport{
		Machine: r.Machine, RunID: r.RunID, Trigger: model.AdmissionTrigger(r.Trigger), At: r.At,
		Verdict: model.AdmissionVerdict(r.Verdict), Checks: make([]*model.AdmissionCheck, len(r.Checks)),
	}
	for i, c := range r.Checks {
		out.Checks[i] = mapCheck(c)
	}
	return out
}

func mapAdmissionEvent(e *admission.Event) *model.AdmissionCheckEvent {
	out := &model.AdmissionCheckEvent{Machine: e.Machine, RunID: e.RunID, Trigger: model.AdmissionTrigger(e.Trigger), At: e.At,
		Checks: make([]*model.AdmissionCheck, len(e.Checks))}
	for i, c := range e.Checks {
		out.Checks[i] = mapCheck(c)
	}
	if e.Verdict != "" {
		v := model.AdmissionVerdict(e.Verdict)
		out.Verdict = &v
	}
	return out
}

func mapAuditEvent(e *audit.Event) *model.AuditEvent {
	return &model.AuditEvent{
		ID: strconv.FormatInt(e.ID, 10), At: e.At, Actor: e.Actor, Action: e.Action,
		Machine: optional(e.Machine), Parameters: e.Parameters, Outcome: model.AuditOutcome(e.Outcome),
		Error: optional(e.Error), RequestID: e.RequestID, Details: e.Details,
	}
}

const auditCursorPrefix = "audit:"

func auditCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(auditCursorPrefix + strconv.FormatInt(id, 10)))
}

func parseAuditCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), auditCursorPrefix); ok {
			if id, err := strconv.ParseInt(rest, 10, 64); err == nil && id > 0 {
				return id, nil
			}
		}
	}
	return 0, apperr.Invalid("after", "cursor %s is not one this server gave out: pass a pageInfo.endCursor from an earlier page", apperr.Quote(c))
}

func mapMAAS(m *provisioning.MAASMachine) *model.MaasMachine {
	if m == nil {
		return nil
	}
	return &model.MaasMachine{
		SystemID: m.SystemID, Hostname: m.Hostname, Fqdn: m.FQDN,
		Status: m.StatusName, StatusCode: int(m.Status), StatusMessage: optional(m.StatusMessage),
		PowerState: m.PowerState, PowerType: m.PowerType, HardwareUUID: optional(m.HardwareUUID),
		Architecture: optional(m.Architecture), CPUCount: m.CPUCount, MemoryMiB: m.MemoryMiB, StorageMb: m.StorageMB,
		Osystem: m.OSystem, DistroSeries: m.DistroSeries, Owner: optional(m.Owner), Zone: m.Zone, Pool: m.Pool,
		Tags: nonNil(m.Tags), IPAddresses: nonNil(m.IPAddresses), Locked: m.Locked,
		TestingStatus: m.TestingStatusName, TestingStatusCode: m.TestingStatus,
	}
}

func mapSource(s fleet.Source) *model.SourceStatus {
	out := &model.SourceStatus{Configured: s.Configured, Available: s.Available, Message: s.Message}
	if !s.Since.IsZero() {
		since := s.Since.UTC()
		out.Since = &since
	}
	return out
}

// mapFleet maps the view's rows (those of cluster only, when not nil) that scope reads:
// a read-scoped caller gets its clusters' rows and sources only (identity.ReadScope).
func mapFleet(v *fleet.View, cluster *clusters.Cluster, scope identity.ReadScope) *model.Fleet {
	cm := clusterModels{}
	cs := v.Clusters
	if !scope.All() {
		cs = make([]fleet.ClusterSource, 0, len(v.Clusters))
		for _, c := range v.Clusters {
			if c.Cluster != nil && scope.Reads(c.Cluster.ID) {
				cs = append(cs, c)
			}
		}
	}
	out := &model.Fleet{
		Machines: make([]*model.Machine, 0, len(v.Machines)),
		Sources:  mapSources(scopedIncus(v.Incus, cs, scope), v.MAAS, cs, cm),
	}
	for i := range v.Machines {
		m := &v.Machines[i]
		if cluster != nil && (m.Cluster == nil || m.Cluster.ID != cluster.ID) {
			continue
		}
		if !readsRow(scope, m) {
			continue
		}
		out.Machines = append(out.Machines, mapMachineIn(m, cm))
	}
	return out
}

func mapSources(incus, maas fleet.Source, cs []fleet.ClusterSource, cm clusterModels) *model.FleetSources {
	out := &model.FleetSources{Incus: mapSource(incus), Maas: mapSource(maas), Clusters: make([]*model.ClusterSource, len(cs))}
	for i := range cs {
		out.Clusters[i] = &model.ClusterSource{Cluster: cm.of(cs[i].Cluster), Status: mapSource(cs[i].Source)}
	}
	return out
}

func mapErasePreview(p provisioning.ErasePreview) *model.ErasePreview {
	return &model.ErasePreview{Requested: p.Requested, MaasErasesOnRelease: p.MAASErases, Effective: p.Effective(), Message: p.Message}
}

func mapDrift(d *drift.State) *model.Drift {
	return &model.Drift{Machine: d.Machine, Check: d.Check, Title: d.Title, Since: d.FailingSince, RaisedAt: d.RaisedAt,
		Evidence: d.Evidence, LastChecked: d.LastChecked}
}

func mapDriftEvent(e *drift.Event) *model.DriftEvent {
	return &model.DriftEvent{ID: strconv.FormatInt(e.ID, 10), Machine: e.Machine, Check: e.Check, Title: e.Title,
		Change: model.DriftChange(e.Change), At: e.At, Since: e.Since, Evidence: e.Evidence}
}

func mapDriftWatcher(w *drift.Watcher) *model.DriftWatcher {
	return &model.DriftWatcher{Replica: w.Replica, LeaderSince: w.LeaderSince, LastRoundAt: w.LastRoundAt,
		IntervalSeconds: w.Interval.Seconds(), OfflineAfterSeconds: w.OfflineAfter.Seconds(), Machines: w.Machines,
		Problem: optional(w.Problem)}
}

// mapMAASInterface: MAAS's 0 speeds are unknowns, shown as null rather than as 0 Mbit/s.
func mapMAASInterface(n provisioning.NetworkInterface) *model.MaasNetworkInterface {
	out := &model.MaasNetworkInterface{Name: n.Name, Type: n.Type, MacAddress: n.MACAddress, LinkConnected: n.LinkConnected,
		Fabric: optional(n.Fabric), Vlan: optional(n.VLAN)}
	if n.LinkSpeedMbps > 0 {
		out.LinkSpeedMbps = &n.LinkSpeedMbps
	}
	if n.InterfaceSpeedMbps > 0 {
		out.InterfaceSpeedMbps = &n.InterfaceSpeedMbps
	}
	return out
}

func mapScriptResult(r provisioning.ScriptResult) *model.MaasScriptResult {
	out := &model.MaasScriptResult{Name: r.Name, Kind: model.MaasScriptKind(r.Kind), Status: r.StatusName, StatusCode: r.Status,
		Failed: r.Failed(), HardwareType: optional(r.HardwareType)}
	if !r.Started.IsZero() {
		t := r.Started.UTC()
		out.Started = &t
	}
	if !r.Ended.IsZero() {
		t := r.Ended.UTC()
		out.Ended = &t
	}
	if d, ok := r.Duration(); ok {
		secs := int(d.Round(time.Second) / time.Second)
		out.DurationSeconds = &secs
	}
	return out
}

// grantsOf maps the API's grants in one cluster to the domain's. A grant's cluster is
// never empty here (an empty one would read as unscoped): it is kept as a name no cluster
// can have, which the rules refuse (INVALID_INPUT on field grants).
func grantsOf(gs []*model.ClusterGrantInput) []identity.GrantText {
	out := make([]identity.GrantText, 0, len(gs))
	for _, g := range gs {
		cluster := g.Cluster
		if cluster == "" {
			cluster = "(none)"
		}
		for p, name := range permissionNames {
			if name == g.Permission {
				out = append(out, identity.GrantText{Permission: p, Cluster: cluster})
			}
		}
	}
	return out
}

// readsRow reports whether scope reads the fleet row m: a read-scoped caller reads the
// rows of its clusters; a row of no cluster (a MAAS machine with neither record nor
// member) only a caller who reads every cluster.
func readsRow(scope identity.ReadScope, m *fleet.Machine) bool {
	return scope.All() || m.Cluster != nil && scope.Reads(m.Cluster.ID)
}

// scopedIncus is the Incus source as a read-scoped caller sees it: said of its clusters
// only (the whole source's message names every cluster that did not answer).
func scopedIncus(incus fleet.Source, cs []fleet.ClusterSource, scope identity.ReadScope) fleet.Source {
	if scope.All() || !incus.Configured {
		return incus
	}
	var failed []string
	for _, c := range cs {
		if !c.Source.Available {
			failed = append(failed, c.Source.Message)
		}
	}
	out := fleet.Source{Configured: true, Available: len(failed) == 0, Message: "ok"}
	if len(failed) > 0 {
		out.Message, out.Since = strings.Join(failed, "; "), incus.Since
	}
	return out
}

// mayReadMachine refuses a read about one machine to a read-scoped caller when the
// machine is not in its clusters (the fleet's rule, readsRow), or is no machine: the same
// refusal for both, so the answer does not tell another cluster's machine from none.
// Callers who read every cluster pay nothing.
func (r *Resolver) mayReadMachine(ctx context.Context, field, name string) error {
	scope := identity.ReadScopeOf(ctx)
	if scope.All() {
		return nil
	}
	m, err := r.View.Machine(ctx, name)
	if err != nil {
		return err
	}
	if m == nil || !readsRow(scope, m) {
		return apperr.New(apperr.Forbidden, "%s: no machine named %s in the clusters you read (fleet lists them)", field, apperr.Quote(name))
	}
	return nil
}
