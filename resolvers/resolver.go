// Package resolvers holds the thin GraphQL resolvers: parse the arguments, call a domain
// package, map the result. Authorisation of every mutation and its audit event happen
// around them (see package server); domain rules live in the domain packages.
package resolvers

import (
	"context"
	"log/slog"
	"slices"

	"github.com/99designs/gqlgen/graphql"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// AuditTrail reads the audit trail.
type AuditTrail interface {
	AuditEvents(ctx context.Context, f audit.Filter) ([]audit.Event, error)
	audit.Trail
}

// MemberVersions asks a member for its versions.
type MemberVersions interface {
	Version(ctx context.Context, member string) (membership.Version, error)
}

// Resolver carries the domain services the resolvers call.
type Resolver struct {
	Machines *machines.Service
	// View joins records, Incus members and MAAS machines into the fleet.
	View         *fleet.Service
	Enrolment    *enrolment.Service
	Provisioning *provisioning.Service
	Admission    *admission.Service
	Versions     MemberVersions
	Audit        AuditTrail
	// AuditFeed and AdmissionFeed are where audit events and admission check events are
	// published (by machine) as they happen, on every replica.
	AuditFeed     *broadcast.Hub[string, audit.Event]
	AdmissionFeed *broadcast.Hub[string, *admission.Event]
	// AuditLog: the trail's signed checkpoints and proofs.
	AuditLog *auditlog.Service
	// Fencing: fence mappings, events, progress and the cluster view.
	Fencing *fencing.Service
	// Identity lists, creates and revokes identities.
	Identity *identity.Service
	// Hardware declares, removes and assigns hardware profiles.
	Hardware *hardware.Service
	// Placement turns the placement guard on and off and reads its state.
	Placement *placement.Service
	// DriftView lists drift and streams its raises and clears.
	DriftView *drift.Service
	// Maintenance evacuates and restores members and streams their progress.
	Maintenance *maintenance.Service
	// Rolling starts, pauses, resumes and cancels rolling reboots (apelora-worker drives them).
	Rolling *rolling.Service
	// FleetWatch feeds fleetUpdates: one fleet read per change for every subscriber.
	FleetWatch *fleet.Watcher
	// Clusters registers, removes and lists the Incus clusters (with their registry);
	// ClusterSide reads each one's Incus side.
	Clusters    *clusters.Service
	ClusterSide ClusterSide
	Log         *slog.Logger
}

// machine reads one machine back after a change, which must find it.
func (r *Resolver) machine(ctx context.Context, name string) (*model.Machine, error) {
	m, err := r.View.Machine(ctx, name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if plan.Active(ctx) {
			return nil, nil // a dry run's change was rolled back: the machine may not exist
		}
		return nil, apperr.New(apperr.Internal, "machine %q cannot be read back after the change", name)
	}
	return mapMachine(m), nil
}

// maasPayload maps a MAAS machine after a step, with the Apelora machine registered from
// it (read alone: no MAAS list).
func (r *Resolver) maasPayload(ctx context.Context, m *provisioning.MAASMachine) (*model.MaasMachinePayload, error) {
	out := &model.MaasMachinePayload{Maas: mapMAAS(m)}
	if !slices.Contains(graphql.CollectAllFields(ctx), "machine") {
		// The machine's view costs a MAAS read and Incus's members: only when asked (a
		// bulk step's calls ask for the MAAS side alone).
		return out, nil
	}
	machine, err := r.View.RegisteredFrom(ctx, m.SystemID)
	if err != nil {
		return nil, err
	}
	if machine != nil {
		out.Machine = mapMachine(machine)
	}
	return out, nil
}

// auditFilter is the audit trail's filter from the arguments of auditEvents and
// auditEventRecorded.
func auditFilter(machine, actor *string, outcome *model.AuditOutcome) audit.Filter {
	f := audit.Filter{Machine: audit.StoredMachine(deref(machine)), Actor: deref(actor)}
	if outcome != nil {
		f.Outcome = audit.Outcome(*outcome)
	}
	return f
}
