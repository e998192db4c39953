package maas

import (
	"net/http"
	"strings"

	"github.com/apelora/fabric/internal/route"
)

// routes are the API paths (below api/2.0/) this client calls, as templates.
var routes = route.New(
	"version/",
	"users/",
	"maas/",
	"machines/",
	"machines/{system_id}/",
	"nodes/{system_id}/blockdevices/",
	"nodes/{system_id}/interfaces/",
)

// ops are the MAAS operations (?op=) this client sends; any other is "other".
var ops = map[string]bool{
	"whoami": true, "get_config": true, "allocate": true, "commission": true, "test": true, "deploy": true,
	"release": true, "abort": true, "power_off": true, "power_on": true, "query_power_state": true,
}

// OperationName names a request to MAAS by its method, path template and op, such as
// "POST /api/2.0/machines/{system_id}/?op=power_off"; the system id and every other
// query value are left out, and an unknown path or op is "other". The set of names is
// bounded: metrics label calls with it.
func OperationName(r *http.Request) string {
	p := r.URL.EscapedPath()
	name := route.Other
	if i := strings.Index(p, "/api/2.0/"); i >= 0 {
		if t := routes.Path(p[i+len("/api/2.0/"):]); t != route.Other {
			name = "/api/2.0/" + t
		}
	}
	if op := r.URL.Query().Get("op"); op != "" {
		if !ops[op] {
			op = route.Other
		}
		name += "?op=" + op
	}
	return route.Method(r) + " " + name
}
