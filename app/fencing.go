package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/fencing"
)

// fenceMAAS adapts the MAAS client to fencing's ports, classifying MAAS's errors with
// fencing's error classes while keeping MAAS's own words (which never carry the key).
type fenceMAAS struct{ c *maas.Client }

var (
	_ fencing.MAAS          = fenceMAAS{}
	_ fencing.MachineReader = fenceMAAS{}
)

// classified keeps an error's text and adds the class fencing branches on.
type classified struct{ err, class error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.err, c.class} }

func classify(err error, refusedMeansRefused bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, maas.ErrNotFound):
		return classified{err, fencing.ErrMachineNotFound}
	case errors.Is(err, maas.ErrPowerNotQueryable):
		return classified{err, fencing.ErrPowerNotQueryable}
	case refusedMeansRefused && (errors.Is(err, maas.ErrBadRequest) || errors.Is(err, maas.ErrForbidden) ||
		errors.Is(err, maas.ErrConflict) || errors.Is(err, maas.ErrUnauthorized)):
		// MAAS answered no: it did not power anything off.
		return classified{err, fencing.ErrMAASRefused}
	}
	return err
}

func (f fenceMAAS) Machine(ctx context.Context, systemID string) (fencing.MachineFacts, error) {
	m, err := f.c.Machine(ctx, systemID)
	if err != nil {
		return fencing.MachineFacts{}, classify(err, false)
	}
	return fencing.MachineFacts{SystemID: m.SystemID, Hostname: m.Hostname, HardwareUUID: m.HardwareUUID, PowerType: m.PowerType}, nil
}

func (f fenceMAAS) QueryPowerState(ctx context.Context, systemID string) (string, error) {
	s, err := f.c.QueryPowerState(ctx, systemID)
	return string(s), classify(err, false)
}

func (f fenceMAAS) PowerOff(ctx context.Context, systemID string) (bool, error) {
	sent, err := f.c.PowerOff(ctx, systemID, maas.StopHard)
	return sent, classify(err, true)
}

// fenceIncus reads member statuses and the server configuration, asking the configured
// members in order: the one a worker talks to may be the one that died.
type fenceIncus struct {
	clients []*incus.Client
	mu      *sync.Mutex
	first   *int // index of the member that answered last
}

func newFenceIncus(clients ...*incus.Client) fenceIncus {
	return fenceIncus{clients: clients, mu: &sync.Mutex{}, first: new(int)}
}

var (
	_ fencing.Cluster       = fenceIncus{}
	_ fencing.ClusterConfig = fenceIncus{}
)

// each calls fn on the members in turn, starting with the one that answered last.
func (f fenceIncus) each(fn func(*incus.Client) error) error {
	f.mu.Lock()
	start := *f.first
	f.mu.Unlock()
	var errs []error
	for i := range f.clients {
		n := (start + i) % len(f.clients)
		err := fn(f.clients[n])
		if err == nil {
			f.mu.Lock()
			*f.first = n
			f.mu.Unlock()
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.clients[n].Endpoint(), err))
	}
	return errors.Join(errs...)
}

func (f fenceIncus) Observe(ctx context.Context) ([]fencing.Observation, error) {
	var out []fencing.Observation
	err := f.each(func(c *incus.Client) error {
		ms, err := c.Members(ctx)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, m := range ms {
			out = append(out, fencing.Observation{Name: m.ServerName, Status: m.Status})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the Incus members: %w", err)
	}
	return out, nil
}

func (f fenceIncus) ServerConfig(ctx context.Context) (map[string]string, error) {
	var cfg map[string]string
	err := f.each(func(c *incus.Client) (err error) {
		cfg, err = c.GetServerConfig(ctx)
		return err
	})
	if err != nil {
		return nil, incusErr(err, "read the cluster configuration")
	}
	return cfg, nil
}
