package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/testkit/incuslab"
)

// TestScript drives incus-lab as scripts/run.sh does: start, status, env (read by
// ConfigFromEnv), cli, a refused second start, stop. The lab outlives the command that
// started it: its daemons hold the address block.
func TestScript(t *testing.T) {
	incuslab.Require(t)
	block, lock, err := incuslab.ReserveBlock(2)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close() // the lab takes the lock itself
	dir := filepath.Join(t.TempDir(), "lab")
	t.Setenv("APELORA_INCUS_LAB_BLOCK", strings.TrimSuffix(block, "."))
	t.Setenv("APELORA_INCUS_LAB_DIR", dir)
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(args, &out, &out)
		return out.String(), err
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("stop in cleanup: %v\n%s", err, out)
		}
	})

	out, err := run("start", "2")
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	t.Logf("start:\n%s", out)

	out, err = run("status")
	if err != nil || strings.Count(out, "running") != 2 || strings.Count(out, "ONLINE") != 2 {
		t.Fatalf("status: %v\n%s", err, out)
	}

	out, err = run("env")
	if err != nil {
		t.Fatalf("env: %v\n%s", err, out)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "="); ok {
			vars[k] = v
		}
	}
	cfg, err := incus.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("ConfigFromEnv(%v): %v", vars, err)
	}
	cl, err := incus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ms, err := cl.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members over HTTPS from the lab's env: %v %v", ms, err)
	}

	if out, err := run("cli", "m2", "cluster", "list", "--format", "csv"); err != nil || !strings.Contains(out, "m2,") {
		t.Fatalf("cli: %v\n%s", err, out)
	}
	if out, err := run("start", "2"); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second start: %v\n%s", err, out)
	}
	// The daemons hold the block's lock, not the command that started them.
	if _, err := run("start", "1", filepath.Join(t.TempDir(), "other")); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second lab on the same block: %v", err)
	}

	pids := []int{}
	for _, m := range []string{"m1", "m2"} {
		data, err := os.ReadFile(filepath.Join(dir, m, "pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if out, err := run("stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	for _, pid := range pids {
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
			t.Errorf("pid %d still alive after stop: %s", pid, st)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("lab dir still there: %v", err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Fatal("mounts left under the lab dir")
	}

	// A directory that is not a lab's is left alone; no arguments is a usage error.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "keep-me"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := incuslab.Stop(plain); err == nil {
		t.Fatal("stop accepted a directory that is not a lab's")
	}
	if _, err := os.Stat(filepath.Join(plain, "keep-me")); err != nil {
		t.Fatal("stop touched a directory that is not a lab's")
	}
	if _, err := run(); err != errUsage {
		t.Fatalf("no arguments: %v", err)
	}
}
