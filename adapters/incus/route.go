package incus

import (
	"net/http"

	"github.com/apelora/fabric/internal/route"
)

// routes are the paths this client calls (and /1.0/events, which a watcher may), as
// templates: the names and ids in them are not labels.
var routes = route.New(
	"/1.0",
	"/1.0/certificates",
	"/1.0/certificates/{fingerprint}",
	"/1.0/cluster",
	"/1.0/cluster/members",
	"/1.0/cluster/members/{name}",
	"/1.0/cluster/members/{name}/state",
	"/1.0/events",
	"/1.0/instances",
	"/1.0/instances/{name}",
	"/1.0/networks",
	"/1.0/networks/{name}",
	"/1.0/operations",
	"/1.0/operations/{id}",
	"/1.0/operations/{id}/wait",
	"/1.0/resources",
	"/1.0/storage-pools",
	"/1.0/storage-pools/{name}",
)

// OperationName names a request to Incus by its method and path template, such as
// "GET /1.0/cluster/members/{name}"; a path no template matches is "GET other". The query
// (target, recursion) is left out. The set of names is bounded: metrics label calls with it.
func OperationName(r *http.Request) string {
	return route.Method(r) + " " + routes.Path(r.URL.EscapedPath())
}
