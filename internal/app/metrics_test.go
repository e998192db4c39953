package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/metrics"
)

// Metrics are off unless asked for: no listener, nothing recorded.
func TestMetricsAreOffByDefault(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Monitoring != (metrics.Config{}) {
		t.Fatalf("default monitoring %+v", cfg.Monitoring)
	}
	m, err := StartMetrics(context.Background(), cfg.Monitoring, metrics.Server, slog.New(slog.DiscardHandler))
	if m != nil || err != nil {
		t.Fatalf("StartMetrics without a listener: %v, %v", m, err)
	}
	if ic := cfg.incusClient(nil); ic.WrapTransport == nil || ic.WrapTransport(http.DefaultTransport) != http.DefaultTransport {
		t.Fatal("without metrics the Incus transport must stay as it is")
	}
}

func TestMetricsConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{metrics.EnvPprof: "true"}, metrics.EnvListen},
		{map[string]string{metrics.EnvListen: "0.0.0.0:9470"}, metrics.EnvAllowRemote},
		{map[string]string{metrics.EnvListen: "10.1.2.3:9470", metrics.EnvAllowRemote: "true", metrics.EnvPprof: "true"}, "loopback"},
		{map[string]string{metrics.EnvListen: "127.0.0.1:9470", metrics.EnvPprof: "yes please"}, metrics.EnvPprof},
		{map[string]string{metrics.EnvListen: "127.0.0.1"}, "host:port"},
	} {
		_, err := ConfigFromEnv(env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.env, err, c.want)
		}
		if _, err := WorkerConfigFromEnv(workerEnv(c.env)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("worker %v: %v, want an error naming %s", c.env, err, c.want)
		}
	}
	cfg, err := ConfigFromEnv(env(map[string]string{metrics.EnvListen: "10.1.2.3:9470", metrics.EnvAllowRemote: "TRUE"}))
	if err != nil || !cfg.Monitoring.AllowRemote || cfg.Monitoring.Pprof {
		t.Fatalf("remote with the opt-in: %+v %v", cfg.Monitoring, err)
	}
}

// The listener serves the registry it returns, pprof only when asked, and closes with ctx.
func TestStartMetricsServesAndStops(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, pprof := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		m, err := StartMetrics(ctx, metrics.Config{Listen: addr, Pprof: pprof}, metrics.Worker, log)
		if err != nil || m == nil {
			t.Fatal(err)
		}
		m.Leading(true)
		status := func(path string) (int, string) {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := status("/metrics"); code != http.StatusOK || !strings.Contains(body, "apelora_fence_leading 1") {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		want := http.StatusNotFound
		if pprof {
			want = http.StatusOK
		}
		if code, _ := status("/debug/pprof/"); code != want {
			t.Fatalf("pprof %v: /debug/pprof/ answered %d", pprof, code)
		}
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for code, _ := status("/metrics"); code != 0; code, _ = status("/metrics") {
			if time.Now().After(deadline) {
				t.Fatal("the metrics listener outlived its context")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
