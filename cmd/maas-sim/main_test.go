package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
)

// syncBuffer lets the test read what run prints while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesFixtureOverTLSWithoutPrintingTheKey(t *testing.T) {
	dir := t.TempDir()
	keyFile, certFile := filepath.Join(dir, "maas.key"), filepath.Join(dir, "maas.pem")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-fixture", "testdata/fixture.json", "-generate", "5",
			"-key-file", keyFile, "-write-key", "-tls", "ca-signed", "-cert-out", certFile, "-v"}, &stdout, &stderr)
	}()
	var base string
	// Bounded against hanging, generously: a loaded machine may take seconds to start it.
	for deadline := time.Now().Add(time.Minute); base == "" && time.Now().Before(deadline); {
		if out := stdout.String(); strings.Contains(out, "listening on ") {
			base = strings.Fields(strings.SplitAfter(out, "listening on ")[1])[0]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run ended: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if base == "" {
		t.Fatalf("no listening line: %q", stdout.String())
	}
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st)
	}
	key, _ := os.ReadFile(keyFile)
	c, err := maas.New(maas.Config{BaseURL: base, APIKey: string(key), CAFile: certFile})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := c.Machines(ctx, maas.MachineFilter{})
	if err != nil || len(ms) != 9 {
		t.Fatalf("%d machines, %v", len(ms), err)
	}
	if ms[0].SystemID != "k7qpwx" || ms[0].HardwareInfo.SystemProduct != "PowerEdge R650" || ms[0].StorageMB != 1920394.248192 {
		t.Fatalf("first machine %+v", ms[0])
	}
	if disks, err := c.BlockDevices(ctx, "k7qpwx"); err != nil || len(disks) != 2 || disks[1].Model != "MZ7L3960" {
		t.Fatalf("the fixture's disks: %+v %v", disks, err)
	}
	if nics, err := c.Interfaces(ctx, "k7qpwx"); err != nil || len(nics) != 3 || nics[0].LinkSpeedMbps != 25000 || nics[2].LinkConnected {
		t.Fatalf("the fixture's interfaces: %+v %v", nics, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(string(key)), ":")
	for _, out := range []string{stdout.String(), stderr.String()} {
		for _, p := range parts {
			if strings.Contains(out, p) {
				t.Fatalf("output contains part of the key: %q", out)
			}
		}
	}
	if !strings.Contains(stderr.String(), "op=") {
		t.Fatalf("-v logged no requests: %q", stderr.String())
	}
}

func TestRunRefusesWithoutKey(t *testing.T) {
	t.Setenv("MAAS_SIM_API_KEY", "")
	t.Setenv("MAAS_SIM_API_KEY_FILE", "")
	err := run(context.Background(), []string{"-listen", "127.0.0.1:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "MAAS_SIM_API_KEY") {
		t.Fatalf("%v", err)
	}
}
