package audit

import "testing"

func TestRedactKeepsSettingNamesAndHidesSecretSettings(t *testing.T) {
	// Bound, which every stored event goes through, decides secrets by the same rule.
	for _, redact := range []func(map[string]any) map[string]any{Redact, func(p map[string]any) map[string]any { return Bound(Event{Parameters: p}).Parameters }} {
		testRedact(t, redact)
	}
}

func testRedact(t *testing.T, redact func(map[string]any) map[string]any) {
	t.Helper()
	got := redact(map[string]any{"input": map[string]any{
		"name": "node-1",
		"memberConfig": []any{
			map[string]any{"entity": "storage-pool", "name": "local", "key": "source", "value": "/dev/sdb"},
			map[string]any{"entity": "network", "name": "uplink", "key": "bgp.peers.spine.password", "value": "hunter2"},
		},
		"key":       "a lone key is still a secret",
		"apiKey":    "s3cret",
		"joinToken": "t",
	}})
	in := got["input"].(map[string]any)
	entries := in["memberConfig"].([]any)
	if e := entries[0].(map[string]any); e["key"] != "source" || e["value"] != "/dev/sdb" {
		t.Errorf("a plain setting was redacted: %v", e)
	}
	if e := entries[1].(map[string]any); e["key"] != "bgp.peers.spine.password" || e["value"] != "[redacted]" {
		t.Errorf("a password setting's value was kept: %v", e)
	}
	for _, k := range []string{"key", "apiKey", "joinToken"} {
		if in[k] != "[redacted]" {
			t.Errorf("%s = %v, want it redacted", k, in[k])
		}
	}
}
