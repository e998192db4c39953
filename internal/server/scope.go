package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/mutations"
)

// Scopes is what the gate reads to find the clusters a call acts in, for an identity that
// holds manage-infrastructure in some clusters only (identity_grants): the registered
// clusters (in memory) and the records the call names (one query).
type Scopes interface {
	All() []clusters.Cluster
	clusters.ScopeReader
}

// whereCalls returns where a call acts, for a permission's check: the cluster of the
// machine record `about` names, the cluster the input names (a call that moves a record
// to another cluster acts in both), the cluster of the record of a MAAS system id, of a
// rolling reboot; or, when it names none of these or a record enrolled in no cluster,
// every cluster (Where.Cluster 0: only an unscoped grant allows it). A cluster name that
// is not registered is clusters.Resolve's NOT_FOUND.
func whereCalls(ctx context.Context, s Scopes, name string, decl mutations.Mutation, args map[string]any) ([]identity.Where, error) {
	everywhere := func(why string) []identity.Where { return []identity.Where{{Why: why}} }
	if s == nil {
		return everywhere(name + " acts on every cluster"), nil
	}
	sc := decl.ScopeIn(args)
	all := s.All()
	clusterName := func(id int64) string {
		for _, c := range all {
			if c.ID == id {
				return c.Name
			}
		}
		return fmt.Sprint(id)
	}
	var out []identity.Where
	add := func(w identity.Where) {
		for _, have := range out {
			if have.Cluster == w.Cluster {
				return
			}
		}
		out = append(out, w)
	}
	var unscoped []string
	machineIn := 0 // 1 when out[0] is the cluster of the record `about` names
	if lookable(sc.Machine) || lookable(sc.SystemID) || lookable(sc.RollingReboot) {
		f, err := s.ScopeFacts(ctx, orEmpty(sc.Machine), orEmpty(sc.SystemID), orEmpty(sc.RollingReboot))
		if err != nil {
			return nil, err
		}
		record := func(r clusters.RecordScope, what string) {
			switch {
			case !r.Found:
			case r.Cluster == nil:
				unscoped = append(unscoped, what+"'s machine record is enrolled in no cluster")
			default:
				add(identity.Where{Cluster: *r.Cluster, Name: clusterName(*r.Cluster), Why: what + " is in " + clusterName(*r.Cluster)})
			}
		}
		record(f.Machine, sc.Machine)
		machineIn = len(out)
		record(f.SystemID, "MAAS machine "+sc.SystemID)
		if f.RollingReboot != nil {
			add(identity.Where{Cluster: *f.RollingReboot, Name: clusterName(*f.RollingReboot), Why: "rolling reboot " + sc.RollingReboot + " is in " + clusterName(*f.RollingReboot)})
		}
	}
	if sc.Cluster != "" {
		c, err := clusters.Resolve(all, sc.Machine, nil, sc.Cluster)
		if err != nil {
			return nil, err
		}
		why := "the call names cluster " + c.Name
		if machineIn == 1 && out[0].Cluster != c.ID {
			// Only the machine's own record moves; a cluster found otherwise (the record of
			// the MAAS system id a fence mapping names) keeps saying why it is there.
			why = sc.Machine + " would move from " + out[0].Name + " to " + c.Name
			out[0].Why = why
		}
		add(identity.Where{Cluster: c.ID, Name: c.Name, Why: why})
	}
	if len(unscoped) > 0 {
		return append(everywhere(strings.Join(unscoped, "; ")), out...), nil
	}
	if len(out) == 0 {
		what := name + " is about no cluster"
		if sc.Machine != "" {
			what = sc.Machine + " has no machine record in a cluster"
		}
		return everywhere(what), nil
	}
	return out, nil
}

// lookable reports whether s may name a record: text PostgreSQL takes (no NUL, valid
// UTF-8), of a bounded length. Anything else names none (the call's own checks refuse it).
func lookable(s string) bool {
	return s != "" && len(s) <= 256 && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func orEmpty(s string) string {
	if lookable(s) {
		return s
	}
	return ""
}

// authoriseScoped checks manage-infrastructure where the call acts, for an identity that
// holds it in some clusters only; the audit event's details.clusters name the clusters
// it was checked in ("*" for every cluster).
func authoriseScoped(ctx context.Context, s Scopes, id *identity.Identity, action *audit.Action, decl mutations.Mutation, args map[string]any) error {
	wheres, err := whereCalls(ctx, s, action.Name, decl, args)
	if err != nil {
		return err
	}
	names := make([]string, len(wheres))
	for i, w := range wheres {
		names[i] = w.Name
		if w.Cluster == 0 {
			names[i] = "*"
		}
	}
	action.Detail("clusters", names)
	for _, w := range wheres {
		if err := id.RequireIn(identity.ManageInfrastructure, w); err != nil {
			return err
		}
	}
	if a := clusters.AuthorisedFrom(ctx); a != nil {
		// Allowed in these clusters only: the change checks the machine is still in one.
		a.Machine = decl.MachineIn(args)
		for _, w := range wheres {
			a.Clusters = append(a.Clusters, w.Cluster)
		}
	}
	return nil
}
