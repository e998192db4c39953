package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/server"
)

// MetricsVariables lists the metrics listener's variables; the server and the worker both
// read them.
func MetricsVariables() []Variable {
	return []Variable{
		{metrics.EnvListen, "(none: off)", "address of the Prometheus metrics listener (/metrics), e.g. 127.0.0.1:9470 (the server) and 127.0.0.1:9471 (a worker); a loopback address unless " + metrics.EnvAllowRemote + " is true; unset, nothing is recorded"},
		{metrics.EnvAllowRemote, "false", "true allows a metrics address that is not loopback (:9470, 10.0.0.5:9470); the listener has no authentication, so put it on a management network or behind a firewall"},
		{metrics.EnvPprof, "false", "true also serves net/http/pprof at /debug/pprof/ on the metrics listener; refused without a metrics listener and on a non-loopback one (profiles cost CPU and show internals: reach them through an SSH tunnel)"},
	}
}

// monitoringConfig reads the metrics listener's variables.
func monitoringConfig(get func(string, string) string) (metrics.Config, error) {
	c := metrics.Config{Listen: get(metrics.EnvListen, "")}
	for _, b := range []struct {
		name string
		into *bool
	}{{metrics.EnvAllowRemote, &c.AllowRemote}, {metrics.EnvPprof, &c.Pprof}} {
		v := get(b.name, "false")
		on, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return c, fmt.Errorf("%s=%q: give true or false", b.name, v)
		}
		*b.into = on
	}
	return c, c.Validate()
}

// StartMetrics starts the metrics listener of a process of the given role when one is
// configured, and returns the registry to record into; with none it returns nil (nothing
// is recorded, and no listener runs). The listener closes when ctx ends.
func StartMetrics(ctx context.Context, c metrics.Config, role metrics.Role, log *slog.Logger) (*metrics.Metrics, error) {
	if c.Listen == "" {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s=%s: %w", metrics.EnvListen, c.Listen, err)
	}
	m := metrics.New(role)
	go func() {
		// The API's own serving loop: it stops with ctx, waiting briefly for a scrape.
		if err := server.Serve(ctx, ln, m.Handler(c.Pprof), 2*time.Second, log); err != nil {
			log.Error("the metrics listener stopped", "error", err)
		}
	}()
	log.Info("serving metrics", "metrics", "http://"+ln.Addr().String()+"/metrics", "pprof", c.Pprof)
	return m, nil
}

// serverObserver is the metrics as the server sees them (nil: none).
func (c Config) serverObserver() server.Observer {
	if c.Metrics == nil {
		return nil
	}
	return c.Metrics
}

// fenceObserver is the metrics as the fencing worker sees them (nil: none).
func (c Config) fenceObserver() fencing.Observer {
	if c.Metrics == nil {
		return nil
	}
	return c.Metrics
}

// incusAvailability tells the metrics whether each read of the Incus members (the fleet,
// the cluster view) reached Incus.
type incusAvailability struct {
	membership.Source
	m *metrics.Metrics
}

func (a incusAvailability) Snapshot(ctx context.Context) (*membership.Snapshot, error) {
	s, err := a.Source.Snapshot(ctx)
	if ctx.Err() == nil { // a caller that left says nothing about Incus
		a.m.SourceAvailable(metrics.Incus, err == nil)
	}
	return s, err
}

// maasAvailability tells the metrics whether each fleet read of the MAAS machines reached
// MAAS.
type maasAvailability struct {
	fleet.MAASMachines
	m *metrics.Metrics
}

func (a maasAvailability) Machines(ctx context.Context) ([]provisioning.MAASMachine, error) {
	ms, err := a.MAASMachines.Machines(ctx)
	if ctx.Err() == nil {
		a.m.SourceAvailable(metrics.MAAS, err == nil)
	}
	return ms, err
}
