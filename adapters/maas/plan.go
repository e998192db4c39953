package maas

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"

	"github.com/apelora/fabric/plan"
)

// A dry run (plan.From(ctx) set) sends MAAS no POST: do records the operation and its
// parameters as a plan step and answers with the machine as MAAS shows it now (a real
// read). Cloud-init user data appears only as its size and SHA-256.
func (c *Client) planCall(ctx context.Context, r *plan.Recorder, cl call, out any) error {
	id := cl.params.Get("system_id")
	machine := cl.path
	if id != "" {
		machine = machinePath(id)
	} else if len(cl.path) > len("machines/") {
		id = cl.path[len("machines/") : len(cl.path)-1]
	}
	name := cl.method + " " + cl.path
	if cl.op != "" {
		name += "?op=" + cl.op
	}
	step := plan.Step{System: plan.MAAS, Call: name, Target: id}
	keys := make([]string, 0, len(cl.params))
	for k := range cl.params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range cl.params[k] {
			if k == "user_data" {
				if b, err := base64.StdEncoding.DecodeString(v); err == nil {
					v = plan.Secret(b)
				} else {
					v = plan.Secret([]byte(v))
				}
			}
			step.Changes = append(step.Changes, plan.Change{Field: k, After: v})
		}
	}
	r.Record(step)
	if out == nil || machine == "machines/" {
		return nil
	}
	return c.do(ctx, call{method: http.MethodGet, path: machine}, out)
}
