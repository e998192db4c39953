package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/testkit/oidcprovider"
	"github.com/apelora/fabric/testkit/producttest"
)

// `apeloractl login` signs in through the real provider with the device authorization
// grant: the user approves the printed code, the command keeps an Apelora session token
// (mode 0600, no provider token) that later commands use, with the permissions of the
// user's groups; revoking the identity ends it, and a user in no mapped group is refused.
func TestLoginWithTheDeviceGrant(t *testing.T) {
	idp := oidcprovider.Start(t)
	groups, err := identity.ParseGroupPermissions("ops-admins=manage-infrastructure;ops-viewers=view-infrastructure")
	if err != nil {
		t.Fatal(err)
	}
	e := producttest.Start(t, producttest.WithSSO(idp.Issuer, "apelora", "apelora-secret", groups))
	idp.AddClient("apelora", "apelora-secret", e.Base+server.SSOCallbackPath)
	idp.AddUser("alice", "ops-viewers")
	idp.AddUser("nadia", "staff")
	admin := e.Identity("admin", identity.ManageInfrastructure)
	file := filepath.Join(t.TempDir(), "config", "apelora", "session")
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", "")
	t.Setenv("APELORA_SESSION_FILE", file)
	ctx := context.Background()

	login := func(user string) (string, error) {
		t.Helper()
		var out producttest.SyncBuffer
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"login"}, &out) }()
		code := regexp.MustCompile(`enter the code (\S+)`)
		deadline := time.Now().Add(30 * time.Second)
		for !code.MatchString(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("login printed no code: %s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := idp.ApproveDevice(ctx, code.FindStringSubmatch(out.String())[1], user); err != nil {
			t.Fatal(err)
		}
		err := <-done
		return out.String(), err
	}

	out, err := login("alice")
	if err != nil || !strings.Contains(out, "signed in as alice") {
		t.Fatalf("login: %v\n%s", err, out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(file)
	if tok := strings.TrimSpace(string(raw)); !strings.HasPrefix(tok, "aps_") || strings.Count(tok, ".") != 0 {
		t.Fatalf("the session file holds something else than an Apelora session token: %.8s…", tok)
	}
	var who producttest.SyncBuffer
	if err := run(ctx, []string{"whoami"}, &who); err != nil || !strings.Contains(who.String(), "alice") || !strings.Contains(who.String(), "VIEW_INFRASTRUCTURE") {
		t.Fatalf("whoami with the session token: %v %s", err, who.String())
	}
	// Signing out ends the session on the server and removes the file; signing in again
	// makes a new one for the same identity.
	if err := run(ctx, []string{"logout"}, &who); err != nil {
		t.Fatalf("logout: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the session file after logout: %v", err)
	}
	if n := e.Scalar(`SELECT count(*) FROM console_sessions`); n != int64(0) {
		t.Fatalf("%v sessions left after logout", n)
	}
	if out, err := login("alice"); err != nil {
		t.Fatalf("login again: %v\n%s", err, out)
	}
	// A viewer group changes nothing.
	if err := run(ctx, []string{"register", "node-1"}, &who); exitStatus(err) == 0 || !strings.Contains(err.Error(), "FORBIDDEN") {
		t.Fatalf("a viewer's register: %v", err)
	}
	e.MustGQL(admin, `mutation { revokeIdentity(input: {name: "alice"}) { identity { name } } }`, nil)
	if err := run(ctx, []string{"whoami"}, &who); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("whoami after the revocation: %v", err)
	}

	if _, err := login("nadia"); err == nil || !strings.Contains(err.Error(), "FORBIDDEN") || !strings.Contains(err.Error(), "ops-admins, ops-viewers") {
		t.Fatalf("a user in no mapped group: %v", err)
	}
}
