package drift

import (
	"context"
	"sync"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/membership"
)

// roundCache shares one round's cluster-wide reads (the member list, the cluster's
// version, the pool and network lists) among the machines it looks at, so a round costs
// four Incus calls plus the per-member ones, not four per machine. Per-member reads pass
// through. Errors are kept too: a list that failed is not asked again within the round.
type roundCache struct {
	admission.Incus

	mu       sync.Mutex
	members  *answer[[]membership.Member]
	cluster  *answer[membership.Version]
	pools    *answer[[]string]
	networks *answer[[]string]
}

type answer[T any] struct {
	v   T
	err error
}

func once[T any](c *roundCache, slot **answer[T], read func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *slot == nil {
		v, err := read()
		*slot = &answer[T]{v, err}
	}
	return (*slot).v, (*slot).err
}

func (c *roundCache) Members(ctx context.Context) ([]membership.Member, error) {
	return once(c, &c.members, func() ([]membership.Member, error) { return c.Incus.Members(ctx) })
}

func (c *roundCache) Version(ctx context.Context, member string) (membership.Version, error) {
	if member != "" {
		return c.Incus.Version(ctx, member)
	}
	return once(c, &c.cluster, func() (membership.Version, error) { return c.Incus.Version(ctx, "") })
}

func (c *roundCache) StoragePools(ctx context.Context) ([]string, error) {
	return once(c, &c.pools, func() ([]string, error) { return c.Incus.StoragePools(ctx) })
}

func (c *roundCache) LocatedNetworks(ctx context.Context) ([]string, error) {
	return once(c, &c.networks, func() ([]string, error) { return c.Incus.LocatedNetworks(ctx) })
}

// MemberHardware passes through (declared for clarity: it is per member).
func (c *roundCache) MemberHardware(ctx context.Context, member string) (hardware.Inventory, error) {
	return c.Incus.MemberHardware(ctx, member)
}
