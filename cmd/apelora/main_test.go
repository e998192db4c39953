package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/localpg"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
)

// The embedded default: with no APELORA_DATABASE_URL, `identity create` and `serve` share
// a local PostgreSQL from the system's binaries in the state folder, run as the postgres
// user because the tests run as root (as CI and a fresh machine do).
func TestEmbeddedDefaultDatabaseIsSharedByIdentityCreateAndServe(t *testing.T) {
	if _, err := localpg.FindBinDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("SKIPPED: %v", err)
	}
	// Not t.TempDir(): its parent is private to root, and the postgres user must reach it.
	dir, err := os.MkdirTemp("/var/tmp", "apelora-embedded-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	t.Setenv("APELORA_STATE_DIR", state)
	t.Setenv("APELORA_DATABASE_URL", "")
	for _, k := range []string{"APELORA_INCUS_URL", "APELORA_INCUS_SOCKET", "APELORA_MAAS_URL", "APELORA_MAAS_API_KEY"} {
		t.Setenv(k, "")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("APELORA_LISTEN", addr)

	ctx := context.Background()
	do := func(args ...string) (string, string, error) {
		var out, log bytes.Buffer
		err := run(ctx, args, &out, &log)
		return out.String(), log.String(), err
	}
	out, log, err := do("identity", "create", "--name", "alice", "--permission", "manage-infrastructure")
	if err != nil {
		t.Fatalf("identity create: %v\n%s", err, log)
	}
	token := regexp.MustCompile(`apl_[A-Za-z0-9_-]{43}`).FindString(out)
	if token == "" || !strings.Contains(log, "no APELORA_DATABASE_URL: using a local PostgreSQL") {
		t.Fatalf("identity create printed %q, logged %q", out, log)
	}
	if strings.Contains(log, token) {
		t.Fatal("the token is in the log")
	}
	if _, _, err := do("identity", "create", "--name", "alice", "--permission", "view-infrastructure"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate identity: %v", err)
	}
	if _, _, err := do("identity", "create", "--name", "bob", "--permission", "root"); err == nil || !strings.Contains(err.Error(), "manage-infrastructure") {
		t.Fatalf("unknown permission: %v", err)
	}
	if _, _, err := do("identity", "create", "--name", "bob"); err == nil || !strings.Contains(err.Error(), "at least one permission") {
		t.Fatalf("no permission: %v", err)
	}
	if out, _, err := do("migrate"); err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate: %v %s", err, out)
	}

	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var serveLog bytes.Buffer
	go func() { done <- run(sctx, []string{"serve"}, &bytes.Buffer{}, &serveLog) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve ended with %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/graphql", strings.NewReader(`{"query":"{ viewer { name } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Data struct{ Viewer struct{ Name string } }
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if body.Data.Viewer.Name != "alice" {
		t.Fatalf("the identity made before serve is not the one serve knows: %+v", body)
	}
}

func TestCommandLineMistakes(t *testing.T) {
	var out, log bytes.Buffer
	if err := run(context.Background(), nil, &out, &log); err == nil || !strings.Contains(log.String(), "usage:") {
		t.Fatalf("no command: %v", err)
	}
	if err := run(context.Background(), []string{"frobnicate"}, &out, &log); err == nil {
		t.Fatal("unknown command accepted")
	}
	out.Reset()
	if err := run(context.Background(), []string{"env"}, &out, &log); err != nil || !strings.Contains(out.String(), "APELORA_MAAS_API_KEY") {
		t.Fatalf("env: %v %s", err, out.String())
	}
	// A version answers on a host whose environment file is not filled in yet (the package
	// installs one to edit): configuration mistakes must not hide it.
	t.Setenv("APELORA_LOG_LEVEL", "loud")
	out.Reset()
	if err := run(context.Background(), []string{"version"}, &out, &log); err != nil || !strings.HasPrefix(out.String(), "apelora ") || !strings.Contains(out.String(), "(commit ") {
		t.Fatalf("version with a bad configuration: %v %q", err, out.String())
	}
}

// `apelora identity` on the server: the same rules as the API, audited as local:USER, and
// the way back when no manager is left.
func TestIdentityCommandsOnTheServer(t *testing.T) {
	db := pgtest.New(t)
	t.Setenv("APELORA_DATABASE_URL", db.URL)
	ctx := t.Context()
	do := func(args ...string) (string, string, error) {
		var out, log bytes.Buffer
		err := run(ctx, args, &out, &log)
		return out.String(), log.String(), err
	}
	out, log, err := do("identity", "create", "--name", "alice", "--permission", "manage-infrastructure", "--expires", "90d")
	token := regexp.MustCompile(`apl_[A-Za-z0-9_-]{43}`).FindString(out)
	if err != nil || token == "" || !strings.Contains(out, "expiring") || strings.Contains(log, token) {
		t.Fatalf("identity create --expires: %v\n%s\n%s", err, out, log)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"identity", "create", "--name", "eraser", "--permission", "hardware.delete"}, "could do nothing"},
		{[]string{"identity", "create", "--name", "old", "--permission", "view-infrastructure", "--expires", "2001-01-01T00:00:00Z"}, "not in the future"},
		{[]string{"identity", "create", "--name", "old", "--permission", "view-infrastructure", "--expires", "soon"}, "not a duration"},
		{[]string{"identity", "revoke", "nobody"}, "no identity named"},
		{[]string{"identity", "revoke"}, "usage"},
		{[]string{"identity", "rename", "alice"}, "unknown subcommand"},
	} {
		if _, _, err := do(c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.says)
		}
	}
	// The last manager can be revoked here, with a word about it.
	out, _, err = do("identity", "revoke", "alice")
	if err != nil || !strings.Contains(out, `revoked identity "alice"`) || !strings.Contains(out, "no active identity has manage-infrastructure") {
		t.Fatalf("identity revoke: %v\n%s", err, out)
	}
	if _, _, err := do("identity", "revoke", "alice"); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, _, err := do("identity", "create", "--name", "bob", "--permission", "view-infrastructure"); err != nil {
		t.Fatal(err)
	}
	out, _, err = do("identity", "list")
	if err != nil || !regexp.MustCompile(`alice\s+manage-infrastructure\s+revoked .* by local:`).MatchString(out) ||
		!regexp.MustCompile(`bob\s+view-infrastructure\s+active\s`).MatchString(out) || strings.Contains(out, "apl_") {
		t.Fatalf("identity list: %v\n%s", err, out)
	}
	// Each command that changed (or tried to change) something wrote one audit event.
	var actions string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT string_agg(action || ':' || outcome, ' ' ORDER BY id) FROM audit_events WHERE actor LIKE 'local:%'`).Scan(&actions); err != nil {
		t.Fatal(err)
	}
	want := "createIdentity:SUCCEEDED createIdentity:REFUSED createIdentity:REFUSED createIdentity:REFUSED revokeIdentity:REFUSED revokeIdentity:SUCCEEDED revokeIdentity:REFUSED createIdentity:SUCCEEDED"
	if actions != want {
		t.Fatalf("audited %s\nwant    %s", actions, want)
	}
	var leaked int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events e WHERE to_jsonb(e)::text LIKE '%apl_%'`).Scan(&leaked); err != nil || leaked != 0 {
		t.Fatalf("%d audit events hold a token (%v)", leaked, err)
	}
}

