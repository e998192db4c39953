package incus

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Instance is the part of an instance the control plane and its tests look at.
type Instance struct {
	Name     string `json:"name"`
	Type     string `json:"type"`   // "container" or "virtual-machine"
	Status   string `json:"status"` // e.g. "Stopped", "Running"
	Location string `json:"location"`
	Project  string `json:"project"`
}

// CreateEmptyInstance creates a stopped container with no image (source type "none") whose
// root disk is on pool, and waits for it. With target "" Incus places it (skipping
// members with scheduler.instance=manual); otherwise it goes to member target (or to a
// cluster group with "@group"). It returns the instance as created, with its location.
func (c *Client) CreateEmptyInstance(ctx context.Context, name, target, pool string) (Instance, error) {
	body := map[string]any{
		"name":   name,
		"type":   "container",
		"source": map[string]string{"type": "none"},
		"devices": map[string]map[string]string{
			"root": {"type": "disk", "path": "/", "pool": pool},
		},
	}
	res, err := c.call(ctx, request{method: http.MethodPost, path: "/1.0/instances", query: targetQuery(target), body: body}, nil)
	if err != nil {
		return Instance{}, fmt.Errorf("create instance %q: %w", name, err)
	}
	if err := c.waitAsync(ctx, fmt.Sprintf("create instance %q", name), res); err != nil {
		return Instance{}, err
	}
	return c.Instance(ctx, name)
}

// Instance reads one instance of the default project.
func (c *Client) Instance(ctx context.Context, name string) (Instance, error) {
	var in Instance
	_, err := c.get(ctx, "/1.0/instances/"+seg(name), nil, &in)
	return in, err
}

// Instances lists the instances of the default project, with their location.
func (c *Client) Instances(ctx context.Context) ([]Instance, error) {
	var ins []Instance
	_, err := c.get(ctx, "/1.0/instances", url.Values{"recursion": {"1"}}, &ins)
	return ins, err
}

// InstancesOn lists the instances of every project that live on member, in one call
// (GET /1.0/instances?all-projects=true&recursion=1&filter=location eq MEMBER). The
// location is checked again here: a server that ignored the filter still answers right.
func (c *Client) InstancesOn(ctx context.Context, member string) ([]Instance, error) {
	var all []Instance
	q := url.Values{"recursion": {"1"}, "all-projects": {"true"}, "filter": {"location eq " + member}}
	if _, err := c.get(ctx, "/1.0/instances", q, &all); err != nil {
		return nil, fmt.Errorf("list the instances on member %q: %w", member, err)
	}
	out := all[:0]
	for _, in := range all {
		if in.Location == member {
			out = append(out, in)
		}
	}
	return out, nil
}

// DeleteInstance deletes a stopped instance and waits for it.
func (c *Client) DeleteInstance(ctx context.Context, name string) error {
	res, err := c.call(ctx, request{method: http.MethodDelete, path: "/1.0/instances/" + seg(name)}, nil)
	if err != nil {
		return fmt.Errorf("delete instance %q: %w", name, err)
	}
	return c.waitAsync(ctx, fmt.Sprintf("delete instance %q", name), res)
}
