package resolvers

import (
	"encoding/json"
	"net/http"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/resterr"
)

// MAASMachinesResponse is the body of GET /api/v1/provisioners/maas/machines: the same
// rows and the same statement of which sources answered as the GraphQL `fleet` query.
type MAASMachinesResponse struct {
	Sources  *model.FleetSources `json:"sources"`
	Machines []*model.Machine    `json:"machines"`
}

// MAASMachinesHandler serves the fleet to scripts as plain JSON. Authentication and the
// read permission are checked around it, as for GraphQL.
func (r *Resolver) MAASMachinesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v, err := r.View.View(req.Context())
		if err != nil {
			resterr.Write(w, req, r.Log, err)
			return
		}
		f := mapFleet(v, nil, identity.ReadScopeOf(req.Context()))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(MAASMachinesResponse{Sources: f.Sources, Machines: f.Machines})
	})
}
