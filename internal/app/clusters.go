package app

import (
	"context"
	"fmt"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/membership"
	"log/slog"
	"os"
	"slices"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/resolvers"
)

// incusClusters is a process's side of the Incus clusters: their registry (the records,
// refreshed by NOTIFY clusters), the service that registers, removes and adopts them, the
// pool of their clients (each a cluster reached through any member with the one client
// identity), and the environment's cluster adopted at start (nil when APELORA_INCUS_URL
// and _SOCKET are unset).
type incusClusters struct {
	registry *clusters.Registry
	service  *clusters.Service
	pool     *incus.Pool
	identity *incus.Identity
	env      *clusters.Cluster
}

// startClusters reads the cluster records, adopts the environment's cluster (refusing to
// start when APELORA_INCUS_* names another cluster than the one adopted before) and makes
// the pool. opts are the clients' options (timeout, logger, transport, the process's write
// seam); fallbacks are more member URLs of the environment's cluster (the worker's
// deprecated APELORA_FENCE_INCUS_URLS).
func startClusters(ctx context.Context, cfg Config, store *postgres.Store, opts incus.Config, log *slog.Logger, fallbacks ...string) (*incusClusters, error) {
	ic := &incusClusters{registry: clusters.NewRegistry(store.Clusters())}
	if err := ic.registry.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("read the Incus clusters: %w", err)
	}
	if cfg.Incus.HasIdentity() {
		id, err := incus.LoadIdentity(cfg.Incus.ClientCertFile, cfg.Incus.ClientKeyFile)
		if err != nil {
			return nil, err
		}
		ic.identity = id
	}
	ic.service = &clusters.Service{Store: store.Clusters(), Registry: ic.registry}
	if cfg.Incus.Configured() {
		ic.service.Probe = incus.Probe{ID: ic.identity, Opts: opts}
	}
	if cfg.Incus.HasCluster() {
		env, err := environment(ctx, cfg, opts, log)
		if err != nil {
			return nil, err
		}
		id := logging.NewRequestID()
		c, err := ic.service.Adopt(logging.WithRequestID(ctx, id), env, id)
		if err != nil {
			return nil, fmt.Errorf("adopt the Incus cluster of APELORA_INCUS_*: %w", err)
		}
		ic.env = &c
		log.Info("Incus cluster of APELORA_INCUS_* adopted", "cluster", c.Name, "connection", c.Describe())
	} else if c, ok := ic.registry.Environment(); ok {
		if c.Adopted {
			log.Warn("APELORA_INCUS_URL and APELORA_INCUS_SOCKET are unset: cluster " + c.Name + ", adopted from them earlier, is reached as a registered cluster")
		} else {
			log.Warn(c.Unadopted().Message)
		}
	}
	ic.pool = incus.NewPool(ic.identity, ic.registry, opts, fallbacks...)
	return ic, nil
}

// environment is the cluster APELORA_INCUS_* names: its URLs and the certificate of
// APELORA_INCUS_SERVER_CERT, or its socket and the certificate its daemon presents (read
// now: "" when it does not answer; the next start reads it again).
func environment(ctx context.Context, cfg Config, opts incus.Config, log *slog.Logger) (clusters.Environment, error) {
	env := clusters.Environment{Name: cfg.Incus.ClusterName, Socket: cfg.Incus.SocketPath}
	if cfg.Incus.SocketPath == "" {
		data, err := os.ReadFile(cfg.Incus.ServerCertFile)
		if err != nil {
			return env, fmt.Errorf("read Incus cluster certificate (%s): %w", incus.EnvServerCert, err)
		}
		env.CertificatePEM = string(data)
		env.Seeds = append([]string{cfg.Incus.URL}, cfg.Incus.FallbackURLs...)
		return env, nil
	}
	c, err := incus.NewClient(nil, incus.Endpoint{Socket: cfg.Incus.SocketPath}, opts)
	if err != nil {
		return env, err
	}
	defer c.Close()
	rctx, cancel := context.WithTimeout(ctx, c.Timeout())
	defer cancel()
	info, err := c.ServerInfo(rctx, "")
	if err != nil {
		log.Warn("could not read the certificate of the Incus daemon at APELORA_INCUS_SOCKET: the cluster is adopted by its socket, and its certificate read at a later start", "error", err)
		return env, nil
	}
	env.CertificatePEM = info.Certificate
	return env, nil
}

// clusterSide is the clusters query's view of each cluster through the pool.
type clusterSide struct{ ic *incusClusters }

var _ resolvers.ClusterSide = clusterSide{}

// clusterIncus is a cluster's ports as the clusters query reads them.
type clusterIncus struct{ *incus.Ports }

func (s clusterSide) Incus(ctx context.Context, cluster int64) (resolvers.ClusterIncus, error) {
	p, err := s.ic.pool.For(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return clusterIncus{p}, nil
}

func (s clusterSide) Addresses(c clusters.Cluster) ([]string, string) {
	if c.Socket != "" {
		return []string{}, "unix:" + c.Socket
	}
	cl, ok := s.ic.pool.Made(c.ID)
	if !ok {
		return slices.Clone(c.SeedURLs), ""
	}
	out := cl.Seeds()
	for _, a := range cl.Addresses() {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, cl.Through()
}

func (s clusterSide) ClientCertificate() string {
	if s.ic.identity == nil {
		return ""
	}
	return s.ic.identity.CertificatePEM()
}

// fleetClusters is the fleet's list of the clusters it joins: every registered cluster,
// each read through its pool ports (the environment's through env, which counts its
// availability in the metrics), listed from the registry without a query.
type fleetClusters struct {
	ic  *incusClusters
	env membership.Source // the environment's cluster's source; nil: the pool's
}

var _ fleet.Clusters = fleetClusters{}

func (f fleetClusters) Clusters(ctx context.Context) []fleet.Cluster {
	all := f.ic.registry.All()
	unassigned, _ := clusters.Unassigned(all)
	out := make([]fleet.Cluster, len(all))
	for i := range all {
		c := &all[i]
		fc := fleet.Cluster{ID: c.ID, Name: c.Name, Environment: unassigned.ID != 0 && c.ID == unassigned.ID, Record: c}
		switch ports, err := f.ic.pool.For(ctx, c.ID); {
		case err != nil:
			fc.Unavailable = err
		case c.FromEnvironment && f.env != nil:
			fc.Incus = f.env
		default:
			fc.Incus = ports
		}
		out[i] = fc
	}
	return out
}

// scopes is what the gate reads for an identity that may manage some clusters only: the
// registry's clusters and the store's records.
type scopes struct {
	*clusters.Registry
	clusters.ScopeReader
}
