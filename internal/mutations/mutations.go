// Package mutations is every mutation's declaration, generated from the @change directive
// beside each Mutation field in schema/ (schema/change.graphqls): the machine it is about
// (the argument path that names it, or none) and the lock it holds. Everything that must
// know this about a mutation reads it here: the gate (the audit event's machine, whether
// the call is a dry run), the store (the lock a change takes), apeloractl (which commands
// take -dry-run), the e2e walks; the console reads the same table as
// web/console/src/api/changes.gen.ts.
//
// `go generate ./...` rewrites changes_gen.go with internal/mutations/gen, which refuses a
// Mutation field without its declaration, an `about` naming no String argument, and a
// change whose input lacks dryRun or whose payload lacks plan.
package mutations

import (
	"slices"
	"strings"
)

// Lock is the lock a change holds while it runs: a lease on what it changes (a machine,
// or one of the named things below), taken before its confirmation is checked and held
// until its outcome is written.
type Lock string

const (
	// LockMachine is the machine's lease: a second change to it is BUSY.
	LockMachine Lock = "MACHINE"
	// LockIdentities is the identities' lease (postgres.Store.ChangeIdentities).
	LockIdentities Lock = "IDENTITIES"
	// LockHardwareProfiles is the hardware profiles' lease (declare, remove).
	LockHardwareProfiles Lock = "HARDWARE_PROFILES"
	// LockPlacementGuard is the placement guard's lease.
	LockPlacementGuard Lock = "PLACEMENT_GUARD"
	// LockRollingReboots is the rolling reboots' lease (start, pause, resume, cancel).
	LockRollingReboots Lock = "ROLLING_REBOOTS"
	// LockClusters is the clusters' lease (register, remove, and the adoption at start).
	LockClusters Lock = "CLUSTERS"
)

// Key is the lease a change holding l takes: the machine's for LockMachine, the named
// lock's otherwise.
func (l Lock) Key(machine string) string {
	if l == LockMachine {
		return "machine " + machine
	}
	return strings.ToLower(strings.ReplaceAll(string(l), "_", " "))
}

// DryRun is the argument path where every change takes its dry run.
const DryRun = "input.dryRun"

// PlanHash is the argument path where a change takes the hash of the plan it confirms.
const PlanHash = "input.planHash"

// Mutation is one Mutation field's declaration.
type Mutation struct {
	// Name is the Mutation field, also the action of its audit events.
	Name string
	// About is the argument path naming the machine the call is about ("input.name"), or
	// "" when it is about no machine by name.
	About string
	// Cluster is the argument path naming the cluster the call acts in ("input.cluster");
	// SystemID one naming a MAAS machine by system id, and RollingReboot one naming a
	// rolling reboot, whose clusters it acts in. "" for none. The gate checks permissions
	// held in some clusters only against them (ClustersIn).
	Cluster, SystemID, RollingReboot string
	// Lock is the lock its change holds.
	Lock Lock
	// Input and Payload are the types of its input argument and of its answer (which has
	// the plan).
	Input, Payload string
}

// All returns every declared mutation, by name.
func All() []Mutation { return slices.Clone(declared) }

// Of returns the declaration of the Mutation field name.
func Of(name string) (Mutation, bool) {
	i, ok := slices.BinarySearchFunc(declared, name, func(m Mutation, n string) int { return strings.Compare(m.Name, n) })
	if !ok {
		return Mutation{}, false
	}
	return declared[i], true
}

// MachineIn returns the machine a call with these arguments is about, or "".
func (m Mutation) MachineIn(args map[string]any) string {
	if m.About == "" {
		return ""
	}
	s, _ := At(args, m.About).(string)
	return s
}

// DryRunIn reports whether a call with these arguments asks for a dry run.
func (m Mutation) DryRunIn(args map[string]any) bool {
	dry, _ := At(args, DryRun).(bool)
	return dry
}

// PlanHashIn returns the plan hash a call confirms ("" for none: no plan was shown).
func (m Mutation) PlanHashIn(args map[string]any) string {
	h, _ := At(args, PlanHash).(string)
	return h
}

// At returns the value at a dotted argument path, or nil.
func At(args map[string]any, path string) any {
	var v any = args
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// Scope is what a call with these arguments names that lies in a cluster: the machine
// (About), the cluster itself, a MAAS system id, a rolling reboot; "" for each it does not
// name.
type Scope struct {
	Machine, Cluster, SystemID, RollingReboot string
}

// ScopeIn returns what a call with these arguments names that lies in a cluster.
func (m Mutation) ScopeIn(args map[string]any) Scope {
	str := func(path string) string {
		if path == "" {
			return ""
		}
		s, _ := At(args, path).(string)
		return s
	}
	return Scope{Machine: m.MachineIn(args), Cluster: str(m.Cluster), SystemID: str(m.SystemID), RollingReboot: str(m.RollingReboot)}
}
