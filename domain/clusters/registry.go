package clusters

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/apelora/fabric/internal/apperr"
)

// Source lists the cluster records (the store).
type Source interface {
	// Clusters returns every cluster record, ordered by name.
	Clusters(ctx context.Context) ([]Cluster, error)
}

// Registry is the clusters as this process knows them: read from the store at start and
// again whenever a cluster is registered, changed or removed (on any replica: NOTIFY
// clusters, Follow), so every read and the connection pool find a cluster without a query.
// Safe for concurrent use.
type Registry struct {
	src Source

	mu       sync.RWMutex
	all      []Cluster // by name
	loaded   bool
	watchers []func(before, after []Cluster)
	refresh  sync.Mutex // one refresh at a time, so watchers see changes in order
}

// NewRegistry returns a registry that reads src. Call Refresh before use.
func NewRegistry(src Source) *Registry { return &Registry{src: src} }

// Refresh reads the records again and tells the watchers when anything changed.
func (r *Registry) Refresh(ctx context.Context) error {
	r.refresh.Lock()
	defer r.refresh.Unlock()
	all, err := r.src.Clusters(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	r.mu.Lock()
	before, loaded := r.all, r.loaded
	r.all, r.loaded = all, true
	watchers := slices.Clone(r.watchers)
	r.mu.Unlock()
	if loaded && slices.EqualFunc(before, all, same) {
		return nil
	}
	for _, w := range watchers {
		w(before, all)
	}
	return nil
}

// same reports whether two records are the same in everything a connection depends on.
func same(a, b Cluster) bool {
	return a.ID == b.ID && a.Name == b.Name && slices.Equal(a.SeedURLs, b.SeedURLs) && a.Socket == b.Socket &&
		a.CertificatePEM == b.CertificatePEM && a.Fingerprint == b.Fingerprint && a.Adopted == b.Adopted &&
		a.FromEnvironment == b.FromEnvironment
}

// Watch has fn called after every refresh that changed the records, with the records
// before and after (the connection pool closes the clients of clusters gone or changed).
// fn must be quick.
func (r *Registry) Watch(fn func(before, after []Cluster)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watchers = append(r.watchers, fn)
}

// All returns every cluster, ordered by name (a copy).
func (r *Registry) All() []Cluster {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.all)
}

// Adopted returns the clusters Apelora can connect to (all but the placeholder), by name.
func (r *Registry) Adopted() []Cluster {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Cluster
	for _, c := range r.all {
		if c.Adopted {
			out = append(out, c)
		}
	}
	return out
}

// ByID returns the cluster with id.
func (r *Registry) ByID(id int64) (Cluster, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, c := range r.all {
		if c.ID == id {
			return c, true
		}
	}
	return Cluster{}, false
}

// ByName returns the cluster called name.
func (r *Registry) ByName(name string) (Cluster, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, c := range r.all {
		if c.Name == name {
			return c, true
		}
	}
	return Cluster{}, false
}

// Environment returns the cluster carried over from APELORA_INCUS_* (adopted or not).
func (r *Registry) Environment() (Cluster, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, c := range r.all {
		if c.FromEnvironment {
			return c, true
		}
	}
	return Cluster{}, false
}

// Resolve is Resolve over the registered clusters.
func (r *Registry) Resolve(machine string, record *int64, given string) (Cluster, error) {
	return Resolve(r.All(), machine, record, given)
}

// Lookup returns the cluster with id, reading the records again once when this process
// does not know it yet (a NOTIFY may lag a registration on another replica): NOT_FOUND
// when there is none.
func (r *Registry) Lookup(ctx context.Context, id int64) (Cluster, error) {
	if c, ok := r.ByID(id); ok {
		return c, nil
	}
	if err := r.Refresh(ctx); err != nil {
		return Cluster{}, err
	}
	if c, ok := r.ByID(id); ok {
		return c, nil
	}
	return Cluster{}, apperr.New(apperr.NotFound, "no Incus cluster has id %d (removed?): list them with the clusters query", id)
}

// Named returns the cluster called name as Lookup does: NOT_FOUND on field (listing the
// registered ones) when there is none.
func (r *Registry) Named(ctx context.Context, field, name string) (Cluster, error) {
	if c, ok := r.ByName(name); ok {
		return c, nil
	}
	if err := r.Refresh(ctx); err != nil {
		return Cluster{}, err
	}
	if c, ok := r.ByName(name); ok {
		return c, nil
	}
	return Cluster{}, &apperr.Error{Code: apperr.NotFound, Field: field, Message: "no cluster named " + apperr.Quote(name) + ": " +
		registered(r.All()) + "; register it with registerCluster"}
}