// `apelora identity create --grant P@CLUSTER` grants a permission in one registered
// cluster only; an unregistered cluster or a grant that gives nothing is refused, audited.
func TestIdentityCreateGrantsInOneCluster(t *testing.T) {
	db := pgtest.New(t)
	t.Setenv("APELORA_DATABASE_URL", db.URL)
	ctx := t.Context()
	do := func(args ...string) (string, error) {
		var out, log bytes.Buffer
		err := run(ctx, args, &out, &log)
		return out.String(), err
	}
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack1', '/nonexistent/rack1', true, 'test')`); err != nil {
		t.Fatal(err)
	}
	out, err := do("identity", "create", "--name", "rack1-ops", "--grant", "manage-infrastructure@rack1", "--grant", "hardware.delete@rack1", "--permission", "view-infrastructure")
	if err != nil || !strings.Contains(out, `created identity "rack1-ops" with [view-infrastructure hardware.delete@rack1 manage-infrastructure@rack1]`) {
		t.Fatalf("create with grants: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"identity", "create", "--name", "typo", "--grant", "manage-infrastructure@rack9"}, "no registered cluster for the grant manage-infrastructure@rack9"},
		{[]string{"identity", "create", "--name", "eraser", "--grant", "hardware.delete@rack1"}, "add manage-infrastructure@rack1"},
	} {
		if _, err := do(c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.says)
		}
	}
	// view-infrastructure@rack1 scopes the identity's reads to rack1 (identity.ReadScope).
	if out, err := do("identity", "create", "--name", "reader", "--grant", "view-infrastructure@rack1"); err != nil || !strings.Contains(out, `created identity "reader" with [view-infrastructure@rack1]`) {
		t.Fatalf("create a reader of rack1: %v\n%s", err, out)
	}
	out, err = do("identity", "list")
	if err != nil || !regexp.MustCompile(`rack1-ops\s+view-infrastructure,hardware.delete@rack1,manage-infrastructure@rack1\s+active`).MatchString(out) {
		t.Fatalf("identity list: %v\n%s", err, out)
	}
	var actions string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT string_agg(action || ':' || outcome, ' ' ORDER BY id) FROM audit_events WHERE actor LIKE 'local:%'`).Scan(&actions); err != nil {
		t.Fatal(err)
	}
	if want := "createIdentity:SUCCEEDED createIdentity:REFUSED createIdentity:REFUSED createIdentity:SUCCEEDED"; actions != want {
		t.Fatalf("audited %s, want %s", actions, want)
	}
}
