package incus

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/internal/apperr"
)

// Pool holds one client per adopted cluster, each the any-member client of endpoints.go
// pinned to that cluster's certificate, with the client identity every cluster trusts, and
// its ports (Ports with their own shared reads, FencePorts). A cluster's client is made at
// its first use from its record (the registry's), and closed when the record goes or
// changes (Registry.Watch: NOTIFY clusters on any replica). Every client shares the
// process's write seam (Config.Writes, the metrics' hook on it); a write forgets only its
// own cluster's shared reads (Client.AfterWrite).
type Pool struct {
	id       *Identity // nil: no client identity (socket only)
	registry *clusters.Registry
	opts     Config // the clients' options (Timeout, Logger, WrapTransport, Writes)
	// environment names the environment's cluster's client by its settings in messages
	// (the APELORA_INCUS_* advice the product gave before clusters were records), and gives
	// it the worker's extra addresses.
	fallbacks []string

	mu      sync.Mutex
	entries map[int64]*poolEntry
	made    []func(c clusters.Cluster, cl *Client)
	closed  bool
}

type poolEntry struct {
	cluster clusters.Cluster
	client  *Client
	ports   *Ports
	fence   FencePorts
}

// NewPool makes a pool over the registry's clusters with identity id (nil: none; only a
// socket cluster can then be reached) and the options of opts. fallbacks are more member
// URLs of the environment's cluster (the worker's deprecated APELORA_FENCE_INCUS_URLS).
func NewPool(id *Identity, registry *clusters.Registry, opts Config, fallbacks ...string) *Pool {
	p := &Pool{id: id, registry: registry, opts: opts, fallbacks: fallbacks, entries: map[int64]*poolEntry{}}
	registry.Watch(func(_, after []clusters.Cluster) { p.follow(after) })
	return p
}

// Identity is the pool's client identity (nil for none).
func (p *Pool) Identity() *Identity { return p.id }

// OnClient has fn called with every client the pool makes (after it is made, outside the
// pool's lock): what follows a cluster's events opens its stream there.
func (p *Pool) OnClient(fn func(c clusters.Cluster, cl *Client)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.made = append(p.made, fn)
}

// follow closes the clients of clusters removed or changed.
func (p *Pool) follow(after []clusters.Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.entries {
		i := slices.IndexFunc(after, func(c clusters.Cluster) bool { return c.ID == id })
		if i < 0 || !sameConnection(e.cluster, after[i]) {
			e.client.Close()
			delete(p.entries, id)
		}
	}
}

func sameConnection(a, b clusters.Cluster) bool {
	return a.Name == b.Name && a.Socket == b.Socket && a.CertificatePEM == b.CertificatePEM && slices.Equal(a.SeedURLs, b.SeedURLs) && a.Adopted == b.Adopted
}

// entry returns the cluster's client and ports, making them at first use.
func (p *Pool) entry(ctx context.Context, id int64) (*poolEntry, error) {
	p.mu.Lock()
	if e, ok := p.entries[id]; ok {
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	c, err := p.registry.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if !c.Adopted {
		return nil, c.Unadopted()
	}
	ep := Endpoint{Seeds: c.SeedURLs, CertificatePEM: c.CertificatePEM, Socket: c.Socket, Cluster: c.Name}
	if !c.FromEnvironment {
		ep.Name = c.Name
	} else if c.Socket == "" {
		ep.Seeds = append(slices.Clone(ep.Seeds), p.fallbacks...)
	}
	if c.Socket == "" && p.id == nil {
		return nil, apperr.New(apperr.FailedPrecondition, "Apelora has no Incus client identity to reach cluster %s with: set APELORA_INCUS_CLIENT_CERT and APELORA_INCUS_CLIENT_KEY (one certificate every cluster trusts) and restart Apelora", c.Name)
	}
	cl, err := NewClient(p.id, ep, p.opts)
	if err != nil {
		return nil, apperr.Wrap(err, apperr.Unavailable, "cannot reach Incus cluster %s: %v", c.Name, err)
	}
	e := &poolEntry{cluster: c, client: cl, ports: NewPorts(cl), fence: NewFencePorts(cl)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cl.Close()
		return nil, apperr.New(apperr.Unavailable, "the server is stopping")
	}
	if had, ok := p.entries[id]; ok {
		// Made meanwhile by another caller: use that one.
		p.mu.Unlock()
		cl.Close()
		return had, nil
	}
	p.entries[id] = e
	made := slices.Clone(p.made)
	p.mu.Unlock()
	for _, fn := range made {
		fn(c, cl)
	}
	return e, nil
}

// For returns the cluster's ports (the domain's single-cluster Incus ports). An unknown or
// removed cluster is NOT_FOUND; the placeholder not adopted yet is UNAVAILABLE.
func (p *Pool) For(ctx context.Context, cluster int64) (*Ports, error) {
	e, err := p.entry(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return e.ports, nil
}

// Fence returns the cluster's fence worker ports (they share nothing with For's).
func (p *Pool) Fence(ctx context.Context, cluster int64) (FencePorts, error) {
	e, err := p.entry(ctx, cluster)
	if err != nil {
		return FencePorts{}, err
	}
	return e.fence, nil
}

// Client returns the cluster's client (its events, its addresses).
func (p *Pool) Client(ctx context.Context, cluster int64) (*Client, error) {
	e, err := p.entry(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return e.client, nil
}

// Made returns the client of the cluster if the pool has made one (no connection is made).
func (p *Pool) Made(cluster int64) (*Client, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[cluster]
	if !ok {
		return nil, false
	}
	return e.client, true
}

// Close closes every client; the pool makes none after.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, e := range p.entries {
		e.client.Close()
		delete(p.entries, id)
	}
}

// As is the pool as a domain's lookup of its port T (clusters.Ports[T]): T is the
// single-cluster interface the domain declares, which *Ports implements.
//
//	enrolment.New(store, incus.As[enrolment.Incus](pool), log)
func As[T any](p *Pool) clusters.Ports[T] {
	return clusters.PortsFunc[T](func(ctx context.Context, cluster int64) (T, error) {
		var zero T
		ports, err := p.For(ctx, cluster)
		if err != nil {
			return zero, err
		}
		t, ok := any(ports).(T)
		if !ok {
			return zero, apperr.New(apperr.Internal, "the Incus ports do not implement %T", zero)
		}
		return t, nil
	})
}

// FenceAs is As over the fence worker's ports (FencePorts).
func FenceAs[T any](p *Pool) clusters.Ports[T] {
	return clusters.PortsFunc[T](func(ctx context.Context, cluster int64) (T, error) {
		var zero T
		ports, err := p.Fence(ctx, cluster)
		if err != nil {
			return zero, err
		}
		t, ok := any(ports).(T)
		if !ok {
			return zero, apperr.New(apperr.Internal, "the Incus fence ports do not implement %T", zero)
		}
		return t, nil
	})
}

// String names the pool for logs.
func (p *Pool) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("Incus pool (%d clusters connected)", len(p.entries))
}
