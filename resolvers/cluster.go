package resolvers

import (
	"context"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/apperr"
)

// ClusterSide is what the clusters query reads of a cluster beyond its record: its Incus
// side (through the connection pool, adapters/incus.Pool) and how it is reached.
type ClusterSide interface {
	// Incus returns the cluster's ports: its members, their versions, its placement
	// scriptlet.
	Incus(ctx context.Context, cluster int64) (ClusterIncus, error)
	// Addresses are the member URLs Apelora may reach the cluster through (the seeds, then
	// those learned) and the member it talks through now ("" for none yet), read without
	// connecting.
	Addresses(c clusters.Cluster) (addresses []string, through string)
	// ClientCertificate is Apelora's Incus client certificate (PEM), "" for none.
	ClientCertificate() string
}

// ClusterIncus is one cluster's Incus side as the clusters query reads it.
type ClusterIncus interface {
	Members(ctx context.Context) ([]membership.Member, error)
	MemberVersions
	placement.Incus
}

// mapCluster maps a cluster's record; what it reads elsewhere is resolved when selected.
func mapCluster(c *clusters.Cluster) *model.Cluster {
	if c == nil {
		return nil
	}
	return &model.Cluster{Name: c.Name, CertificateFingerprint: c.Fingerprint, RegisteredAt: c.RegisteredAt,
		RegisteredBy: c.RegisteredBy, FromEnvironment: c.FromEnvironment, Record: c}
}

// clusterOf returns the record of a cluster the answer holds (as it was read: a removed
// cluster's too).
func (r *Resolver) clusterOf(obj *model.Cluster) (clusters.Cluster, error) {
	if obj.Record == nil {
		return clusters.Cluster{}, apperr.New(apperr.Internal, "cluster %s was answered without its record", obj.Name)
	}
	return *obj.Record, nil
}

// clusterNamed is the registered cluster called name (a filter argument): NOT_FOUND on
// field cluster, listing those registered, when there is none.
func (r *Resolver) clusterNamed(ctx context.Context, name string) (clusters.Cluster, error) {
	if r.Clusters == nil || r.Clusters.Registry == nil {
		return clusters.Cluster{}, &apperr.Error{Code: apperr.NotFound, Field: "cluster", Message: "no cluster named " + apperr.Quote(name) + ": no cluster is registered"}
	}
	return r.Clusters.Registry.Named(ctx, "cluster", name)
}
