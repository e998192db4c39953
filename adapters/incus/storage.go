package incus

import (
	"context"
	"net/url"
)

// Storage pool and network status values. Without a target they describe the whole
// cluster; with ?target=member they describe that member.
const (
	StateCreated     = "Created"     // exists (on every member, or on the target)
	StatePending     = "Pending"     // defined, not created (a member whose create failed stays Pending)
	StateErrored     = "Errored"     // cluster-wide only: the final create failed somewhere
	StateUnknown     = "Unknown"     // targeted only: no record on that member
	StateUnavailable = "Unavailable" // targeted only: created, but failed to start there
)

// StoragePool is a storage pool. Fetched with a target, Status, Config and UsedBy are that
// member's own; in the list they are cluster-wide and member-specific keys (source, size…)
// are stripped.
type StoragePool struct {
	Name        string            `json:"name"`
	Driver      string            `json:"driver"`
	Description string            `json:"description"`
	Status      string            `json:"status"`
	Config      map[string]string `json:"config"`
	UsedBy      []string          `json:"used_by"`
	// Locations lists members with a record in any state; it does not prove success.
	Locations []string `json:"locations"`
}

// Source returns the pool's "source" key (member-specific; only set when read with a target).
func (p StoragePool) Source() string { return p.Config["source"] }

// StoragePools lists the pools with their cluster-wide status. Incus ignores ?target= on
// the list, so read each pool with StoragePool to learn a member's status.
func (c *Client) StoragePools(ctx context.Context) ([]StoragePool, error) {
	var ps []StoragePool
	_, err := c.get(ctx, "/1.0/storage-pools", url.Values{"recursion": {"1"}}, &ps)
	return ps, err
}

// StoragePool reads one pool, as member target sees it when target is not "". An unknown
// pool or member gives an error matching ErrNotFound.
func (c *Client) StoragePool(ctx context.Context, name, target string) (StoragePool, error) {
	var p StoragePool
	_, err := c.get(ctx, "/1.0/storage-pools/"+seg(name), targetQuery(target), &p)
	return p, err
}

// Network is a network. Host interfaces appear as unmanaged (Managed false, Status "");
// only managed networks have to exist on a member before admission.
type Network struct {
	Name        string            `json:"name"`
	Type        string            `json:"type"` // bridge, macvlan, physical, ovn, loopback…
	Description string            `json:"description"`
	Managed     bool              `json:"managed"`
	Status      string            `json:"status"`
	Config      map[string]string `json:"config"`
	UsedBy      []string          `json:"used_by"`
	Locations   []string          `json:"locations"`
	Project     string            `json:"project"`
}

// Networks lists the networks (GET /1.0/networks?recursion=1), managed and host interfaces.
func (c *Client) Networks(ctx context.Context) ([]Network, error) {
	var ns []Network
	_, err := c.get(ctx, "/1.0/networks", url.Values{"recursion": {"1"}}, &ns)
	return ns, err
}

// ManagedNetworks lists only the networks Incus manages.
func (c *Client) ManagedNetworks(ctx context.Context) ([]Network, error) {
	ns, err := c.Networks(ctx)
	if err != nil {
		return nil, err
	}
	out := ns[:0]
	for _, n := range ns {
		if n.Managed {
			out = append(out, n)
		}
	}
	return out, nil
}

// Network reads one network, as member target sees it when target is not "" (status and
// member-specific keys such as parent are that member's).
func (c *Client) Network(ctx context.Context, name, target string) (Network, error) {
	var n Network
	_, err := c.get(ctx, "/1.0/networks/"+seg(name), targetQuery(target), &n)
	return n, err
}
