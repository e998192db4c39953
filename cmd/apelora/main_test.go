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
}
