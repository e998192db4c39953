package maas

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"

	"github.com/apelora/fabric/domain/plan"
)

// A dry run sends MAAS no POST: do hands it to the seam (plan.Writes), which records the
// operation and its parameters as a call of the plan, and answers with the machine as MAAS shows
// it now (a real read). Cloud-init user data appears as its caller shows it
// (DeployOptions.UserDataShown: what the administrator approves), else only as its size
// and SHA-256.

// describe is the call of the plan cl, which would change something, stands for.
func describe(cl call) plan.Call {
	id := cl.params.Get("system_id")
	if id == "" && len(cl.path) > len("machines/") {
		id = cl.path[len("machines/") : len(cl.path)-1]
	}
	name := cl.method + " " + cl.path
	if cl.op != "" {
		name += "?op=" + cl.op
	}
	pc := plan.Call{System: plan.MAAS, Request: name, Target: id}
	keys := make([]string, 0, len(cl.params))
	for k := range cl.params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range cl.params[k] {
			if k == "user_data" && cl.shownUserData != "" {
				v = cl.shownUserData
			} else if k == "user_data" {
				if b, err := base64.StdEncoding.DecodeString(v); err == nil {
					v = plan.Secret(b)
				} else {
					v = plan.Secret([]byte(v))
				}
			}
			pc.Changes = append(pc.Changes, plan.Change{Field: k, After: v})
		}
	}
	return pc
}

// plannedAnswer is what do answers for a planned call: the machine as MAAS shows it now.
func (c *Client) plannedAnswer(ctx context.Context, cl call, out any) error {
	machine := cl.path
	if id := cl.params.Get("system_id"); id != "" {
		machine = machinePath(id)
	}
	if out == nil || machine == "machines/" {
		return nil
	}
	return c.do(ctx, call{method: http.MethodGet, path: machine}, out)
}
