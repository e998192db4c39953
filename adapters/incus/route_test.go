package incus

import (
	"net/http"
	"net/url"
	"testing"
)

func TestOperationNameIsATemplate(t *testing.T) {
	for raw, want := range map[string]string{
		"GET http://incus/1.0":                                      "GET /1.0",
		"GET http://incus/1.0?target=node-7":                        "GET /1.0",
		"GET https://10.0.0.5:8443/1.0/cluster/members?recursion=1": "GET /1.0/cluster/members",
		"POST https://10.0.0.5:8443/1.0/cluster/members":            "POST /1.0/cluster/members",
		"GET https://h/1.0/cluster/members/node-7":                  "GET /1.0/cluster/members/{name}",
		"PUT https://h/1.0/cluster/members/node%2F7":                "PUT /1.0/cluster/members/{name}",
		"DELETE https://h/1.0/cluster/members/node-7?force=1":       "DELETE /1.0/cluster/members/{name}",
		"GET https://h/1.0/cluster/members/node-7/state":            "GET /1.0/cluster/members/{name}/state",
		"GET https://h/1.0/operations/1f2e3d4c":                     "GET /1.0/operations/{id}",
		"GET https://h/1.0/operations/1f2e3d4c/wait?timeout=5":      "GET /1.0/operations/{id}/wait",
		"GET https://h/1.0/storage-pools/default?target=node-7":     "GET /1.0/storage-pools/{name}",
		"GET https://h/1.0/networks/incusbr0?target=node-7":         "GET /1.0/networks/{name}",
		"GET https://h/1.0/resources?target=node-7":                 "GET /1.0/resources",
		"DELETE https://h/1.0/certificates/abcdef0123":              "DELETE /1.0/certificates/{fingerprint}",
		"GET https://h/1.0/events?type=lifecycle":                   "GET /1.0/events",
		"GET https://h/1.0/instances/web-1/logs/x":                  "GET other",
		"GET https://h/secret-token-in-path":                        "GET other",
	} {
		var method, u string
		for i := range raw {
			if raw[i] == ' ' {
				method, u = raw[:i], raw[i+1:]
				break
			}
		}
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := OperationName(&http.Request{Method: method, URL: p}); got != want {
			t.Errorf("%s: got %q, want %q", raw, got, want)
		}
	}
}
