package producttest

import (
	"fmt"

	"github.com/apelora/fabric/testkit/incuslab"
)

// RegisterCluster registers lab as the cluster name through the API with token, as an
// administrator does: planned, then confirmed with its plan's hash. It returns the
// confirmation's answer, or the plan's when the plan was refused or failed. The lab must
// trust the product's client identity (incuslab.Options.Identity).
func (e *Env) RegisterCluster(token, name string, lab *incuslab.Cluster) *Response {
	e.t.Helper()
	const q = `mutation($in: RegisterClusterInput!) { registerCluster(input: $in) { cluster { name certificateFingerprint } plan { planHash refused refusals { code message } } } }`
	in := map[string]any{"name": name, "url": lab.URL, "clusterCertificate": lab.ClusterCertificatePEM(), "dryRun": true}
	r := e.GQL(token, q, map[string]any{"in": in})
	if len(r.Errors) > 0 {
		return r
	}
	p, _ := r.Data["registerCluster"].(map[string]any)["plan"].(map[string]any)
	if p == nil || p["refused"] != false {
		r.Errors = append(r.Errors, GQLError{Message: fmt.Sprintf("the plan is refused: %v", p["refusals"]), Extensions: map[string]any{"code": "PLAN_REFUSED"}})
		return r
	}
	in["dryRun"], in["planHash"] = false, p["planHash"]
	return e.GQL(token, q, map[string]any{"in": in})
}
