package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// APELORA_OIDC_*: all that sign-in needs or nothing, a secret file only its owner reads,
// and every mistake named with what to set.
func TestSSOConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := map[string]string{
		"APELORA_PUBLIC_URL":              "https://apelora.example",
		"APELORA_OIDC_ISSUER":             "https://login.example/realms/ops",
		"APELORA_OIDC_CLIENT_ID":          "apelora",
		"APELORA_OIDC_CLIENT_SECRET_FILE": secret,
		"APELORA_OIDC_GROUP_PERMISSIONS":  "ops-admins=manage-infrastructure",
	}
	with := func(change map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := change[k]; ok {
				return v
			}
			return full[k]
		}
	}
	c, err := ConfigFromEnv(with(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SSO.ClientSecret != "s3cret" || c.SSO.GroupsClaim != "groups" || strings.Join(c.SSO.Scopes, " ") != "openid profile email groups offline_access" || c.SSO.Groups.String() != "ops-admins=manage-infrastructure" ||
		c.SSO.Recheck != 5*time.Minute || c.TokenKeyPath() != filepath.Join(c.StateDir, "oidc-token.key") {
		t.Fatalf("read %+v", c.SSO)
	}
	if c, err := ConfigFromEnv(func(k string) string { return "" }); err != nil || c.SSO.Issuer != "" {
		t.Fatalf("nothing set: %+v %v", c.SSO, err)
	}
	for name, tc := range map[string]struct {
		change map[string]string
		want   string
	}{
		"no public URL":     {map[string]string{"APELORA_PUBLIC_URL": ""}, "APELORA_PUBLIC_URL is not"},
		"no client":         {map[string]string{"APELORA_OIDC_CLIENT_ID": ""}, "APELORA_OIDC_CLIENT_ID is not"},
		"no mapping":        {map[string]string{"APELORA_OIDC_GROUP_PERMISSIONS": ""}, "nobody could sign in"},
		"bad mapping":       {map[string]string{"APELORA_OIDC_GROUP_PERMISSIONS": "ops=root"}, `unknown permission "root"`},
		"plain http issuer": {map[string]string{"APELORA_OIDC_ISSUER": "http://login.example"}, "plain http only to loopback"},
		"secret for others": {map[string]string{"APELORA_OIDC_CLIENT_SECRET_FILE": open}, "chmod 600"},
		"missing secret":    {map[string]string{"APELORA_OIDC_CLIENT_SECRET_FILE": filepath.Join(dir, "none")}, "no such file"},
		"client, no issuer": {map[string]string{"APELORA_OIDC_ISSUER": ""}, "set the issuer too"},
		"recheck too short": {map[string]string{"APELORA_OIDC_RECHECK_INTERVAL": "1s"}, "APELORA_OIDC_RECHECK_INTERVAL=\"1s\": give a duration from 10s to 1h0m0s"},
		"recheck no issuer": {map[string]string{"APELORA_OIDC_ISSUER": "", "APELORA_OIDC_CLIENT_ID": "", "APELORA_OIDC_CLIENT_SECRET_FILE": "", "APELORA_OIDC_GROUP_PERMISSIONS": "", "APELORA_OIDC_RECHECK_INTERVAL": "2m"}, "set the issuer too"},
	} {
		if _, err := ConfigFromEnv(with(tc.change)); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want an error saying %q (and never the secret)", name, err, tc.want)
		}
	}
}
