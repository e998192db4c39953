package incus

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Member state actions (POST /1.0/cluster/members/{name}/state).
const (
	ActionEvacuate = "evacuate"
	ActionRestore  = "restore"
)

// ChangeMemberState asks Incus to evacuate or restore a member: POST
// /1.0/cluster/members/{name}/state with {"action", "mode"}. Incus does the work (moving,
// stopping, starting instances) in a background operation whose id it returns at once;
// Apelora never moves instances itself. Mode "" lets each instance's cluster.evacuate
// decide (evacuate), or starts them again (restore); "skip" restores without starting
// them. In a dry run the call is only recorded and the id is "".
func (c *Client) ChangeMemberState(ctx context.Context, name, action, mode string) (string, error) {
	res, err := c.call(ctx, request{method: http.MethodPost, path: "/1.0/cluster/members/" + seg(name) + "/state",
		body: map[string]string{"action": action, "mode": mode}}, nil)
	if err != nil {
		return "", fmt.Errorf("%s member %q: %w", action, name, err)
	}
	if res.typ != typeAsync || res.operation == "" {
		return "", nil
	}
	return operationID(res.operation), nil
}

// MemberOperation is an evacuation or restore as Incus reports it while it runs.
type MemberOperation struct {
	Operation
	// Progress is Incus's last word on it (metadata.evacuation_progress: "Migrating
	// \"c1\" in project \"default\" to \"node2\"", "Stopping …", "Starting …"); "" before
	// the first instance.
	Progress string
}

// MemberOperation reads an evacuation or restore operation. Only the progress line is
// kept from its metadata (Operation keeps none: a token's metadata holds its secret).
func (c *Client) MemberOperation(ctx context.Context, id string) (MemberOperation, error) {
	var raw struct {
		Operation
		Metadata struct {
			Progress string `json:"evacuation_progress"`
		} `json:"metadata"`
	}
	if _, err := c.get(ctx, "/1.0/operations/"+seg(id), nil, &raw); err != nil {
		return MemberOperation{}, fmt.Errorf("read operation %s: %w", id, err)
	}
	return MemberOperation{Operation: raw.Operation, Progress: raw.Metadata.Progress}, nil
}

// PlacedInstance is an instance with what an evacuation does to it.
type PlacedInstance struct {
	Name     string `json:"name"`
	Project  string `json:"project"`
	Type     string `json:"type"`
	Status   string `json:"status"`
	Location string `json:"location"`
	// Evacuate is the instance's effective cluster.evacuate ("" when unset: auto).
	Evacuate string
	// Origin is volatile.evacuate.origin: the member an evacuation moved it from.
	Origin string
}

// AllInstances lists every instance of every project, with its location and its
// effective cluster.evacuate and evacuation origin, in one call (GET /1.0/instances?all-projects=true&recursion=1),
// whatever the instance count. Only those two keys of each instance's configuration are kept.
func (c *Client) AllInstances(ctx context.Context) ([]PlacedInstance, error) {
	var all []struct {
		PlacedInstance
		Config map[string]string `json:"expanded_config"`
	}
	if _, err := c.get(ctx, "/1.0/instances", url.Values{"recursion": {"1"}, "all-projects": {"true"}}, &all); err != nil {
		return nil, fmt.Errorf("list the instances: %w", err)
	}
	out := make([]PlacedInstance, len(all))
	for i, in := range all {
		out[i] = in.PlacedInstance
		out[i].Evacuate = in.Config["cluster.evacuate"]
		out[i].Origin = in.Config["volatile.evacuate.origin"]
	}
	return out, nil
}
