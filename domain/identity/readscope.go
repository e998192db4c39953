package identity

import (
	"context"
	"slices"
)

// ReadScope is what an identity may read (issue 27 item 4): every cluster, or the rows of
// some clusters only, or nothing. It is the one rule of read scoping; resolvers filter
// by it and the API's gate refuses to a read-scoped identity every read that is not
// filtered (internal/server: readScopedFields).
//
// The rule, from the identity's own grants (not from what an unconfirmed SSO identity may
// change, so an SSO identity keeps its reads while its groups await the re-check):
//   - view-infrastructure or manage-infrastructure unscoped: every cluster;
//   - view-infrastructure granted in some clusters: those clusters, and those where it
//     holds manage-infrastructure (managing a cluster means reading it);
//   - otherwise manage-infrastructure in some clusters: every cluster ("reads stay
//     fleet-wide unless an identity is scoped for reading too");
//   - otherwise nothing.
//
// A read-scoped identity reads a machine when the machine's cluster (its record's, a
// record naming none counting for the cluster of APELORA_INCUS_*, else its member's) is
// one of its clusters; a MAAS machine with neither record nor member is in no cluster
// and is hidden from it.
type ReadScope struct {
	all      bool
	clusters []int64 // sorted, when !all
}

// EveryCluster is the scope of an identity that reads the whole fleet.
var EveryCluster = ReadScope{all: true}

// InClusters is the scope of an identity that reads those clusters only.
func InClusters(ids ...int64) ReadScope {
	c := slices.Clone(ids)
	slices.Sort(c)
	return ReadScope{clusters: slices.Compact(c)}
}

// All reports whether the scope is every cluster (and what is about none).
func (s ReadScope) All() bool { return s.all }

// Any reports whether the identity may read anything.
func (s ReadScope) Any() bool { return s.all || len(s.clusters) > 0 }

// Scoped reports whether the identity reads some clusters only (neither all nor nothing).
func (s ReadScope) Scoped() bool { return !s.all && len(s.clusters) > 0 }

// Clusters are the clusters of a scoped read (nil when All).
func (s ReadScope) Clusters() []int64 { return slices.Clone(s.clusters) }

// Reads reports whether the scope covers cluster (0: no cluster, read only by All).
func (s ReadScope) Reads(cluster int64) bool {
	if s.all {
		return true
	}
	_, ok := slices.BinarySearch(s.clusters, cluster)
	return ok && cluster != 0
}

// Equal reports whether two scopes are the same.
func (s ReadScope) Equal(o ReadScope) bool {
	return s.all == o.all && slices.Equal(s.clusters, o.clusters)
}

// ReadScope is what the identity may read (see the type).
func (i *Identity) ReadScope() ReadScope {
	if i == nil {
		return ReadScope{}
	}
	if holds(i.Permissions, ViewInfrastructure) {
		return EveryCluster
	}
	var view, manage []int64
	for _, g := range i.Grants {
		switch g.Permission {
		case ViewInfrastructure:
			view = append(view, g.Cluster)
		case ManageInfrastructure:
			manage = append(manage, g.Cluster)
		}
	}
	switch {
	case len(view) > 0:
		return InClusters(append(view, manage...)...)
	case len(manage) > 0:
		return EveryCluster
	}
	return ReadScope{}
}

// ReadScopeOf is the read scope of the identity in ctx (nothing without one).
func ReadScopeOf(ctx context.Context) ReadScope { return FromContext(ctx).ReadScope() }
