package maas

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestOperationNameIsATemplate(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "https://maas:5240/MAAS/api/2.0/machines/", "GET /api/2.0/machines/"},
		{"GET", "https://maas:5240/MAAS/api/2.0/machines/?hostname=node-7&zone=z1", "GET /api/2.0/machines/"},
		{"GET", "https://maas:5240/MAAS/api/2.0/machines/abc123/", "GET /api/2.0/machines/{system_id}/"},
		{"GET", "https://maas:5240/MAAS/api/2.0/machines/abc123/?op=query_power_state", "GET /api/2.0/machines/{system_id}/?op=query_power_state"},
		{"POST", "https://maas:5240/MAAS/api/2.0/machines/abc123/?op=power_off", "POST /api/2.0/machines/{system_id}/?op=power_off"},
		{"POST", "https://maas:5240/MAAS/api/2.0/machines/?op=allocate", "POST /api/2.0/machines/?op=allocate"},
		{"GET", "https://maas/api/2.0/nodes/abc123/blockdevices/", "GET /api/2.0/nodes/{system_id}/blockdevices/"},
		{"GET", "https://maas/MAAS/api/2.0/nodes/abc123/interfaces/", "GET /api/2.0/nodes/{system_id}/interfaces/"},
		{"GET", "https://maas/MAAS/api/2.0/users/?op=whoami", "GET /api/2.0/users/?op=whoami"},
		{"GET", "https://maas/MAAS/api/2.0/maas/?op=get_config&name=secret", "GET /api/2.0/maas/?op=get_config"},
		{"GET", "https://maas/MAAS/api/2.0/version/", "GET /api/2.0/version/"},
		{"POST", "https://maas/MAAS/api/2.0/machines/abc123/?op=hostile-op-0123456789", "POST /api/2.0/machines/{system_id}/?op=other"},
		{"GET", "https://maas/MAAS/api/2.0/tags/secret/", "GET other"},
		{"GET", "https://maas/elsewhere", "GET other"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		got := OperationName(&http.Request{Method: c.method, URL: u})
		if got != c.want {
			t.Errorf("%s %s: got %q, want %q", c.method, c.url, got, c.want)
		}
		if strings.Contains(got, "abc123") || strings.Contains(got, "secret") || strings.Contains(got, "node-7") {
			t.Errorf("%s %s: the name %q carries a value", c.method, c.url, got)
		}
	}
}
