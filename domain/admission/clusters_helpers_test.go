package admission

import (
	"context"

	"github.com/apelora/fabric/domain/clusters"
)

// testClusters is the one cluster the unit tests act in: the environment's.
var testClusters = listed{{ID: 1, Name: "default", Adopted: true, FromEnvironment: true}}

type listed []clusters.Cluster

func (l listed) All() []clusters.Cluster { return l }

// portsOf is the port in for every cluster.
func portsOf[T any](in T) clusters.Ports[T] {
	return clusters.PortsFunc[T](func(context.Context, int64) (T, error) { return in, nil })
}
