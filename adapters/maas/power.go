package maas

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Power: the calls fencing makes.

// PowerOff asks MAAS to power the machine off. sent is false when MAAS
// answered null (its driver cannot stop this machine). Even sent == true
// proves nothing: only a later QueryPowerState returning PowerOff does.
func (c *Client) PowerOff(ctx context.Context, systemID string, mode StopMode) (sent bool, err error) {
	if err := checkSystemID(systemID); err != nil {
		return false, err
	}
	switch mode {
	case "":
		mode = StopHard
	case StopHard, StopSoft:
	default:
		return false, fmt.Errorf("power off MAAS machine %s: unknown stop mode %q (use %q or %q)", systemID, mode, StopHard, StopSoft)
	}
	var w *wireMachine
	err = c.do(ctx, call{method: http.MethodPost, path: machinePath(systemID), op: "power_off",
		params: url.Values{"stop_mode": {string(mode)}}}, &w)
	if err != nil {
		return false, fmt.Errorf("power off MAAS machine %s: %w", systemID, err)
	}
	return w != nil, nil
}

// QueryPowerState asks MAAS to query the power controller now (MAAS waits up
// to 60 s for the BMC). Machines whose power type cannot be queried, such as
// "manual", give ErrPowerNotQueryable.
func (c *Client) QueryPowerState(ctx context.Context, systemID string) (PowerState, error) {
	if err := checkSystemID(systemID); err != nil {
		return "", err
	}
	var w struct {
		State string `json:"state"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: machinePath(systemID), op: "query_power_state",
		timeout: c.cfg.PowerQueryTimeout}, &w)
	if err != nil {
		return "", fmt.Errorf("query power state of MAAS machine %s: %w", systemID, err)
	}
	switch s := PowerState(w.State); s {
	case PowerOn, PowerOff, PowerUnknown, PowerError:
		return s, nil
	default:
		return "", fmt.Errorf("query power state of MAAS machine %s: MAAS answered an unknown state %q", systemID, w.State)
	}
}

// PowerOn asks MAAS to power the machine on (a rolling reboot's power cycle, after its
// power-off was confirmed). sent is false when MAAS answered null (its driver cannot
// start this machine). Only a member coming back proves it happened.
func (c *Client) PowerOn(ctx context.Context, systemID string) (sent bool, err error) {
	if err := checkSystemID(systemID); err != nil {
		return false, err
	}
	var w *wireMachine
	if err := c.do(ctx, call{method: http.MethodPost, path: machinePath(systemID), op: "power_on"}, &w); err != nil {
		return false, fmt.Errorf("power on MAAS machine %s: %w", systemID, err)
	}
	return w != nil, nil
}
