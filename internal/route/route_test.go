package route

import (
	"net/http"
	"testing"
)

func TestPath(t *testing.T) {
	tbl := New("/1.0/cluster/members", "/1.0/cluster/members/{name}", "/1.0/cluster/members/{name}/state", "machines/{id}/")
	for path, want := range map[string]string{
		"/1.0/cluster/members":                  "/1.0/cluster/members",
		"/1.0/cluster/members/node-1":           "/1.0/cluster/members/{name}",
		"/1.0/cluster/members/a%2Fb":            "/1.0/cluster/members/{name}", // an escaped slash stays one segment
		"/1.0/cluster/members/node-1/state":     "/1.0/cluster/members/{name}/state",
		"/1.0/cluster/members/":                 Other, // an empty name is not a name
		"/1.0/cluster/members/a/b":              Other,
		"/1.0/cluster/members/node-1/state/x":   Other,
		"machines/abc123/":                      "machines/{id}/",
		"machines/abc123":                       Other,
		"/2.0/cluster/members/node-1":           Other,
		"":                                      Other,
		"/1.0/cluster/members/\x00\xff<script>": "/1.0/cluster/members/{name}",
	} {
		if got := tbl.Path(path); got != want {
			t.Errorf("Path(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestMethod(t *testing.T) {
	for m, want := range map[string]string{"GET": "GET", "": "GET", "DELETE": "DELETE", "BREW": "OTHER", "get": "OTHER"} {
		if got := Method(&http.Request{Method: m}); got != want {
			t.Errorf("Method(%q) = %q, want %q", m, got, want)
		}
	}
}
