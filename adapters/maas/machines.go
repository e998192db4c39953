package maas

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Machines: listing and reading machines, and what every machine call shares.

// MachineFilter narrows Machines. Empty fields do not filter; values within
// one field are ORed, fields are ANDed (MAAS's semantics).
type MachineFilter struct {
	SystemIDs []string
	Hostnames []string
	Statuses  []Status
	Zone      string
	Pool      string
}

func (f MachineFilter) values() (url.Values, error) {
	v := url.Values{}
	for _, id := range f.SystemIDs {
		if err := checkSystemID(id); err != nil {
			return nil, err
		}
		v.Add("id", id)
	}
	for _, h := range f.Hostnames {
		if h == "" {
			return nil, fmt.Errorf("machine filter: empty hostname")
		}
		v.Add("hostname", h)
	}
	for _, s := range f.Statuses {
		if !s.Valid() {
			return nil, fmt.Errorf("machine filter: unknown MAAS status %d", int(s))
		}
		v.Add("status", s.FilterName())
	}
	if f.Zone != "" {
		v.Set("zone", f.Zone)
	}
	if f.Pool != "" {
		v.Set("pool", f.Pool)
	}
	return v, nil
}

// Machines lists machines in one GET machines/ call, ordered as MAAS orders
// them (by creation).
func (c *Client) Machines(ctx context.Context, f MachineFilter) ([]Machine, error) {
	params, err := f.values()
	if err != nil {
		return nil, err
	}
	var ws []wireMachine
	if err := c.do(ctx, call{method: http.MethodGet, path: "machines/", params: params}, listOf(&ws)); err != nil {
		return nil, fmt.Errorf("list MAAS machines: %w", err)
	}
	out := make([]Machine, len(ws))
	for i := range ws {
		out[i] = ws[i].machine()
	}
	return out, nil
}

// Machine reads one machine. An unknown system ID gives ErrNotFound.
func (c *Client) Machine(ctx context.Context, systemID string) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	return c.machineCall(ctx, fmt.Sprintf("read MAAS machine %s", systemID),
		call{method: http.MethodGet, path: machinePath(systemID)})
}

func (c *Client) machineCall(ctx context.Context, what string, cl call) (Machine, error) {
	var w wireMachine
	if err := c.do(ctx, cl, &w); err != nil {
		return Machine{}, fmt.Errorf("%s: %w", what, err)
	}
	return w.machine(), nil
}

// checkSystemID refuses what the domain refuses (machines.IsSystemID, the one rule), so
// no id that registration or a fence mapping would refuse is ever sent, and nothing with
// a slash or other URL syntax reaches a path.
func checkSystemID(id string) error {
	if !machines.IsSystemID(id) {
		return fmt.Errorf("invalid MAAS system ID %s: MAAS system ids are 4–16 lower-case letters and digits, such as \"k7qpwx\"", apperr.Quote(id))
	}
	return nil
}

func machinePath(id string) string { return "machines/" + id + "/" }
