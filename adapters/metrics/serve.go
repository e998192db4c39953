package metrics

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Environment variables of the metrics listener (read by app for both processes).
const (
	EnvListen      = "APELORA_METRICS_LISTEN"
	EnvAllowRemote = "APELORA_METRICS_ALLOW_REMOTE"
	EnvPprof       = "APELORA_PPROF"
)

// Config says where metrics are served. The zero Config serves none.
type Config struct {
	// Listen is the address of the metrics listener; empty: no listener, nothing recorded.
	Listen string
	// AllowRemote allows a Listen address that is not loopback. The listener has no
	// authentication: whoever reaches it reads the metrics.
	AllowRemote bool
	// Pprof serves net/http/pprof under /debug/pprof/ on the same listener; loopback only.
	Pprof bool
}

// Validate refuses an address that is not loopback unless allowed, and pprof anywhere
// but on a loopback metrics listener.
func (c Config) Validate() error {
	if c.Listen == "" {
		if c.Pprof {
			return fmt.Errorf("%s=true needs a metrics listener: set %s to a loopback address such as 127.0.0.1:9470", EnvPprof, EnvListen)
		}
		if c.AllowRemote {
			return fmt.Errorf("%s=true without %s: set the listen address too, or unset it", EnvAllowRemote, EnvListen)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil || port == "" {
		return fmt.Errorf("%s=%q: give host:port, such as 127.0.0.1:9470", EnvListen, c.Listen)
	}
	loopback := isLoopback(host)
	if c.Pprof && !loopback {
		return fmt.Errorf("%s=true serves profiles (and can be made to spend CPU) on the metrics listener, so only on loopback: %s=%q is not a loopback address; use an SSH tunnel to reach it", EnvPprof, EnvListen, c.Listen)
	}
	if !loopback && !c.AllowRemote {
		return fmt.Errorf("%s=%q is not a loopback address: the metrics listener has no authentication; set %s=true to serve it there anyway (on a management network, behind a firewall), or use 127.0.0.1", EnvListen, c.Listen, EnvAllowRemote)
	}
	return nil
}

// isLoopback is true for localhost and loopback IP literals; "" (every address) is not.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler serves /metrics (Prometheus text or OpenMetrics) and, when pprof is true,
// net/http/pprof under /debug/pprof/. Nothing else.
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:          m.reg,
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.ContinueOnError,
	})))
	if withPprof {
		// Registered by hand on this mux: importing net/http/pprof also fills
		// http.DefaultServeMux, which Apelora never serves.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
